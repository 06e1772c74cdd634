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
#include "model/cost_model.h"
#include "model/serving_config.h"
#include "server/model_registry.h"

namespace docsparse {

// Hard limits of this server, whatever the model allows.
struct ServerLimits {
  int64_t max_document_bytes = 8 << 20;
  int64_t max_document_tokens = 1 << 17;
};

struct PreparedInput {
  std::string text;  // empty when the request sent token ids
  std::vector<int32_t> ids;
  double tokenize_ms = 0;
};

// Validates the document and tokenizes it.
absl::StatusOr<PreparedInput> Prepare(const ServedModel& model, const v1::Document& document,
                                      const ServerLimits& limits);

// The model and whether it serves `task` (docsparse.json "tasks").
absl::StatusOr<const ServedModel*> FindModelFor(const ModelRegistry& registry,
                                                const std::string& name, Task task);

// Dense is the only planner so far: validates the budget against it.
absl::Status CheckBudget(const ServedModel& model, const v1::SparsityBudget& budget);

// Strict FLOP caps are checked against the planned cost of the sequences
// before anything runs.
absl::Status CheckPlannedGflops(const ServedModel& model, const v1::SparsityBudget& budget,
                                const std::vector<std::vector<int32_t>>& sequences);

bool BudgetMet(const v1::SparsityBudget& budget, const CostAccount& cost);

OverflowPolicy ResolveOverflow(const v1::RequestOptions& options, const ServedModel& model);
PoolingMode ResolvePooling(v1::Pooling pooling, const ServedModel& model);

// Labels one Classify may name: each is one more sequence to encode.
inline constexpr size_t kMaxLabels = 256;

// At most kMaxLabels; each non-empty, at most 1 KiB, valid UTF-8, unique.
absl::Status ValidateLabels(const std::vector<std::string>& labels);

bool HasGenerationParams(const v1::GenerationParams& params);

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_REQUEST_VALIDATION_H_
