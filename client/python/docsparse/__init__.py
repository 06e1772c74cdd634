"""Python client for docsparse (proto/docsparse/v1/docsparse.proto).

    import docsparse

    with docsparse.Client("127.0.0.1:50051") as client:
        result = client.embed(open("doc.txt").read(), budget=docsparse.Budget(max_density=0.1))
        print(len(result.embedding), result.cost.mean_density, result.cost.budget_met)

Client is synchronous, AsyncClient the same on grpc.aio. Results are frozen
dataclasses; every failed call raises DocsparseError(code, message).
"""
from importlib import metadata as _metadata

from ._aio import AsyncClient, AsyncSummaryStream
from ._client import DEFAULT_TARGET, Client, SummaryStream
from ._errors import DocsparseError
from ._results import (AttentionKnobs, ClassifyResult, CostReport, EmbedResult, ExtractedSentence,
                       KnobInfo, LabelScore, LayerCost, MaskMap, ModelInfo, PlannerInfo,
                       SummarizeResult, Timings)
from ._types import (AttentionKind, Budget, ClassificationMethod, ExtractiveParams,
                     GenerationParams, HealthStatus, Overflow, Pooling, SummaryKind, Task,
                     TokenIds)

try:
    __version__ = _metadata.version("docsparse")
except _metadata.PackageNotFoundError:  # a source tree on sys.path
    __version__ = "0+unknown"

__all__ = [
    "Client", "AsyncClient", "SummaryStream", "AsyncSummaryStream", "DocsparseError",
    "DEFAULT_TARGET",
    # inputs
    "Budget", "GenerationParams", "ExtractiveParams", "TokenIds",
    # enums
    "AttentionKind", "Overflow", "Pooling", "Task", "SummaryKind", "ClassificationMethod",
    "HealthStatus",
    # results
    "EmbedResult", "ClassifyResult", "LabelScore", "SummarizeResult", "ExtractedSentence",
    "ModelInfo", "PlannerInfo", "KnobInfo", "CostReport", "AttentionKnobs", "LayerCost", "MaskMap", "Timings",
]
