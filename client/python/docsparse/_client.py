"""docsparse.Client: the synchronous client on a grpc channel."""
from __future__ import annotations

from typing import Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from . import _convert
from ._convert import Document, pb, pb_grpc
from ._errors import DocsparseError
from ._results import ClassifyResult, CostReport, EmbedResult, ModelInfo, SummarizeResult
from ._types import (Budget, ExtractiveParams, GenerationParams, HealthStatus, Overflow, Pooling)

__all__ = ["Client", "SummaryStream", "DEFAULT_TARGET", "DEFAULT_CHANNEL_OPTIONS"]

DEFAULT_TARGET = "127.0.0.1:50051"
# Mask maps of long documents make large replies; gRPC's default cap is 4 MiB.
DEFAULT_CHANNEL_OPTIONS = (("grpc.max_receive_message_length", 64 << 20),)
SERVICE_NAME = "docsparse.v1.DocumentService"


def _health_status(number: int) -> HealthStatus:
    name = health_pb2.HealthCheckResponse.ServingStatus.Name(number)
    return HealthStatus(name.lower())


class _Settings:
    """What every call of a client shares: default model, timeout, metadata."""

    def __init__(self, model: Optional[str], timeout: Optional[float],
                 metadata: Optional[Sequence[Tuple[str, str]]]) -> None:
        self.model = model
        self.timeout = _convert.check_timeout(timeout)
        self.metadata = tuple(metadata or ())

    def call_args(self, timeout: Optional[float]) -> dict:
        timeout = _convert.check_timeout(timeout)
        return {"timeout": timeout if timeout is not None else self.timeout,
                "metadata": self.metadata or None}


class Client:
    """A synchronous docsparse client.

        with docsparse.Client("127.0.0.1:50051") as client:
            result = client.embed(text, budget=docsparse.Budget(max_density=0.1))

    Thread-safe: calls from several threads share one channel (and the
    server's batcher batches them together). Every failed call raises
    DocsparseError. Documents are `str` (text), `bytes` (UTF-8 the server
    checks), an `os.PathLike` (the file's bytes) or `TokenIds`.

    Each task method takes `model` (None: the client's, else the server's
    default), `budget` (a Budget), `overflow` ("reject", "truncate", "chunk";
    None: the model's), `return_mask_map` and `mask_map_resolution` (per-layer
    density maps in the cost report), `request_id`, and `timeout` (seconds;
    None: the client's `timeout`, and with neither no deadline).
    """

    def __init__(self, target: str = DEFAULT_TARGET, *, model: Optional[str] = None,
                 timeout: Optional[float] = None, credentials: Optional[grpc.ChannelCredentials] = None,
                 metadata: Optional[Sequence[Tuple[str, str]]] = None,
                 options: Optional[Sequence[Tuple[str, object]]] = None) -> None:
        """`target` is host:port (any gRPC target); `credentials` makes a TLS
        channel; `options` are gRPC channel arguments added to the defaults."""
        channel_options = list(DEFAULT_CHANNEL_OPTIONS) + list(options or ())
        if credentials is None:
            self._channel = grpc.insecure_channel(target, options=channel_options)
        else:
            self._channel = grpc.secure_channel(target, credentials, options=channel_options)
        self._settings = _Settings(model, timeout, metadata)
        self._stub = pb_grpc.DocumentServiceStub(self._channel)
        self._health = health_pb2_grpc.HealthStub(self._channel)

    # ------------------------------------------------------------ lifetime --

    def close(self) -> None:
        """Closes the channel; calls in flight are cancelled."""
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # --------------------------------------------------------------- tasks --

    def embed(self, document: Document, *, model: Optional[str] = None,
              budget: Optional[Budget] = None, pooling: Union[Pooling, str, None] = None,
              normalize: Optional[bool] = None, overflow: Union[Overflow, str, None] = None,
              return_mask_map: bool = False, mask_map_resolution: Optional[int] = None,
              request_id: Optional[str] = None, timeout: Optional[float] = None) -> EmbedResult:
        """One embedding of the whole document (L2-normalised unless
        normalize=False; pooling "mean" or "cls", None: the model's)."""
        request = _convert.embed_request(
            document, model or self._settings.model, budget,
            _convert.options_to_proto(overflow, return_mask_map, mask_map_resolution, request_id),
            pooling, normalize)
        return _convert.embed_from_proto(self._unary(self._stub.Embed, request, timeout))

    def embed_many(self, documents: Sequence[Document], *, model: Optional[str] = None,
                   budget: Optional[Budget] = None, pooling: Union[Pooling, str, None] = None,
                   normalize: Optional[bool] = None, overflow: Union[Overflow, str, None] = None,
                   timeout: Optional[float] = None) -> List[EmbedResult]:
        """Embeds each document in its own call, all in flight at once (so the
        server may batch them); results in the order of `documents`. The first
        failure cancels the others and is raised."""
        options = _convert.options_to_proto(overflow, False, None, None)
        requests = [
            _convert.embed_request(d, model or self._settings.model, budget, options, pooling,
                                   normalize)
            for d in _convert.as_list(documents)
        ]
        args = self._settings.call_args(timeout)
        futures = [self._stub.Embed.future(r, **args) for r in requests]
        try:
            return [_convert.embed_from_proto(f.result()) for f in futures]
        except grpc.RpcError as error:
            raise DocsparseError.from_rpc_error(error) from None
        finally:
            for f in futures:
                f.cancel()

    def classify(self, document: Document, labels: Optional[Iterable[str]] = None, *,
                 temperature: Optional[float] = None, model: Optional[str] = None,
                 budget: Optional[Budget] = None, overflow: Union[Overflow, str, None] = None,
                 return_mask_map: bool = False, mask_map_resolution: Optional[int] = None,
                 request_id: Optional[str] = None,
                 timeout: Optional[float] = None) -> ClassifyResult:
        """Label scores, best first: zero-shot over `labels` (None: the
        model's default labels, or its classification head), softmax at
        `temperature` (None: the model's)."""
        request = _convert.classify_request(
            document, model or self._settings.model, budget,
            _convert.options_to_proto(overflow, return_mask_map, mask_map_resolution, request_id),
            labels, temperature)
        return _convert.classify_from_proto(self._unary(self._stub.Classify, request, timeout))

    def summarize(self, document: Document, *, stream: bool = False,
                  generation: Optional[GenerationParams] = None,
                  extractive: Optional[ExtractiveParams] = None, model: Optional[str] = None,
                  budget: Optional[Budget] = None, overflow: Union[Overflow, str, None] = None,
                  return_mask_map: bool = False, mask_map_resolution: Optional[int] = None,
                  request_id: Optional[str] = None,
                  timeout: Optional[float] = None) -> Union[SummarizeResult, "SummaryStream"]:
        """A summary: extractive on encoder models (`extractive`), abstractive
        on BART/Pegasus models (`generation`).

        stream=True returns a SummaryStream (SummarizeStream): iterate it for
        the text pieces as the server sends them (one per token with greedy
        search; the whole summary at once for beam search and extractive
        models); its `result` and `cost` are there once it is exhausted.
        """
        request = _convert.summarize_request(
            document, model or self._settings.model, budget,
            _convert.options_to_proto(overflow, return_mask_map, mask_map_resolution, request_id),
            generation, extractive)
        if stream:
            call = self._stub.SummarizeStream(request, **self._settings.call_args(timeout))
            return SummaryStream(call, request.model)
        return _convert.summarize_from_proto(self._unary(self._stub.Summarize, request, timeout))

    # --------------------------------------------------------------- admin --

    def models(self, *, timeout: Optional[float] = None) -> List[ModelInfo]:
        """The served models (ListModels)."""
        return _convert.models_from_proto(
            self._unary(self._stub.ListModels, pb.ListModelsRequest(), timeout))

    def health(self, service: str = "", *, timeout: Optional[float] = None) -> HealthStatus:
        """grpc.health.v1 Check: SERVING once every model has warmed up,
        NOT_SERVING before that and while draining. `service` "" is the whole
        server; "docsparse.v1.DocumentService" the document service."""
        response = self._unary(self._health.Check,
                               health_pb2.HealthCheckRequest(service=service), timeout)
        return _health_status(response.status)

    def wait_until_ready(self, timeout: float = 60.0, service: str = "") -> None:
        """Blocks until health says SERVING (waiting out a server still
        starting or warming up); DocsparseError DEADLINE_EXCEEDED after
        `timeout` seconds."""
        import time

        deadline = time.monotonic() + timeout
        last = "no answer"
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DocsparseError("DEADLINE_EXCEEDED",
                                     f"not SERVING after {timeout:g} s (last: {last})")
            try:
                # wait_for_ready: a server not yet listening is waited for,
                # not an immediate UNAVAILABLE.
                response = self._health.Check(health_pb2.HealthCheckRequest(service=service),
                                              timeout=min(left, 5.0), wait_for_ready=True,
                                              metadata=self._settings.metadata or None)
                status = _health_status(response.status)
                if status is HealthStatus.SERVING:
                    return
                last = status.name
            except grpc.RpcError as error:
                last = str(DocsparseError.from_rpc_error(error))
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))

    # ------------------------------------------------------------- helpers --

    def _unary(self, method, request, timeout: Optional[float]):
        try:
            return method(request, **self._settings.call_args(timeout))
        except grpc.RpcError as error:
            raise DocsparseError.from_rpc_error(error) from None


class _StreamOutcome:
    """What the sync and async summary streams share: their outcome once
    exhausted, and cancellation. Subclasses set `_call`, `_accumulator` and
    `_drain` (how to drain the rest, for the error message)."""

    _drain = "call collect()"

    @property
    def done(self) -> bool:
        return self._accumulator.result is not None

    @property
    def result(self) -> SummarizeResult:
        if self._accumulator.result is None:
            raise RuntimeError(f"{type(self).__name__}.result: the stream is not exhausted yet "
                               f"(iterate it to the end, or {self._drain})")
        return self._accumulator.result

    @property
    def cost(self) -> CostReport:
        return self.result.cost

    def cancel(self) -> None:
        """Stops the call (the server stops decoding); no-op once done."""
        self._call.cancel()


class SummaryStream(_StreamOutcome):
    """A streamed summary: iterating yields the text pieces (str) as they
    arrive; concatenated they are the whole summary. Once exhausted, `result`
    (a SummarizeResult: summary, token_ids, cost) and `cost` are set;
    `collect()` drains what is left and returns `result`. A failure raises
    DocsparseError from the iteration. Use it as a context manager, or call
    `cancel()`, to stop early."""

    def __init__(self, call, model: str) -> None:
        self._call = call
        self._accumulator = _convert.StreamAccumulator(model)

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        while self._accumulator.result is None:
            try:
                chunk = next(self._call)
            except StopIteration:
                raise DocsparseError("UNKNOWN",
                                     "SummarizeStream ended without its final chunk") from None
            except grpc.RpcError as error:
                raise DocsparseError.from_rpc_error(error) from None
            text = self._accumulator.add(chunk)
            if text:
                return text
        raise StopIteration

    def collect(self) -> SummarizeResult:
        for _ in self:
            pass
        return self.result


    def __enter__(self) -> "SummaryStream":
        return self

    def __exit__(self, *exc_info) -> None:
        if not self.done:
            self.cancel()
