// Request checks shared by the DocumentService and KServe endpoints: the
// document (text, bytes or ids) against the model's and the server's
// limits, the sparsity budget, and the option fields. Every error names the
// request field it is about.
#ifndef DOCSPARSE_SERVER_REQUEST_VALIDATION_H_
#define DOCSPARSE_SERVER_REQUEST_VALIDATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "docsparse/v1/docsparse.pb.h"
#include "model/attention/cost_model.h"
#include "model/checkpoint/serving_config.h"
#include "server/model_registry.h"
#include "server/request_price.h"

namespace docsparse {

struct PreparedInput {
  std::string text;  // empty when the request sent token ids
  std::vector<int32_t> ids;
  double tokenize_ms = 0;
};

// Validates the document and tokenizes it. Over the token limit (the
// model's max_document_tokens or the server's, whichever is lower) is
// RESOURCE_EXHAUSTED, unless `overflow` is kTruncate: the task then reads
// the first window only.
absl::StatusOr<PreparedInput> Prepare(const ServedModel& model, const v1::Document& document,
                                      const ServerLimits& limits, OverflowPolicy overflow);

// The model and whether it serves `task` (docsparse.json "tasks").
absl::StatusOr<const ServedModel*> FindModelFor(const ModelRegistry& registry,
                                                const std::string& name, Task task);

// What a request planned with `options` runs: options.kind (a budget's
// override), else the model's own mechanism.
AttentionKind ServedAttentionKind(const ServedModel& model, const ItemAttentionOptions& options);

// The planner of ServedAttentionKind.
const AttentionPlanner& ServedPlanner(const ServedModel& model, const ItemAttentionOptions& options);

// The mechanisms the model can run a request with, its own first.
std::vector<AttentionKind> AvailableAttention(const ServedModel& model);

// budget.attention resolved against what the model has: its own kind when
// unset; INVALID_ARGUMENT naming budget.attention and the available kinds
// when the model has no parameters for it.
absl::StatusOr<AttentionKind> RequestedAttention(const ServedModel& model,
                                                 const v1::SparsityBudget& budget);

// Validates the budget's fields against the planner the request will run
// (the model's own, or budget.attention).
absl::Status CheckBudget(const ServedModel& model, const v1::SparsityBudget& budget);

// Plans the request's attention under its budget before anything runs: the
// planner's FitBudget from its native knobs with budget.knobs over them
// (model/attention/attention_planner.h), and for sampling planners the seed
// (the budget's, else derived from options.request_id). The result's kind
// is set when budget.attention overrides the model's own. A cap below the
// cheapest plan runs that plan (budget_met comes out false), unless `strict`,
// which is INVALID_ARGUMENT naming the minimum.
absl::StatusOr<ItemAttentionOptions> PlanBudget(const ServedModel& model,
                                                const v1::SparsityBudget& budget,
                                                const v1::RequestOptions& options,
                                                const std::vector<std::vector<int32_t>>& sequences);

// Attention FLOPs (all layers) the planner will spend on `sequences` with
// `options`: what the batch former prices.
double PlannedAttentionFlops(const ServedModel& model, const ItemAttentionOptions& options,
                             const std::vector<std::vector<int32_t>>& sequences);

// The knobs the planner ran with (CostReport.knobs): every knob by name in
// `values`, the older fields where a knob has their name, the planner's
// variant as sparsity_type, and the seed of a sampling planner.
void FillAttentionKnobs(const ServedModel& model, const ItemAttentionOptions& options,
                        v1::AttentionKnobs* knobs);

bool BudgetMet(const v1::SparsityBudget& budget, const CostAccount& cost);

OverflowPolicy ResolveOverflow(const v1::RequestOptions& options, const ServedModel& model);
PoolingMode ResolvePooling(v1::Pooling pooling, const ServedModel& model);

// Labels one Classify may name: each is one more sequence to encode.
inline constexpr size_t kMaxLabels = 256;

// At most kMaxLabels; each 1 byte to 1 KiB, valid UTF-8, not blank, unique.
absl::Status ValidateLabels(const std::vector<std::string>& labels);

bool HasGenerationParams(const v1::GenerationParams& params);

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_REQUEST_VALIDATION_H_
