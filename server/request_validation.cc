#include "server/request_validation.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "model/attention/planner_registry.h"
#include "model/text/unicode_text.h"
#include "server/cost_report.h"

namespace docsparse {

absl::StatusOr<PreparedInput> Prepare(const ServedModel& model, const v1::Document& document,
                                      const ServerLimits& limits, OverflowPolicy overflow) {
  PreparedInput input;
  // TRUNCATE reads one window whatever the length, so the token limit does
  // not apply; the byte limit (and the message size) still bound the work.
  const int64_t token_limit =
      overflow == OverflowPolicy::kTruncate
          ? std::numeric_limits<int64_t>::max()
          : std::min<int64_t>(limits.max_document_tokens, model.serving.max_document_tokens);
  switch (document.content_case()) {
    case v1::Document::CONTENT_NOT_SET:
      return absl::InvalidArgumentError(
          "document: empty (set document.text, document.utf8_bytes or document.token_ids)");
    case v1::Document::kTokenIds: {
      const auto& ids = document.token_ids().ids();
      if (ids.empty()) return absl::InvalidArgumentError("document.token_ids.ids: empty");
      if (ids.size() > token_limit) {
        return absl::ResourceExhaustedError(absl::StrCat("document.token_ids: ", ids.size(),
                                                         " tokens exceeds the limit of ",
                                                         token_limit, " tokens"));
      }
      for (int i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || ids[i] >= model.vocab_size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("document.token_ids.ids[", i, "]: ", ids[i],
                           " is outside the vocabulary [0, ", model.vocab_size(), ")"));
        }
      }
      input.ids.assign(ids.begin(), ids.end());
      return input;
    }
    case v1::Document::kText:
    case v1::Document::kUtf8Bytes:
      break;
  }
  const bool raw = document.content_case() == v1::Document::kUtf8Bytes;
  const std::string& text = raw ? document.utf8_bytes() : document.text();
  const char* field = raw ? "document.utf8_bytes" : "document.text";
  if (static_cast<int64_t>(text.size()) > limits.max_document_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(field, ": ", text.size(),
                                                     " bytes exceeds the server limit of ",
                                                     limits.max_document_bytes, " bytes"));
  }
  if (absl::Status valid = ValidateUtf8(text); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", valid.message()));
  }
  if (text.find_first_not_of(" \t\r\n\f\v") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": empty document"));
  }
  const auto start = std::chrono::steady_clock::now();
  input.ids = model.tokenizer->Encode(text);
  input.tokenize_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (input.ids.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": no tokens in the document"));
  }
  if (static_cast<int64_t>(input.ids.size()) > token_limit) {
    return absl::ResourceExhaustedError(absl::StrCat(
        field, ": ", input.ids.size(), " tokens exceeds the limit of ", token_limit, " tokens"));
  }
  input.text = text;
  return input;
}

namespace {

std::vector<int64_t> TokenCounts(const std::vector<std::vector<int32_t>>& sequences) {
  std::vector<int64_t> counts;
  for (const auto& sequence : sequences) counts.push_back(static_cast<int64_t>(sequence.size()));
  return counts;
}

// The request's own knob values: budget.knobs, and the edge_regularization
// cap, which is the knob of that name (SBM's β).
AttentionKnobValues RequestKnobs(const v1::SparsityBudget& budget) {
  AttentionKnobValues knobs(budget.knobs().begin(), budget.knobs().end());
  if (budget.cap_case() == v1::SparsityBudget::kEdgeRegularization) {
    knobs["edge_regularization"] = budget.edge_regularization();
  }
  return knobs;
}

AttentionCap CapOf(const v1::SparsityBudget& budget) {
  AttentionCap cap;
  if (budget.cap_case() == v1::SparsityBudget::kMaxDensity) cap.max_density = budget.max_density();
  if (budget.cap_case() == v1::SparsityBudget::kMaxAttentionGflops) {
    cap.max_attention_gflops = budget.max_attention_gflops();
  }
  return cap;
}

}  // namespace

AttentionKind ServedAttentionKind(const ServedModel& model, const ItemAttentionOptions& options) {
  return options.kind.value_or(model.planners->native().kind());
}

const AttentionPlanner& ServedPlanner(const ServedModel& model,
                                      const ItemAttentionOptions& options) {
  const AttentionPlanner* planner = model.planners->Find(ServedAttentionKind(model, options));
  return planner != nullptr ? *planner : model.planners->native();
}

std::vector<AttentionKind> AvailableAttention(const ServedModel& model) {
  return model.planners->kinds();
}

absl::StatusOr<AttentionKind> RequestedAttention(const ServedModel& model,
                                                 const v1::SparsityBudget& budget) {
  const std::vector<AttentionKind> available = AvailableAttention(model);
  if (budget.attention() == v1::ATTENTION_KIND_UNSPECIFIED) return available.front();
  for (AttentionKind kind : available) {
    if (ToProto(kind) == budget.attention()) return kind;
  }
  std::vector<std::string> names;
  for (AttentionKind kind : available) names.push_back(v1::AttentionKind_Name(ToProto(kind)));
  const std::string& name = v1::AttentionKind_Name(budget.attention());
  return absl::InvalidArgumentError(
      absl::StrCat("budget.attention: model '", model.name, "' has no parameters for ",
                   name.empty() ? absl::StrCat("unknown kind ", budget.attention()) : name,
                   " (available: ", absl::StrJoin(names, ", "), ")"));
}

absl::Status CheckBudget(const ServedModel& model, const v1::SparsityBudget& budget) {
  ASSIGN_OR_RETURN(const AttentionKind kind, RequestedAttention(model, budget));
  const AttentionPlanner& planner = *model.planners->Find(kind);
  switch (budget.cap_case()) {
    case v1::SparsityBudget::kMaxDensity:
      if (!(budget.max_density() > 0 && budget.max_density() <= 1)) {
        return absl::InvalidArgumentError("budget.max_density: must be in (0, 1]");
      }
      break;
    case v1::SparsityBudget::kMaxAttentionGflops:
      if (!(budget.max_attention_gflops() > 0)) {
        return absl::InvalidArgumentError("budget.max_attention_gflops: must be > 0");
      }
      break;
    case v1::SparsityBudget::kEdgeRegularization:
      // The knob of that name, checked against the planner like
      // budget.knobs, but named as the field the client set.
      RETURN_IF_ERROR(CheckRequestKnobs(
          planner, {{"edge_regularization", budget.edge_regularization()}}, "budget."));
      break;
    case v1::SparsityBudget::CAP_NOT_SET:
      break;
  }
  return CheckRequestKnobs(
      planner, AttentionKnobValues(budget.knobs().begin(), budget.knobs().end()), "budget.knobs.");
}

double PlannedAttentionFlops(const ServedModel& model, const ItemAttentionOptions& options,
                             const std::vector<std::vector<int32_t>>& sequences) {
  return ServedPlanner(model, options)
      .Price(options.knobs, TokenCounts(sequences), model.encoder_shape())
      .attention_flops;
}

absl::StatusOr<ItemAttentionOptions> PlanBudget(
    const ServedModel& model, const v1::SparsityBudget& budget,
    const v1::RequestOptions& request_options, const std::vector<std::vector<int32_t>>& sequences) {
  ASSIGN_OR_RETURN(const AttentionKind kind, RequestedAttention(model, budget));
  const AttentionPlanner& planner = *model.planners->Find(kind);
  ItemAttentionOptions options;
  // Unset for the model's own kind, so such requests batch as they always did.
  if (kind != model.planners->native().kind()) options.kind = kind;
  if (planner.samples()) {
    // No seed and no request id: a fresh seed, so that repeated anonymous
    // requests do not all draw the same plan; the cost report's knobs.seed
    // says which one ran.
    if (budget.has_seed()) {
      options.seed = budget.seed();
    } else if (!request_options.request_id().empty()) {
      options.seed = SamplingSeedFromRequestId(request_options.request_id());
    } else {
      std::random_device entropy;
      options.seed = (static_cast<uint64_t>(entropy()) << 32) | entropy();
    }
  }
  const BudgetFit fit =
      planner.FitBudget(CapOf(budget), StartingKnobs(planner, RequestKnobs(budget)),
                        TokenCounts(sequences), model.encoder_shape());
  if (!fit.fits && budget.strict()) {
    const bool density = budget.cap_case() == v1::SparsityBudget::kMaxDensity;
    return absl::InvalidArgumentError(absl::StrCat(
        density ? "budget.max_density: " : "budget.max_attention_gflops: ",
        density ? budget.max_density() : budget.max_attention_gflops(), " is below the minimum ",
        density ? fit.price.density : fit.price.attention_flops / 1e9, density ? "" : " GFLOP",
        " for this document on model '", model.name, "' (", planner.FloorDescription(), ")"));
  }
  options.knobs = fit.knobs;
  return options;
}

void FillAttentionKnobs(const ServedModel& model, const ItemAttentionOptions& options,
                        v1::AttentionKnobs* knobs) {
  const AttentionPlanner& planner = ServedPlanner(model, options);
  const AttentionKnobValues values = StartingKnobs(planner, options.knobs);
  for (const auto& [name, value] : values) (*knobs->mutable_values())[name] = value;
  // The fields that predate the map, filled from the knobs of those names.
  const auto set = [&](const char* name, auto setter) {
    const auto it = values.find(name);
    if (it != values.end()) setter(it->second);
  };
  set("block_size", [&](double v) { knobs->set_block_size(static_cast<int32_t>(v)); });
  set("sparse_block_size",
      [&](double v) { knobs->set_sparse_block_size(static_cast<int32_t>(v)); });
  set("sparsity_factor", [&](double v) { knobs->set_sparsity_factor(static_cast<int32_t>(v)); });
  set("num_global_tokens",
      [&](double v) { knobs->set_num_global_tokens(static_cast<int32_t>(v)); });
  set("window", [&](double v) { knobs->set_window(static_cast<int32_t>(v)); });
  set("random_blocks", [&](double v) { knobs->set_random_blocks(static_cast<int32_t>(v)); });
  set("edge_regularization", [&](double v) { knobs->set_edge_regularization(v); });
  knobs->set_sparsity_type(planner.Variant());
  if (planner.samples()) knobs->set_seed(options.seed);
}

bool BudgetMet(const v1::SparsityBudget& budget, const CostAccount& cost) {
  // A plan raised to its planner's floor is not what the budget asked for;
  // a plan that computed no attention at all meets no budget.
  if (cost.raised_to_floor()) return false;
  if (cost.input_tokens() > 0 && cost.TotalEdges() == 0) return false;
  switch (budget.cap_case()) {
    case v1::SparsityBudget::kMaxDensity:
      // Sampling planners (SBM) are held to the expectation they planned
      // (DESIGN.md: "in expectation before sampling"); the realised density
      // is reported beside it. For the others both are the same number.
      return cost.MeanExpectedDensity() <= budget.max_density();
    case v1::SparsityBudget::kMaxAttentionGflops:
      return cost.AttentionFlops() / 1e9 <= budget.max_attention_gflops();
    default:
      return true;
  }
}

OverflowPolicy ResolveOverflow(const v1::RequestOptions& options, const ServedModel& model) {
  switch (options.overflow()) {
    case v1::OVERFLOW_REJECT:
      return OverflowPolicy::kReject;
    case v1::OVERFLOW_TRUNCATE:
      return OverflowPolicy::kTruncate;
    case v1::OVERFLOW_CHUNK:
      return OverflowPolicy::kChunk;
    default:
      return model.serving.overflow;
  }
}

PoolingMode ResolvePooling(v1::Pooling pooling, const ServedModel& model) {
  if (pooling == v1::POOLING_CLS) return PoolingMode::kCls;
  if (pooling == v1::POOLING_MEAN) return PoolingMode::kMean;
  return model.serving.pooling;
}

absl::StatusOr<const ServedModel*> FindModelFor(const ModelRegistry& registry,
                                                const std::string& name, Task task) {
  ASSIGN_OR_RETURN(const ServedModel* model, registry.Find(name));
  if (!model->serving.HasTask(task)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: '", model->name, "' does not serve ", std::string(TaskName(task))));
  }
  return model;
}

absl::Status ValidateLabels(const std::vector<std::string>& labels) {
  if (labels.size() > kMaxLabels) {
    return absl::InvalidArgumentError(
        absl::StrCat("labels: ", labels.size(), " labels exceeds the limit of ", kMaxLabels));
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i].empty() || labels[i].size() > 1024) {
      return absl::InvalidArgumentError(absl::StrCat("labels[", i, "]: must be 1 to 1024 bytes"));
    }
    if (!ValidateUtf8(labels[i]).ok()) {
      return absl::InvalidArgumentError(absl::StrCat("labels[", i, "]: invalid UTF-8"));
    }
    // A blank label makes a prompt with nothing to compare against.
    if (labels[i].find_first_not_of(" \t\r\n\f\v") == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("labels[", i, "]: blank (whitespace only)"));
    }
    if (!seen.insert(labels[i]).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("labels[", i, "]: duplicate label ", Quote(labels[i])));
    }
  }
  return absl::OkStatus();
}

bool HasGenerationParams(const v1::GenerationParams& params) {
  return params.has_num_beams() || params.has_max_length() || params.has_min_length() ||
         params.has_length_penalty() || params.has_early_stopping() ||
         params.has_no_repeat_ngram_size() || params.has_max_new_tokens();
}

}  // namespace docsparse
