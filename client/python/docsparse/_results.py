"""What the server answers, as plain frozen dataclasses mirroring the proto's
messages with snake_case names: numeric vectors are lists, lists of records
are tuples. No protobuf type leaks out of the package."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ._types import (AttentionKind, Budget, ClassificationMethod, Overflow, Pooling, SummaryKind,
                     Task)

__all__ = [
    "AttentionKnobs", "LayerCost", "MaskMap", "Timings", "CostReport", "EmbedResult", "LabelScore",
    "ClassifyResult", "ExtractedSentence", "SummarizeResult", "ModelInfo", "KnobInfo",
    "PlannerInfo",
]


@dataclass(frozen=True)
class AttentionKnobs:
    """The knobs the planner actually used, after budget tuning."""

    block_size: int
    sparse_block_size: int
    sparsity_factor: int
    sparsity_type: str
    num_global_tokens: int
    window: int
    random_blocks: int
    edge_regularization: float
    seed: int
    # Every knob of the planner that ran, by name.
    values: Dict[str, float]


@dataclass(frozen=True)
class LayerCost:
    layer: int
    # Realised density per head (computed pairs / dense pairs, real tokens).
    head_density: List[float]
    # Computed query-key pairs per head, summed over windows.
    head_edges: List[int]
    # Sampled planners (SBM): expected density per head before sampling.
    head_expected_density: List[float]


@dataclass(frozen=True)
class MaskMap:
    """Density of each query-block x key-block cell of one layer, row-major."""

    layer: int
    rows: int
    cols: int
    density: List[float]

    def at(self, row: int, col: int) -> float:
        return self.density[row * self.cols + col]


@dataclass(frozen=True)
class Timings:
    queue_ms: float
    tokenize_ms: float
    inference_ms: float
    total_ms: float
    # Abstractive summaries: arrival to the end of the first decoder step.
    time_to_first_token_ms: float
    # A model on a GPU: the batch's time on the device; 0 on the CPU.
    device_ms: float = 0.0


@dataclass(frozen=True)
class CostReport:
    """What one request cost: CostReport of the proto, field for field."""

    # Tokens of the document including special tokens, over all windows.
    input_tokens: int
    # Tokens the model ran, padding included.
    padded_tokens: int
    # Sequences the encoder ran (windows; sentences for extractive summaries).
    windows: int
    truncated: bool
    attention: AttentionKind
    knobs: AttentionKnobs
    # Mean over layers and heads of the realised density.
    mean_density: float
    layers: Tuple[LayerCost, ...]
    attention_edges: int
    attention_flops: float
    planner_flops: float
    total_flops: float
    dense_equivalent_flops: float
    # The budget the request asked for; None when it asked for none.
    budget: Optional[Budget]
    budget_met: bool
    timings: Timings
    batch_size: int
    generated_tokens: int
    decoder_flops: float
    mask_maps: Tuple[MaskMap, ...]
    # Linear layers' precision ("fp32", "bf16", "int8", "fp16") and the ISA ("cuda" on a GPU).
    precision: str
    isa: str

    @property
    def attention_gflops(self) -> float:
        return self.attention_flops / 1e9

    @property
    def total_gflops(self) -> float:
        return self.total_flops / 1e9

    @property
    def dense_equivalent_gflops(self) -> float:
        return self.dense_equivalent_flops / 1e9


@dataclass(frozen=True)
class EmbedResult:
    model: str
    embedding: List[float]
    cost: CostReport


@dataclass(frozen=True)
class LabelScore:
    label: str
    # Probability (softmax over the labels).
    score: float
    # Zero-shot only: cosine similarity of document and label embeddings.
    similarity: float


@dataclass(frozen=True)
class ClassifyResult:
    model: str
    # Best first.
    scores: Tuple[LabelScore, ...]
    method: ClassificationMethod
    cost: CostReport

    @property
    def label(self) -> Optional[str]:
        """The best label (None when the server returned no scores)."""
        return self.scores[0].label if self.scores else None


@dataclass(frozen=True)
class ExtractedSentence:
    # Position among the document's sentences.
    index: int
    text: str
    # Selection score (relevance to the document, minus redundancy).
    score: float
    # Byte offsets into the document's UTF-8 text.
    begin_byte: int
    end_byte: int


@dataclass(frozen=True)
class SummarizeResult:
    """A summary. From a stream (summarize(stream=True)), `model` is the name
    asked for ("" for the server's default), `kind` is UNSPECIFIED and
    `sentences` is empty: the stream's chunks do not carry them."""

    model: str
    summary: str
    kind: SummaryKind
    # Extractive: the chosen sentences in document order.
    sentences: Tuple[ExtractedSentence, ...]
    # Abstractive: generated token ids.
    token_ids: List[int]
    cost: CostReport


@dataclass(frozen=True)
class ModelInfo:
    name: str
    # "bert", "roberta", "distilbert", "bart", "pegasus".
    architecture: str
    tasks: Tuple[Task, ...]
    attention: AttentionKind
    # Planners this model has parameters for (Budget.attention overrides).
    available_attention: Tuple[AttentionKind, ...]
    max_position_tokens: int
    max_document_tokens: int
    hidden_size: int
    num_layers: int
    num_heads: int
    default_labels: Tuple[str, ...]
    default_overflow: Overflow
    default_pooling: Pooling
    ready: bool
    # Each planner in available_attention with its knobs (Budget.knobs).
    planners: Tuple["PlannerInfo", ...]


@dataclass(frozen=True)
class KnobInfo:
    native: float
    min: float
    max: float
    integer: bool


@dataclass(frozen=True)
class PlannerInfo:
    attention: AttentionKind
    knobs: Dict[str, KnobInfo]
    # Plans are sampled: Budget.seed matters.
    samples: bool
