"""What a caller passes in: the budget, generation and extractive settings, token
ids, and the enums of the API. Plain frozen dataclasses mirroring the messages
of proto/docsparse/v1/docsparse.proto, with snake_case names as there.

Enum arguments take a member or its name in any case (`"lsg"`, `"LSG"`,
`AttentionKind.LSG`); a misspelt one is a ValueError here, not a server error.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence, Type, TypeVar, Union

__all__ = [
    "AttentionKind", "Overflow", "Pooling", "Task", "SummaryKind", "ClassificationMethod",
    "HealthStatus", "Budget", "GenerationParams", "ExtractiveParams", "TokenIds",
]


class _ProtoEnum(str, enum.Enum):
    """A str enum whose members are the proto enum's values without its
    prefix, lower case ("lsg" for ATTENTION_KIND_LSG). UNSPECIFIED is the
    proto's 0: "the model's default" in requests, "not reported" in replies."""

    def __str__(self) -> str:
        return self.value


class AttentionKind(_ProtoEnum):
    UNSPECIFIED = "unspecified"
    DENSE = "dense"
    LSG = "lsg"
    SBM = "sbm"
    LONGFORMER = "longformer"
    BIGBIRD = "bigbird"
    SPARSE_TRANSFORMER = "sparse_transformer"
    STAR = "star"
    LSH = "lsh"
    ROUTING = "routing"
    MODERNBERT = "modernbert"
    ETC = "etc"
    UNION = "union"


class Overflow(_ProtoEnum):
    """What the server does with a document longer than the model's positions."""

    UNSPECIFIED = "unspecified"
    REJECT = "reject"  # RESOURCE_EXHAUSTED naming the limit
    TRUNCATE = "truncate"  # keep the first positions
    CHUNK = "chunk"  # windows, pooled weighted by tokens


class Pooling(_ProtoEnum):
    UNSPECIFIED = "unspecified"
    CLS = "cls"
    MEAN = "mean"


class Task(_ProtoEnum):
    UNSPECIFIED = "unspecified"
    EMBED = "embed"
    CLASSIFY = "classify"
    SUMMARIZE = "summarize"


class SummaryKind(_ProtoEnum):
    UNSPECIFIED = "unspecified"
    EXTRACTIVE = "extractive"
    ABSTRACTIVE = "abstractive"


class ClassificationMethod(_ProtoEnum):
    UNSPECIFIED = "unspecified"
    ZERO_SHOT = "zero_shot"
    HEAD = "head"


class HealthStatus(_ProtoEnum):
    """grpc.health.v1 serving status."""

    UNKNOWN = "unknown"
    SERVING = "serving"
    NOT_SERVING = "not_serving"
    SERVICE_UNKNOWN = "service_unknown"


E = TypeVar("E", bound=_ProtoEnum)


def coerce_enum(kind: Type[E], value: Union[E, str], what: str) -> E:
    """`value` as a member of `kind`: a member, or a name in any case with
    `-` or `_`."""
    if isinstance(value, kind):
        return value
    if isinstance(value, str):
        try:
            return kind(value.strip().lower().replace("-", "_"))
        except ValueError:
            pass
    names = ", ".join(m.value for m in kind if m.value != "unspecified")
    raise ValueError(f"{what}: {value!r} is not one of {names}")


@dataclass(frozen=True)
class Budget:
    """SparsityBudget: at most one cap (max_density, max_attention_gflops or
    edge_regularization), an optional planner override and seed, and strict.

    A cap below the cheapest plan the model allows runs that plan and reports
    `budget_met=False`; with `strict=True` the server answers INVALID_ARGUMENT
    naming the minimum. Ranges are the server's to check (max_density in
    (0, 1], max_attention_gflops > 0): it names the field it refuses.
    """

    # Computed query-key pairs / dense pairs over real tokens, in (0, 1].
    max_density: Optional[float] = None
    # Attention FLOPs over all layers, heads and windows, in GFLOP.
    max_attention_gflops: Optional[float] = None
    # SBM beta: 0 is the model as calibrated; larger is sparser.
    edge_regularization: Optional[float] = None
    # Planner override where the model has its parameters; None: the model's.
    attention: Optional[Union[AttentionKind, str]] = None
    # Seed for sampled planners (SBM); None: derived from the request id.
    seed: Optional[int] = None
    strict: bool = False
    # Knob values for the planner that runs, by name (ModelInfo.planners lists
    # them), e.g. {"window": 256}; a cap then moves the knobs from there.
    knobs: Optional[Mapping[str, float]] = None

    def __post_init__(self) -> None:
        caps = [name for name in ("max_density", "max_attention_gflops", "edge_regularization")
                if getattr(self, name) is not None]
        if len(caps) > 1:
            raise ValueError(f"Budget: at most one cap, got {' and '.join(caps)}")
        if self.attention is not None:
            object.__setattr__(
                self, "attention", coerce_enum(AttentionKind, self.attention, "Budget.attention"))


@dataclass(frozen=True)
class GenerationParams:
    """Hugging Face generation parameters for abstractive summaries; None
    leaves the model's generation_config.json value. Streaming sends a piece
    per token only with greedy search (num_beams=1)."""

    num_beams: Optional[int] = None
    max_length: Optional[int] = None
    min_length: Optional[int] = None
    length_penalty: Optional[float] = None
    early_stopping: Optional[bool] = None
    no_repeat_ngram_size: Optional[int] = None
    max_new_tokens: Optional[int] = None


@dataclass(frozen=True)
class ExtractiveParams:
    """Extractive summaries (encoder models): how many sentences, and the MMR
    diversity weight (0 = most central, 1 = most diverse); None: the model's."""

    max_sentences: Optional[int] = None
    diversity: Optional[float] = None


@dataclass(frozen=True)
class TokenIds:
    """A pre-tokenized document: vocabulary ids without special tokens (the
    server adds [CLS]/[SEP] or <s>/</s>)."""

    ids: Sequence[int]
