"""docsparse.AsyncClient: the asyncio client on grpc.aio, the same methods as
docsparse.Client, as coroutines."""
from __future__ import annotations

import asyncio
from typing import AsyncIterator, Iterable, List, Optional, Sequence, Tuple, Union

import grpc
import grpc.aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from . import _convert
from ._client import (DEFAULT_CHANNEL_OPTIONS, DEFAULT_TARGET, _health_status, _Settings,
                      _StreamOutcome)
from ._convert import Document, pb, pb_grpc
from ._errors import DocsparseError
from ._results import ClassifyResult, EmbedResult, ModelInfo, SummarizeResult
from ._types import Budget, ExtractiveParams, GenerationParams, HealthStatus, Overflow, Pooling

__all__ = ["AsyncClient", "AsyncSummaryStream"]


class AsyncClient:
    """An asyncio docsparse client (grpc.aio); see docsparse.Client for the
    arguments, which are the same.

        async with docsparse.AsyncClient("127.0.0.1:50051") as client:
            result = await client.embed(text)
            stream = await client.summarize(text, stream=True, model="bart")
            async for piece in stream:
                print(piece, end="")
            print(stream.cost.total_gflops)

    Make it inside a running event loop and use it from that loop only.
    """

    def __init__(self, target: str = DEFAULT_TARGET, *, model: Optional[str] = None,
                 timeout: Optional[float] = None, credentials: Optional[grpc.ChannelCredentials] = None,
                 metadata: Optional[Sequence[Tuple[str, str]]] = None,
                 options: Optional[Sequence[Tuple[str, object]]] = None) -> None:
        channel_options = list(DEFAULT_CHANNEL_OPTIONS) + list(options or ())
        if credentials is None:
            self._channel = grpc.aio.insecure_channel(target, options=channel_options)
        else:
            self._channel = grpc.aio.secure_channel(target, credentials, options=channel_options)
        self._settings = _Settings(model, timeout, metadata)
        self._stub = pb_grpc.DocumentServiceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    async def close(self) -> None:
        """Closes the channel; calls in flight are cancelled."""
        await self._channel.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.close()

    async def embed(self, document: Document, *, model: Optional[str] = None,
                    budget: Optional[Budget] = None, pooling: Union[Pooling, str, None] = None,
                    normalize: Optional[bool] = None, overflow: Union[Overflow, str, None] = None,
                    return_mask_map: bool = False, mask_map_resolution: Optional[int] = None,
                    request_id: Optional[str] = None,
                    timeout: Optional[float] = None) -> EmbedResult:
        request = _convert.embed_request(
            document, model or self._settings.model, budget,
            _convert.options_to_proto(overflow, return_mask_map, mask_map_resolution, request_id),
            pooling, normalize)
        return _convert.embed_from_proto(await self._unary(self._stub.Embed, request, timeout))

    async def embed_many(self, documents: Sequence[Document], *, model: Optional[str] = None,
                         budget: Optional[Budget] = None,
                         pooling: Union[Pooling, str, None] = None,
                         normalize: Optional[bool] = None,
                         overflow: Union[Overflow, str, None] = None,
                         timeout: Optional[float] = None) -> List[EmbedResult]:
        """Embeds each document in its own concurrent call; results in order.
        The first failure cancels the others and is raised."""
        calls = [
            asyncio.ensure_future(self.embed(d, model=model, budget=budget, pooling=pooling,
                                             normalize=normalize, overflow=overflow,
                                             timeout=timeout))
            for d in _convert.as_list(documents)
        ]
        try:
            return list(await asyncio.gather(*calls))
        finally:
            for call in calls:
                call.cancel()

    async def classify(self, document: Document, labels: Optional[Iterable[str]] = None, *,
                       temperature: Optional[float] = None, model: Optional[str] = None,
                       budget: Optional[Budget] = None,
                       overflow: Union[Overflow, str, None] = None,
                       return_mask_map: bool = False, mask_map_resolution: Optional[int] = None,
                       request_id: Optional[str] = None,
                       timeout: Optional[float] = None) -> ClassifyResult:
        request = _convert.classify_request(
            document, model or self._settings.model, budget,
            _convert.options_to_proto(overflow, return_mask_map, mask_map_resolution, request_id),
            labels, temperature)
        return _convert.classify_from_proto(
            await self._unary(self._stub.Classify, request, timeout))

    async def summarize(self, document: Document, *, stream: bool = False,
                        generation: Optional[GenerationParams] = None,
                        extractive: Optional[ExtractiveParams] = None,
                        model: Optional[str] = None, budget: Optional[Budget] = None,
                        overflow: Union[Overflow, str, None] = None,
                        return_mask_map: bool = False, mask_map_resolution: Optional[int] = None,
                        request_id: Optional[str] = None, timeout: Optional[float] = None
                        ) -> Union[SummarizeResult, "AsyncSummaryStream"]:
        """As Client.summarize; with stream=True an AsyncSummaryStream to
        iterate with `async for`."""
        request = _convert.summarize_request(
            document, model or self._settings.model, budget,
            _convert.options_to_proto(overflow, return_mask_map, mask_map_resolution, request_id),
            generation, extractive)
        if stream:
            call = self._stub.SummarizeStream(request, **self._settings.call_args(timeout))
            return AsyncSummaryStream(call, request.model)
        return _convert.summarize_from_proto(
            await self._unary(self._stub.Summarize, request, timeout))

    async def models(self, *, timeout: Optional[float] = None) -> List[ModelInfo]:
        return _convert.models_from_proto(
            await self._unary(self._stub.ListModels, pb.ListModelsRequest(), timeout))

    async def health(self, service: str = "", *,
                     timeout: Optional[float] = None) -> HealthStatus:
        response = await self._unary(self._health.Check,
                                     health_pb2.HealthCheckRequest(service=service), timeout)
        return _health_status(response.status)

    async def wait_until_ready(self, timeout: float = 60.0, service: str = "") -> None:
        """As Client.wait_until_ready."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        last = "no answer"
        while True:
            left = deadline - loop.time()
            if left <= 0:
                raise DocsparseError("DEADLINE_EXCEEDED",
                                     f"not SERVING after {timeout:g} s (last: {last})")
            try:
                response = await self._health.Check(
                    health_pb2.HealthCheckRequest(service=service), timeout=min(left, 5.0),
                    wait_for_ready=True, metadata=self._settings.metadata or None)
                status = _health_status(response.status)
                if status is HealthStatus.SERVING:
                    return
                last = status.name
            except grpc.RpcError as error:
                last = str(DocsparseError.from_rpc_error(error))
            await asyncio.sleep(min(0.1, max(0.0, deadline - loop.time())))

    async def _unary(self, method, request, timeout: Optional[float]):
        try:
            return await method(request, **self._settings.call_args(timeout))
        except grpc.RpcError as error:
            raise DocsparseError.from_rpc_error(error) from None


class AsyncSummaryStream(_StreamOutcome):
    """As docsparse.SummaryStream, for `async for`; `await collect()` drains
    it and returns `result`."""

    _drain = "await collect()"

    def __init__(self, call, model: str) -> None:
        self._call = call
        self._accumulator = _convert.StreamAccumulator(model)

    def __aiter__(self) -> AsyncIterator[str]:
        return self

    async def __anext__(self) -> str:
        while self._accumulator.result is None:
            try:
                chunk = await self._call.read()
            except grpc.RpcError as error:
                raise DocsparseError.from_rpc_error(error) from None
            if chunk is grpc.aio.EOF:
                raise DocsparseError("UNKNOWN", "SummarizeStream ended without its final chunk")
            text = self._accumulator.add(chunk)
            if text:
                return text
        raise StopAsyncIteration

    async def collect(self) -> SummarizeResult:
        async for _ in self:
            pass
        return self.result


    async def __aenter__(self) -> "AsyncSummaryStream":
        return self

    async def __aexit__(self, *exc_info) -> None:
        if not self.done:
            self.cancel()
