"""Between the package's dataclasses and the generated protobuf messages: the
requests the clients send and the results they return. Shared by the
synchronous and the asyncio client, so both build identical requests."""
from __future__ import annotations

import os
from typing import Iterable, Optional, Sequence, Type, TypeVar, Union

from ._results import (AttentionKnobs, ClassifyResult, CostReport, EmbedResult, ExtractedSentence,
                       KnobInfo, LabelScore, LayerCost, MaskMap, ModelInfo, PlannerInfo,
                       SummarizeResult, Timings)
from ._types import (AttentionKind, Budget, ClassificationMethod, ExtractiveParams,
                     GenerationParams, Overflow, Pooling, SummaryKind, Task, TokenIds, _ProtoEnum,
                     coerce_enum)

try:
    from ._proto.docsparse.v1 import docsparse_pb2 as pb
    from ._proto.docsparse.v1 import docsparse_pb2_grpc as pb_grpc  # noqa: F401 (re-exported)
except ModuleNotFoundError as error:  # a source checkout that was never built
    if not (error.name or "").startswith(__package__ + "._proto"):
        raise
    raise ImportError(
        "docsparse: the stubs generated from proto/ (docsparse/_proto) are missing; install the "
        "package (pip install client/python) or run `python setup.py build_py` in client/python"
    ) from error

# A document: text (str), raw bytes the server checks as UTF-8, a file path
# (sent as bytes, like the CLI), or pre-tokenized ids.
Document = Union[str, bytes, bytearray, "os.PathLike[str]", TokenIds]

# proto enum type name -> prefix of its value names.
_PREFIX = {
    AttentionKind: "ATTENTION_KIND_",
    Overflow: "OVERFLOW_",
    Pooling: "POOLING_",
    Task: "TASK_",
    SummaryKind: "SUMMARY_KIND_",
    ClassificationMethod: "CLASSIFICATION_METHOD_",
}
_PROTO_ENUM = {
    AttentionKind: pb.AttentionKind,
    Overflow: pb.Overflow,
    Pooling: pb.Pooling,
    Task: pb.Task,
    SummaryKind: pb.SummaryKind,
    ClassificationMethod: pb.ClassificationMethod,
}

E = TypeVar("E", bound=_ProtoEnum)


def enum_to_proto(kind: Type[E], value: Union[E, str, None], what: str) -> int:
    if value is None:
        return 0
    member = coerce_enum(kind, value, what)
    return _PROTO_ENUM[kind].Value(_PREFIX[kind] + member.name)


def enum_from_proto(kind: Type[E], number: int) -> E:
    """A value this client does not know (a newer server's) reads as UNSPECIFIED."""
    try:
        name = _PROTO_ENUM[kind].Name(number)
    except ValueError:
        return kind.UNSPECIFIED
    return kind[name[len(_PREFIX[kind]):]]


# ---------------------------------------------------------------- requests --

def document_to_proto(document: Document) -> "pb.Document":
    if isinstance(document, str):
        return pb.Document(text=document)
    if isinstance(document, (bytes, bytearray, memoryview)):
        return pb.Document(utf8_bytes=bytes(document))
    if isinstance(document, os.PathLike):
        with open(document, "rb") as f:
            return pb.Document(utf8_bytes=f.read())
    if isinstance(document, TokenIds):
        return pb.Document(token_ids=pb.TokenIds(ids=list(document.ids)))
    raise TypeError(f"document: expected str, bytes, a path or TokenIds, got "
                    f"{type(document).__name__}")


def budget_to_proto(budget: Optional[Budget]) -> Optional["pb.SparsityBudget"]:
    if budget is None:
        return None
    if not isinstance(budget, Budget):
        raise TypeError(f"budget: expected docsparse.Budget, got {type(budget).__name__}")
    message = pb.SparsityBudget(strict=budget.strict)
    if budget.max_density is not None:
        message.max_density = budget.max_density
    elif budget.max_attention_gflops is not None:
        message.max_attention_gflops = budget.max_attention_gflops
    elif budget.edge_regularization is not None:
        message.edge_regularization = budget.edge_regularization
    message.attention = enum_to_proto(AttentionKind, budget.attention, "Budget.attention")
    if budget.seed is not None:
        message.seed = budget.seed
    if budget.knobs:
        message.knobs.update({str(name): float(value) for name, value in budget.knobs.items()})
    return message


def options_to_proto(overflow: Union[Overflow, str, None], return_mask_map: bool,
                     mask_map_resolution: Optional[int],
                     request_id: Optional[str]) -> "pb.RequestOptions":
    return pb.RequestOptions(
        overflow=enum_to_proto(Overflow, overflow, "overflow"),
        return_mask_map=return_mask_map,
        mask_map_resolution=mask_map_resolution or 0,
        request_id=request_id or "")


def _common(model: Optional[str], document: Document, budget: Optional[Budget],
            options: "pb.RequestOptions") -> dict:
    fields = {"model": model or "", "document": document_to_proto(document), "options": options}
    budget_message = budget_to_proto(budget)
    if budget_message is not None:
        fields["budget"] = budget_message
    return fields


def embed_request(document: Document, model: Optional[str], budget: Optional[Budget],
                  options: "pb.RequestOptions", pooling: Union[Pooling, str, None],
                  normalize: Optional[bool]) -> "pb.EmbedRequest":
    request = pb.EmbedRequest(pooling=enum_to_proto(Pooling, pooling, "pooling"),
                              **_common(model, document, budget, options))
    if normalize is not None:
        request.normalize = normalize
    return request


def classify_request(document: Document, model: Optional[str], budget: Optional[Budget],
                     options: "pb.RequestOptions", labels: Optional[Iterable[str]],
                     temperature: Optional[float]) -> "pb.ClassifyRequest":
    if isinstance(labels, str):
        raise TypeError("labels: expected a list of labels, got one string")
    request = pb.ClassifyRequest(labels=list(labels or []),
                                 **_common(model, document, budget, options))
    if temperature is not None:
        request.temperature = temperature
    return request


def summarize_request(document: Document, model: Optional[str], budget: Optional[Budget],
                      options: "pb.RequestOptions", generation: Optional[GenerationParams],
                      extractive: Optional[ExtractiveParams]) -> "pb.SummarizeRequest":
    request = pb.SummarizeRequest(**_common(model, document, budget, options))
    if generation is not None:
        for field in ("num_beams", "max_length", "min_length", "length_penalty",
                      "early_stopping", "no_repeat_ngram_size", "max_new_tokens"):
            value = getattr(generation, field)
            if value is not None:
                setattr(request.generation, field, value)
    if extractive is not None:
        request.extractive.SetInParent()
        if extractive.max_sentences is not None:
            request.extractive.max_sentences = extractive.max_sentences
        if extractive.diversity is not None:
            request.extractive.diversity = extractive.diversity
    return request


# ----------------------------------------------------------------- results --

def budget_from_proto(message: "pb.SparsityBudget") -> Budget:
    cap = message.WhichOneof("cap")
    return Budget(
        **({cap: getattr(message, cap)} if cap else {}),
        attention=(None if message.attention == 0
                   else enum_from_proto(AttentionKind, message.attention)),
        seed=message.seed if message.HasField("seed") else None,
        strict=message.strict,
        knobs=dict(message.knobs) or None)


def cost_from_proto(message: "pb.CostReport") -> CostReport:
    knobs, timings = message.knobs, message.timings
    return CostReport(
        input_tokens=message.input_tokens,
        padded_tokens=message.padded_tokens,
        windows=message.windows,
        truncated=message.truncated,
        attention=enum_from_proto(AttentionKind, message.attention),
        knobs=AttentionKnobs(
            block_size=knobs.block_size, sparse_block_size=knobs.sparse_block_size,
            sparsity_factor=knobs.sparsity_factor, sparsity_type=knobs.sparsity_type,
            num_global_tokens=knobs.num_global_tokens, window=knobs.window,
            random_blocks=knobs.random_blocks, edge_regularization=knobs.edge_regularization,
            seed=knobs.seed, values=dict(knobs.values)),
        mean_density=message.mean_density,
        layers=tuple(
            LayerCost(layer=layer.layer, head_density=list(layer.head_density),
                      head_edges=list(layer.head_edges),
                      head_expected_density=list(layer.head_expected_density))
            for layer in message.layers),
        attention_edges=message.attention_edges,
        attention_flops=message.attention_flops,
        planner_flops=message.planner_flops,
        total_flops=message.total_flops,
        dense_equivalent_flops=message.dense_equivalent_flops,
        budget=budget_from_proto(message.budget) if message.HasField("budget") else None,
        budget_met=message.budget_met,
        timings=Timings(
            queue_ms=timings.queue_ms, tokenize_ms=timings.tokenize_ms,
            inference_ms=timings.inference_ms, total_ms=timings.total_ms,
            time_to_first_token_ms=timings.time_to_first_token_ms,
            device_ms=timings.device_ms),
        batch_size=message.batch_size,
        generated_tokens=message.generated_tokens,
        decoder_flops=message.decoder_flops,
        mask_maps=tuple(
            MaskMap(layer=m.layer, rows=m.rows, cols=m.cols, density=list(m.density))
            for m in message.mask_maps),
        precision=message.precision,
        isa=message.isa)


def embed_from_proto(message: "pb.EmbedResponse") -> EmbedResult:
    return EmbedResult(model=message.model, embedding=list(message.embedding),
                       cost=cost_from_proto(message.cost))


def classify_from_proto(message: "pb.ClassifyResponse") -> ClassifyResult:
    return ClassifyResult(
        model=message.model,
        scores=tuple(LabelScore(label=s.label, score=s.score, similarity=s.similarity)
                     for s in message.scores),
        method=enum_from_proto(ClassificationMethod, message.method),
        cost=cost_from_proto(message.cost))


def summarize_from_proto(message: "pb.SummarizeResponse") -> SummarizeResult:
    return SummarizeResult(
        model=message.model,
        summary=message.summary,
        kind=enum_from_proto(SummaryKind, message.kind),
        sentences=tuple(
            ExtractedSentence(index=s.index, text=s.text, score=s.score,
                              begin_byte=s.begin_byte, end_byte=s.end_byte)
            for s in message.sentences),
        token_ids=list(message.token_ids),
        cost=cost_from_proto(message.cost))


def models_from_proto(message: "pb.ListModelsResponse") -> list:
    return [
        ModelInfo(
            name=m.name,
            architecture=m.architecture,
            tasks=tuple(enum_from_proto(Task, t) for t in m.tasks),
            attention=enum_from_proto(AttentionKind, m.attention),
            available_attention=tuple(
                enum_from_proto(AttentionKind, a) for a in m.available_attention),
            max_position_tokens=m.max_position_tokens,
            max_document_tokens=m.max_document_tokens,
            hidden_size=m.hidden_size,
            num_layers=m.num_layers,
            num_heads=m.num_heads,
            default_labels=tuple(m.default_labels),
            default_overflow=enum_from_proto(Overflow, m.default_overflow),
            default_pooling=enum_from_proto(Pooling, m.default_pooling),
            ready=m.ready,
            planners=tuple(
                PlannerInfo(
                    attention=enum_from_proto(AttentionKind, p.attention),
                    knobs={name: KnobInfo(native=k.native, min=k.min, max=k.max,
                                          integer=k.integer)
                           for name, k in p.knobs.items()},
                    samples=p.samples)
                for p in m.planners))
        for m in message.models
    ]


class StreamAccumulator:
    """Folds SummarizeChunk messages into a SummarizeResult: the text pieces
    concatenated (byte for byte the unary summary), the token ids, and the
    last chunk's cost report."""

    def __init__(self, model: str) -> None:
        self._model = model
        self._pieces: list = []
        self._token_ids: list = []
        self.result: Optional[SummarizeResult] = None

    def add(self, chunk: "pb.SummarizeChunk") -> str:
        """Takes one chunk; returns its text."""
        self._pieces.append(chunk.text)
        self._token_ids.extend(chunk.token_ids)
        if chunk.done:
            self.result = SummarizeResult(
                model=self._model, summary="".join(self._pieces), kind=SummaryKind.UNSPECIFIED,
                sentences=(), token_ids=list(self._token_ids), cost=cost_from_proto(chunk.cost))
        return chunk.text


def check_timeout(timeout: Optional[float]) -> Optional[float]:
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout: must be > 0 seconds or None, got {timeout!r}")
    return timeout


def as_list(documents: Sequence[Document]) -> list:
    if isinstance(documents, (str, bytes, bytearray, TokenIds)):
        raise TypeError("documents: expected a list of documents, got one document")
    return list(documents)
