#include "server/request_validation.h"

#include <chrono>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "model/lsg_attention.h"
#include "model/lsg_budget.h"
#include "model/sbm_attention.h"
#include "model/unicode_text.h"

namespace docsparse {

absl::StatusOr<PreparedInput> Prepare(const ServedModel& model, const v1::Document& document,
                                      const ServerLimits& limits) {
  PreparedInput input;
  const int64_t token_limit =
      std::min<int64_t>(limits.max_document_tokens, model.serving.max_document_tokens);
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
        if (ids[i] < 0 || ids[i] >= model.config.vocab_size) {
          return absl::InvalidArgumentError(
              absl::StrCat("document.token_ids.ids[", i, "]: ", ids[i],
                           " is outside the vocabulary [0, ", model.config.vocab_size, ")"));
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

bool RunsLsg(const ServedModel& model) {
  return model.encoder->attention().kind() == AttentionKind::kLsg && model.config.lsg.has_value();
}

bool RunsSbm(const ServedModel& model) {
  return model.encoder->attention().kind() == AttentionKind::kSbm;
}

std::vector<int64_t> TokenCounts(const std::vector<std::vector<int32_t>>& sequences) {
  std::vector<int64_t> counts;
  for (const auto& sequence : sequences) counts.push_back(static_cast<int64_t>(sequence.size()));
  return counts;
}

}  // namespace

absl::Status CheckBudget(const ServedModel& model, const v1::SparsityBudget& budget) {
  const v1::AttentionKind own = RunsSbm(model)   ? v1::ATTENTION_KIND_SBM
                                : RunsLsg(model) ? v1::ATTENTION_KIND_LSG
                                                 : v1::ATTENTION_KIND_DENSE;
  if (budget.attention() != v1::ATTENTION_KIND_UNSPECIFIED && budget.attention() != own) {
    const std::string& name = v1::AttentionKind_Name(budget.attention());
    return absl::InvalidArgumentError(
        absl::StrCat("budget.attention: model '", model.name, "' has no parameters for ",
                     name.empty() ? absl::StrCat("unknown kind ", budget.attention()) : name,
                     " (available: ", v1::AttentionKind_Name(own), ")"));
  }
  switch (budget.cap_case()) {
    case v1::SparsityBudget::kMaxDensity:
      if (!(budget.max_density() > 0 && budget.max_density() <= 1)) {
        return absl::InvalidArgumentError("budget.max_density: must be in (0, 1]");
      }
      if (!RunsLsg(model) && !RunsSbm(model) && budget.strict() && budget.max_density() < 1) {
        return absl::InvalidArgumentError(absl::StrCat("budget.max_density: ", budget.max_density(),
                                                       " is below the minimum 1 for model '",
                                                       model.name, "' (dense attention)"));
      }
      break;
    case v1::SparsityBudget::kMaxAttentionGflops:
      if (!(budget.max_attention_gflops() > 0)) {
        return absl::InvalidArgumentError("budget.max_attention_gflops: must be > 0");
      }
      break;
    case v1::SparsityBudget::kEdgeRegularization:
      if (RunsSbm(model)) {
        if (!std::isfinite(budget.edge_regularization())) {
          return absl::InvalidArgumentError("budget.edge_regularization: must be finite");
        }
        break;
      }
      return absl::InvalidArgumentError(
          absl::StrCat("budget.edge_regularization: applies to SBM attention; model '", model.name,
                       "' runs ", RunsLsg(model) ? "lsg" : "dense", " attention"));
    case v1::SparsityBudget::CAP_NOT_SET:
      break;
  }
  return absl::OkStatus();
}

double PlannedAttentionFlops(const ServedModel& model, const ItemAttentionOptions& options,
                             const std::vector<std::vector<int32_t>>& sequences) {
  const EncoderShape shape = model.encoder->shape();
  double flops = 0;
  for (const auto& sequence : sequences) {
    const int64_t tokens = static_cast<int64_t>(sequence.size());
    if (RunsSbm(model) && options.target_density > 0) {
      flops += DenseAttentionFlops(tokens, shape) * shape.num_layers * options.target_density;
    } else if (RunsLsg(model)) {
      const LsgConfig config = ApplyLsgKnobs(*model.config.lsg, options);
      flops += 4.0 * shape.head_dim *
               static_cast<double>(LsgPlannedEdges(config, tokens, shape.num_heads)) *
               shape.num_layers;
    } else {
      flops += DenseAttentionFlops(tokens, shape) * shape.num_layers;
    }
  }
  return flops;
}

absl::StatusOr<ItemAttentionOptions> PlanBudget(
    const ServedModel& model, const v1::SparsityBudget& budget,
    const v1::RequestOptions& request_options, const std::vector<std::vector<int32_t>>& sequences) {
  if (RunsSbm(model)) {
    ItemAttentionOptions options;
    options.seed =
        budget.has_seed() ? budget.seed() : SbmSeedFromRequestId(request_options.request_id());
    switch (budget.cap_case()) {
      case v1::SparsityBudget::kMaxDensity:
        options.target_density = budget.max_density();
        break;
      case v1::SparsityBudget::kEdgeRegularization:
        options.edge_regularization = budget.edge_regularization();
        break;
      case v1::SparsityBudget::kMaxAttentionGflops: {
        int64_t tokens = 0;
        for (const auto& sequence : sequences) tokens += static_cast<int64_t>(sequence.size());
        options.target_density =
            SbmTargetDensityForAttentionFlops(budget.max_attention_gflops() * 1e9, tokens,
                                              model.encoder->shape(), model.sbm_clusters);
        if (options.target_density <= 0) {
          if (budget.strict()) {
            return absl::InvalidArgumentError(
                absl::StrCat("budget.max_attention_gflops: ", budget.max_attention_gflops(),
                             " is below the SBM memberships' own cost for this document on model '",
                             model.name, "'"));
          }
          options.target_density = 1e-9;  // the sparsest plan; budget_met will say false
        }
        break;
      }
      case v1::SparsityBudget::CAP_NOT_SET:
        break;
    }
    return options;
  }
  if (RunsLsg(model)) {
    LsgCap cap;
    if (budget.cap_case() == v1::SparsityBudget::kMaxDensity)
      cap.max_density = budget.max_density();
    if (budget.cap_case() == v1::SparsityBudget::kMaxAttentionGflops) {
      cap.max_attention_gflops = budget.max_attention_gflops();
    }
    const LsgKnobChoice choice =
        ChooseLsgKnobs(*model.config.lsg, TokenCounts(sequences), model.encoder->shape(), cap);
    if (!choice.fits && budget.strict()) {
      const bool density = cap.max_density.has_value();
      return absl::InvalidArgumentError(absl::StrCat(
          density ? "budget.max_density: " : "budget.max_attention_gflops: ",
          density ? budget.max_density() : budget.max_attention_gflops(), " is below the minimum ",
          density ? choice.planned_density : choice.planned_attention_gflops,
          density ? "" : " GFLOP", " for this document on model '", model.name,
          "' (lsg: the cheapest block / sparse block / sparsity factor on its lattice)"));
    }
    return choice.options;
  }
  if (budget.cap_case() == v1::SparsityBudget::kMaxAttentionGflops && budget.strict()) {
    const double gflops = PlannedAttentionFlops(model, {}, sequences) / 1e9;
    if (gflops > budget.max_attention_gflops()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "budget.max_attention_gflops: ", budget.max_attention_gflops(), " is below the minimum ",
          gflops, " GFLOP for this document on model '", model.name, "' (dense attention)"));
    }
  }
  return ItemAttentionOptions{};
}

bool BudgetMet(const v1::SparsityBudget& budget, const CostAccount& cost) {
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
