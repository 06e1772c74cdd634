#include "server/document_tasks.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "model/extractive_summary.h"
#include "model/sentence_splitter.h"
#include "model/unicode_text.h"
#include "model/zero_shot.h"
#include "server/cost_report.h"

namespace docsparse {
namespace {

using Clock = std::chrono::steady_clock;

double MillisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct PreparedInput {
  std::string text;  // empty when the request sent token ids
  std::vector<int32_t> ids;
  double tokenize_ms = 0;
};

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
  const Clock::time_point start = Clock::now();
  input.ids = model.tokenizer->Encode(text);
  input.tokenize_ms = MillisecondsSince(start);
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

// Dense is the only planner so far: validates the budget against it.
absl::Status CheckBudget(const ServedModel& model, const v1::SparsityBudget& budget) {
  if (budget.attention() != v1::ATTENTION_KIND_UNSPECIFIED &&
      budget.attention() != v1::ATTENTION_KIND_DENSE) {
    return absl::InvalidArgumentError(absl::StrCat(
        "budget.attention: model '", model.name, "' has no parameters for ",
        v1::AttentionKind_Name(budget.attention()), " (available: ATTENTION_KIND_DENSE)"));
  }
  switch (budget.cap_case()) {
    case v1::SparsityBudget::kMaxDensity:
      if (!(budget.max_density() > 0 && budget.max_density() <= 1)) {
        return absl::InvalidArgumentError("budget.max_density: must be in (0, 1]");
      }
      if (budget.strict() && budget.max_density() < 1) {
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
      return absl::InvalidArgumentError(
          absl::StrCat("budget.edge_regularization: applies to SBM attention; model '", model.name,
                       "' runs dense attention"));
    case v1::SparsityBudget::CAP_NOT_SET:
      break;
  }
  return absl::OkStatus();
}

// Strict FLOP caps are checked against the planned cost of the document's
// windows before anything runs.
absl::Status CheckPlannedGflops(const ServedModel& model, const v1::SparsityBudget& budget,
                                const std::vector<std::vector<int32_t>>& sequences) {
  if (budget.cap_case() != v1::SparsityBudget::kMaxAttentionGflops || !budget.strict()) {
    return absl::OkStatus();
  }
  const EncoderShape shape = model.encoder->shape();
  double flops = 0;
  for (const auto& sequence : sequences) {
    flops += DenseAttentionFlops(static_cast<int64_t>(sequence.size()), shape) * shape.num_layers;
  }
  if (flops / 1e9 > budget.max_attention_gflops()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "budget.max_attention_gflops: ", budget.max_attention_gflops(), " is below the minimum ",
        flops / 1e9, " GFLOP for this document on model '", model.name, "' (dense attention)"));
  }
  return absl::OkStatus();
}

bool BudgetMet(const v1::SparsityBudget& budget, const CostAccount& cost) {
  switch (budget.cap_case()) {
    case v1::SparsityBudget::kMaxDensity:
      return cost.MeanDensity() <= budget.max_density();
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

// Everything after the forward passes: cost, budget, timings.
void FinishCost(const ServedModel& model, const v1::SparsityBudget& budget, const CostAccount& cost,
                const RequestClock& clock, double tokenize_ms, bool truncated,
                v1::CostReport* report) {
  FillCostReport(cost, model.encoder->attention().kind(), report);
  report->set_truncated(truncated);
  *report->mutable_budget() = budget;
  report->set_budget_met(BudgetMet(budget, cost));
  report->set_batch_size(1);
  v1::Timings* timings = report->mutable_timings();
  timings->set_queue_ms(
      std::chrono::duration<double, std::milli>(clock.started - clock.received).count());
  timings->set_tokenize_ms(tokenize_ms);
  timings->set_total_ms(MillisecondsSince(clock.received));
  timings->set_inference_ms(std::max(0.0, MillisecondsSince(clock.started) - tokenize_ms));
}

PoolingMode ResolvePooling(v1::Pooling pooling, const ServedModel& model) {
  if (pooling == v1::POOLING_CLS) return PoolingMode::kCls;
  if (pooling == v1::POOLING_MEAN) return PoolingMode::kMean;
  return model.serving.pooling;
}

// The model and whether it serves `task` (docsparse.json "tasks").
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
          absl::StrCat("labels[", i, "]: duplicate label '", labels[i], "'"));
    }
  }
  return absl::OkStatus();
}

// The checkpoint's own head over each window's first token; with several
// windows the logits are averaged weighted by the windows' token counts.
absl::StatusOr<std::vector<LabelProbability>> ClassifyWithHead(
    const ServedModel& model, const std::vector<std::vector<int32_t>>& windows, CostAccount* cost) {
  ASSIGN_OR_RETURN(at::Tensor first_tokens, model.text->EmbedSequences(windows, PoolingMode::kCls,
                                                                       /*normalize=*/false, cost));
  c10::InferenceMode inference_mode;
  std::vector<float> weights;
  for (const auto& window : windows) weights.push_back(static_cast<float>(window.size()));
  const at::Tensor w = at::tensor(weights, at::kFloat).unsqueeze(1);
  const at::Tensor logits = (model.head->Logits(first_tokens.unsqueeze(1)) * w).sum(0) / w.sum();
  const at::Tensor probabilities = model.head->Probabilities(logits.unsqueeze(0))[0].contiguous();
  std::vector<LabelProbability> scores;
  for (int i = 0; i < model.head->num_labels(); ++i) {
    scores.push_back({model.head->labels()[i], probabilities[i].item<float>(), 0.0f});
  }
  std::stable_sort(scores.begin(), scores.end(),
                   [](const LabelProbability& a, const LabelProbability& b) {
                     return a.probability > b.probability;
                   });
  return scores;
}

bool HasGenerationParams(const v1::GenerationParams& params) {
  return params.has_num_beams() || params.has_max_length() || params.has_min_length() ||
         params.has_length_penalty() || params.has_early_stopping() ||
         params.has_no_repeat_ngram_size() || params.has_max_new_tokens();
}

}  // namespace

absl::Status DocumentTasks::Embed(const v1::EmbedRequest& request, const RequestClock& clock,
                                  v1::EmbedResponse* response) const {
  ASSIGN_OR_RETURN(const ServedModel* model,
                   FindModelFor(registry_, request.model(), Task::kEmbed));
  RETURN_IF_ERROR(CheckBudget(*model, request.budget()));
  ASSIGN_OR_RETURN(PreparedInput input, Prepare(*model, request.document(), limits_));
  const OverflowPolicy overflow = ResolveOverflow(request.options(), *model);
  ASSIGN_OR_RETURN(DocumentWindows windows, model->text->Windows(input.ids, overflow));
  RETURN_IF_ERROR(CheckPlannedGflops(*model, request.budget(), windows.windows));

  CostAccount cost(model->encoder->shape());
  const bool normalize = request.has_normalize() ? request.normalize() : model->serving.normalize;
  ASSIGN_OR_RETURN(DocumentEmbedding embedding,
                   model->text->EmbedDocument(windows, ResolvePooling(request.pooling(), *model),
                                              normalize, &cost));
  response->set_model(model->name);
  const at::Tensor vector = embedding.embedding.contiguous();
  response->mutable_embedding()->Add(vector.data_ptr<float>(),
                                     vector.data_ptr<float>() + vector.numel());
  FinishCost(*model, request.budget(), cost, clock, input.tokenize_ms, embedding.truncated,
             response->mutable_cost());
  return absl::OkStatus();
}

absl::Status DocumentTasks::Classify(const v1::ClassifyRequest& request, const RequestClock& clock,
                                     v1::ClassifyResponse* response) const {
  ASSIGN_OR_RETURN(const ServedModel* model,
                   FindModelFor(registry_, request.model(), Task::kClassify));
  RETURN_IF_ERROR(CheckBudget(*model, request.budget()));
  // A fine-tuned head answers when the caller names no labels of its own.
  const bool use_head = model->head != nullptr && request.labels().empty();
  const ZeroShotConfig& zero_shot = model->serving.zero_shot;
  std::vector<std::string> labels(request.labels().begin(), request.labels().end());
  if (labels.empty() && !use_head) {
    for (const ZeroShotLabel& label : zero_shot.labels) labels.push_back(label.name);
  }
  if (labels.empty() && !use_head) {
    return absl::InvalidArgumentError(
        absl::StrCat("labels: empty, and model '", model->name, "' has no default labels"));
  }
  RETURN_IF_ERROR(ValidateLabels(labels));
  const float temperature =
      request.has_temperature() ? request.temperature() : zero_shot.temperature;
  if (!(temperature > 0)) return absl::InvalidArgumentError("temperature: must be > 0");

  ASSIGN_OR_RETURN(PreparedInput input, Prepare(*model, request.document(), limits_));
  const OverflowPolicy overflow = ResolveOverflow(request.options(), *model);
  ASSIGN_OR_RETURN(DocumentWindows windows, model->text->Windows(input.ids, overflow));
  RETURN_IF_ERROR(CheckPlannedGflops(*model, request.budget(), windows.windows));

  CostAccount cost(model->encoder->shape());
  response->set_model(model->name);
  if (use_head) {
    ASSIGN_OR_RETURN(std::vector<LabelProbability> scores,
                     ClassifyWithHead(*model, windows.windows, &cost));
    response->set_method(v1::CLASSIFICATION_METHOD_HEAD);
    for (const LabelProbability& score : scores) {
      v1::LabelScore* out = response->add_scores();
      out->set_label(score.label);
      out->set_score(score.probability);
    }
  } else {
    // Label prompts are embedded like sentences: mean pooling, unit norm.
    ASSIGN_OR_RETURN(DocumentEmbedding document,
                     model->text->EmbedDocument(windows, PoolingMode::kMean,
                                                /*normalize=*/true, &cost));
    ASSIGN_OR_RETURN(at::Tensor label_rows,
                     model->labels->Get(labels, *model->text, zero_shot, &cost));
    response->set_method(v1::CLASSIFICATION_METHOD_ZERO_SHOT);
    for (const LabelProbability& score :
         ScoreLabels(document.embedding, label_rows, labels, temperature)) {
      v1::LabelScore* out = response->add_scores();
      out->set_label(score.label);
      out->set_score(score.probability);
      out->set_similarity(score.similarity);
    }
  }
  FinishCost(*model, request.budget(), cost, clock, input.tokenize_ms, windows.truncated,
             response->mutable_cost());
  return absl::OkStatus();
}

absl::Status DocumentTasks::Summarize(const v1::SummarizeRequest& request,
                                      const RequestClock& clock,
                                      v1::SummarizeResponse* response) const {
  ASSIGN_OR_RETURN(const ServedModel* model,
                   FindModelFor(registry_, request.model(), Task::kSummarize));
  RETURN_IF_ERROR(CheckBudget(*model, request.budget()));
  if (HasGenerationParams(request.generation())) {
    return absl::InvalidArgumentError(
        absl::StrCat("generation: model '", model->name,
                     "' summarizes extractively; generation parameters apply to seq2seq models"));
  }
  const v1::ExtractiveParams& params = request.extractive();
  if (params.max_sentences() < 0 || params.max_sentences() > 1000) {
    return absl::InvalidArgumentError("extractive.max_sentences: must be in [0, 1000]");
  }
  if (params.has_diversity() && !(params.diversity() >= 0 && params.diversity() <= 1)) {
    return absl::InvalidArgumentError("extractive.diversity: must be in [0, 1]");
  }
  if (request.document().content_case() == v1::Document::kTokenIds) {
    return absl::InvalidArgumentError(
        "document.token_ids: extractive summarization needs the document's text");
  }
  ASSIGN_OR_RETURN(PreparedInput input, Prepare(*model, request.document(), limits_));

  const std::vector<Sentence> sentences = SplitSentences(input.text);
  // Fragments (headings, list numbers) make poor summary sentences; use them
  // only when there is nothing else.
  std::vector<int> candidates;
  for (size_t i = 0; i < sentences.size(); ++i) {
    if (sentences[i].words >= 4) candidates.push_back(static_cast<int>(i));
  }
  if (candidates.empty()) {
    for (size_t i = 0; i < sentences.size(); ++i) candidates.push_back(static_cast<int>(i));
  }
  std::vector<std::string> texts;
  for (int index : candidates) texts.push_back(sentences[index].text);
  const size_t limit = static_cast<size_t>(model->encoder->max_sequence_length());
  std::vector<std::vector<int32_t>> framed;
  for (const std::string& text : texts) {
    framed.push_back(model->tokenizer->Frame(model->tokenizer->Encode(text), limit));
  }
  RETURN_IF_ERROR(CheckPlannedGflops(*model, request.budget(), framed));

  CostAccount cost(model->encoder->shape());
  ASSIGN_OR_RETURN(at::Tensor embeddings, model->text->EmbedSequences(framed, PoolingMode::kMean,
                                                                      /*normalize=*/true, &cost));
  const int count =
      params.max_sentences() > 0 ? params.max_sentences() : model->serving.extractive.max_sentences;
  const float diversity =
      params.has_diversity() ? params.diversity() : model->serving.extractive.diversity;
  std::vector<std::string> chosen;
  for (const SelectedSentence& selected : SelectSentences(embeddings, count, diversity)) {
    const Sentence& sentence = sentences[candidates[selected.index]];
    v1::ExtractedSentence* out = response->add_sentences();
    out->set_index(candidates[selected.index]);
    out->set_text(sentence.text);
    out->set_score(selected.score);
    out->set_begin_byte(static_cast<int64_t>(sentence.begin));
    out->set_end_byte(static_cast<int64_t>(sentence.end));
    chosen.push_back(sentence.text);
  }
  response->set_model(model->name);
  response->set_kind(v1::SUMMARY_KIND_EXTRACTIVE);
  response->set_summary(absl::StrJoin(chosen, " "));
  FinishCost(*model, request.budget(), cost, clock, input.tokenize_ms, /*truncated=*/false,
             response->mutable_cost());
  return absl::OkStatus();
}

void DocumentTasks::ListModels(v1::ListModelsResponse* response) const {
  for (const ServedModel* model : registry_.models()) {
    v1::ModelInfo* info = response->add_models();
    info->set_name(model->name);
    info->set_architecture(std::string(ArchitectureName(model->config.architecture)));
    for (Task task : model->serving.tasks) {
      info->add_tasks(task == Task::kEmbed      ? v1::TASK_EMBED
                      : task == Task::kClassify ? v1::TASK_CLASSIFY
                                                : v1::TASK_SUMMARIZE);
    }
    info->set_attention(ToProto(model->encoder->attention().kind()));
    info->add_available_attention(v1::ATTENTION_KIND_DENSE);
    info->set_max_position_tokens(static_cast<int32_t>(model->encoder->max_sequence_length()));
    info->set_max_document_tokens(static_cast<int32_t>(
        std::min<int64_t>(limits_.max_document_tokens, model->serving.max_document_tokens)));
    info->set_hidden_size(model->config.hidden_size);
    info->set_num_layers(model->config.num_layers);
    info->set_num_heads(model->config.num_heads);
    if (model->head != nullptr) {
      for (const std::string& label : model->head->labels()) info->add_default_labels(label);
    } else {
      for (const ZeroShotLabel& label : model->serving.zero_shot.labels) {
        info->add_default_labels(label.name);
      }
    }
    info->set_default_overflow(
        model->serving.overflow == OverflowPolicy::kReject     ? v1::OVERFLOW_REJECT
        : model->serving.overflow == OverflowPolicy::kTruncate ? v1::OVERFLOW_TRUNCATE
                                                               : v1::OVERFLOW_CHUNK);
    info->set_default_pooling(model->serving.pooling == PoolingMode::kCls ? v1::POOLING_CLS
                                                                          : v1::POOLING_MEAN);
    info->set_ready(true);
  }
}

}  // namespace docsparse
