#include "server/document_tasks.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "kernels/cpu_features.h"
#include "model/attention/lsg_attention.h"
#include "model/attention/lsg_mask_map.h"
#include "model/attention/mask_map.h"
#include "model/encoder/pooling.h"
#include "model/tasks/extractive_summary.h"
#include "model/tasks/zero_shot.h"
#include "model/text/sentence_splitter.h"
#include "server/abstractive_summary.h"
#include "server/cost_report.h"

namespace docsparse {
namespace {

double Milliseconds(BatchClock::duration duration) {
  return std::chrono::duration<double, std::milli>(duration).count();
}

// What every task's completion needs besides its own outputs.
struct JobContext {
  const ServedModel* model;
  BatchClock::time_point received;
  double tokenize_ms = 0;
  bool truncated = false;
  // The document's sequences, for the mask map.
  std::vector<int64_t> document_lengths;
};

// A job over `sequences` with the attention its budget chose, priced with
// the planner's cost model.
std::unique_ptr<EncodeJob> MakeJob(const ServedModel& model, const char* task,
                                   std::vector<std::vector<int32_t>> sequences,
                                   const ItemAttentionOptions& attention) {
  auto job = std::make_unique<EncodeJob>(model.encoder_shape());
  job->pending.key = BatchKey{
      model.name, task, std::string(AttentionKindName(ServedAttentionKind(model, attention)))};
  job->pending.enqueued = BatchClock::now();
  job->pending.attention_flops = PlannedAttentionFlops(model, attention, sequences);
  for (const auto& sequence : sequences) {
    const int64_t length = static_cast<int64_t>(sequence.size());
    job->pending.tokens += length;
    job->pending.longest_sequence = std::max(job->pending.longest_sequence, length);
  }
  job->sequences = std::move(sequences);
  job->attention = attention;
  return job;
}

std::vector<int64_t> Lengths(const std::vector<std::vector<int32_t>>& sequences) {
  std::vector<int64_t> lengths;
  for (const auto& sequence : sequences) lengths.push_back(static_cast<int64_t>(sequence.size()));
  return lengths;
}

absl::Status CheckOptions(const v1::RequestOptions& options) {
  if (options.mask_map_resolution() < 0 || options.mask_map_resolution() > 1024) {
    return absl::InvalidArgumentError("options.mask_map_resolution: must be in [0, 1024]");
  }
  return absl::OkStatus();
}

// Cost, budget, batch, timings and the optional mask map.
void FinishCost(const JobContext& context, const v1::SparsityBudget& budget,
                const v1::RequestOptions& options, const EncodeJob& job, const EncodeResult& result,
                v1::CostReport* report) {
  FillCostReport(job.cost, ServedAttentionKind(*context.model, job.attention), report);
  FillAttentionKnobs(*context.model, job.attention, report->mutable_knobs());
  report->set_truncated(context.truncated);
  *report->mutable_budget() = budget;
  report->set_budget_met(BudgetMet(budget, job.cost));
  report->set_batch_size(result.batch_size);
  report->set_precision(std::string(PrecisionName(context.model->precision())));
  report->set_isa(std::string(IsaName(HostCpuFeatures())));
  v1::Timings* timings = report->mutable_timings();
  timings->set_tokenize_ms(context.tokenize_ms);
  timings->set_queue_ms(Milliseconds(result.started - job.pending.enqueued));
  timings->set_inference_ms(Milliseconds(result.finished - result.started));
  timings->set_total_ms(Milliseconds(BatchClock::now() - context.received));
  if (options.return_mask_map()) {
    const int resolution = options.mask_map_resolution() > 0 ? options.mask_map_resolution() : 64;
    int cells = 0;
    const ServedModel& model = *context.model;
    const std::vector<float> map =
        ServedAttentionKind(model, job.attention) == AttentionKind::kLsg && model.lsg()
            ? LsgMaskMap(ApplyLsgKnobs(*model.lsg(), job.attention), context.document_lengths,
                         resolution, &cells)
            : DenseWindowsMaskMap(context.document_lengths, resolution, &cells);
    // Dense and LSG plans pick the same pairs in every layer.
    for (int layer = 0; layer < context.model->encoder_shape().num_layers; ++layer) {
      v1::MaskMap* out = report->add_mask_maps();
      out->set_layer(layer);
      out->set_rows(cells);
      out->set_cols(cells);
      out->mutable_density()->Add(map.begin(), map.end());
    }
  }
}

// Runs `finish` on the job's result and reports how it went.
template <typename Finish>
std::function<void(EncodeJob&, absl::StatusOr<EncodeResult>)> Completes(Completion complete,
                                                                        Finish finish) {
  return [complete = std::move(complete), finish = std::move(finish)](
             EncodeJob& job, absl::StatusOr<EncodeResult> result) {
    if (!result.ok()) return complete(result.status());
    absl::Status status;
    try {
      c10::InferenceMode inference_mode;
      status = finish(job, *result);
    } catch (const c10::Error& error) {
      status = absl::InternalError(
          absl::StrCat("post-processing failed: ", error.what_without_backtrace()));
    }
    complete(status);
  };
}

// The checkpoint's own head over each window's first token; with several
// windows the logits are averaged weighted by the windows' token counts.
std::vector<LabelProbability> ScoreWithHead(const ClassificationHead& head,
                                            const at::Tensor& first_tokens,
                                            const std::vector<std::vector<int32_t>>& windows) {
  const at::Tensor logits =
      CombineWindows(head.Logits(first_tokens.unsqueeze(1)), windows, /*normalize=*/false);
  const at::Tensor probabilities = head.Probabilities(logits.unsqueeze(0))[0].contiguous();
  std::vector<LabelProbability> scores;
  for (int i = 0; i < head.num_labels(); ++i) {
    scores.push_back({head.labels()[i], probabilities[i].item<float>(), 0.0f});
  }
  std::stable_sort(scores.begin(), scores.end(),
                   [](const LabelProbability& a, const LabelProbability& b) {
                     return a.probability > b.probability;
                   });
  return scores;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EncodeJob>> DocumentTasks::PrepareEmbed(
    const v1::EmbedRequest& request, BatchClock::time_point received, v1::EmbedResponse* response,
    Completion complete) const {
  ASSIGN_OR_RETURN(const ServedModel* model,
                   FindModelFor(registry_, request.model(), Task::kEmbed));
  RETURN_IF_ERROR(CheckBudget(*model, request.budget()));
  RETURN_IF_ERROR(CheckOptions(request.options()));
  ASSIGN_OR_RETURN(PreparedInput input, Prepare(*model, request.document(), limits_));
  ASSIGN_OR_RETURN(DocumentWindows windows,
                   model->text->Windows(input.ids, ResolveOverflow(request.options(), *model)));
  ASSIGN_OR_RETURN(const ItemAttentionOptions attention,
                   PlanBudget(*model, request.budget(), request.options(), windows.windows));

  JobContext context{model, received, input.tokenize_ms, windows.truncated,
                     Lengths(windows.windows)};
  const PoolingMode pooling = ResolvePooling(request.pooling(), *model);
  const bool normalize = request.has_normalize() ? request.normalize() : model->serving.normalize;
  auto job = MakeJob(*model, "embed", windows.windows, attention);
  job->done = Completes(std::move(complete), [&request, response, context, pooling, normalize,
                                              sequences = std::move(windows.windows)](
                                                 EncodeJob& job, const EncodeResult& result) {
    const at::Tensor rows = pooling == PoolingMode::kCls ? result.pooled.first : result.pooled.mean;
    const at::Tensor vector = CombineWindows(rows, sequences, normalize).contiguous();
    response->set_model(context.model->name);
    response->mutable_embedding()->Add(vector.data_ptr<float>(),
                                       vector.data_ptr<float>() + vector.numel());
    FinishCost(context, request.budget(), request.options(), job, result, response->mutable_cost());
    return absl::OkStatus();
  });
  return job;
}

absl::StatusOr<std::unique_ptr<EncodeJob>> DocumentTasks::PrepareClassify(
    const v1::ClassifyRequest& request, BatchClock::time_point received,
    v1::ClassifyResponse* response, Completion complete) const {
  ASSIGN_OR_RETURN(const ServedModel* model,
                   FindModelFor(registry_, request.model(), Task::kClassify));
  RETURN_IF_ERROR(CheckBudget(*model, request.budget()));
  RETURN_IF_ERROR(CheckOptions(request.options()));
  // A fine-tuned head answers when the caller names no labels of its own.
  const bool use_head = model->head != nullptr && request.labels().empty();
  const ZeroShotConfig& zero_shot = model->serving.zero_shot;
  std::vector<std::string> labels(request.labels().begin(), request.labels().end());
  if (labels.empty() && !use_head) {
    for (const ZeroShotLabel& label : zero_shot.labels) labels.push_back(label.name);
    if (labels.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("labels: empty, and model '", model->name, "' has no default labels"));
    }
  }
  RETURN_IF_ERROR(ValidateLabels(labels));
  const float temperature =
      request.has_temperature() ? request.temperature() : zero_shot.temperature;
  // Similarities are in [-1, 1]: outside this range the softmax is uniform
  // or overflows.
  if (!(temperature >= 1e-4f && temperature <= 1e4f)) {
    return absl::InvalidArgumentError("temperature: must be in [0.0001, 10000]");
  }
  ASSIGN_OR_RETURN(PreparedInput input, Prepare(*model, request.document(), limits_));
  ASSIGN_OR_RETURN(DocumentWindows windows,
                   model->text->Windows(input.ids, ResolveOverflow(request.options(), *model)));
  ASSIGN_OR_RETURN(const ItemAttentionOptions attention,
                   PlanBudget(*model, request.budget(), request.options(), windows.windows));

  // Labels not embedded yet ride in the same job, after the windows.
  const std::vector<std::string> missing =
      use_head ? std::vector<std::string>{} : model->labels->Missing(labels);
  std::vector<std::vector<int32_t>> sequences = windows.windows;
  const size_t limit = static_cast<size_t>(model->encoder->max_sequence_length());
  for (const std::string& label : missing) {
    sequences.push_back(
        model->tokenizer->Frame(model->tokenizer->Encode(LabelPrompt(label, zero_shot)), limit));
  }
  JobContext context{model, received, input.tokenize_ms, windows.truncated,
                     Lengths(windows.windows)};
  auto job =
      MakeJob(*model, use_head ? "classify_head" : "classify", std::move(sequences), attention);
  job->done = Completes(std::move(complete), [&request, response, context, use_head, labels,
                                              missing, temperature,
                                              windows = std::move(windows.windows)](
                                                 EncodeJob& job, const EncodeResult& result) {
    const ServedModel& model = *context.model;
    const int64_t count = static_cast<int64_t>(windows.size());
    response->set_model(model.name);
    std::vector<LabelProbability> scores;
    if (use_head) {
      response->set_method(v1::CLASSIFICATION_METHOD_HEAD);
      scores = ScoreWithHead(*model.head, result.pooled.first.slice(0, 0, count), windows);
    } else {
      response->set_method(v1::CLASSIFICATION_METHOD_ZERO_SHOT);
      // Labels embedded in this batch, then the cached ones (the cache may
      // be full and keep none of the new ones).
      const at::Tensor fresh = L2Normalize(result.pooled.mean.slice(0, count));
      std::map<std::string, at::Tensor> embedded;
      for (size_t i = 0; i < missing.size(); ++i) {
        embedded.emplace(missing[i], fresh[static_cast<int64_t>(i)]);
        model.labels->Insert(missing[i], fresh[static_cast<int64_t>(i)]);
      }
      std::vector<at::Tensor> label_rows;
      for (const std::string& label : labels) {
        if (auto it = embedded.find(label); it != embedded.end()) {
          label_rows.push_back(it->second);
          continue;
        }
        ASSIGN_OR_RETURN(at::Tensor cached, model.labels->Rows({label}));
        label_rows.push_back(cached[0]);
      }
      const at::Tensor rows = at::stack(label_rows);
      const at::Tensor document =
          CombineWindows(result.pooled.mean.slice(0, 0, count), windows, /*normalize=*/true);
      scores = ScoreLabels(document, rows, labels, temperature);
    }
    for (const LabelProbability& score : scores) {
      v1::LabelScore* out = response->add_scores();
      out->set_label(score.label);
      out->set_score(score.probability);
      out->set_similarity(score.similarity);
    }
    FinishCost(context, request.budget(), request.options(), job, result, response->mutable_cost());
    return absl::OkStatus();
  });
  return job;
}

absl::StatusOr<std::unique_ptr<EncodeJob>> DocumentTasks::PrepareSummarize(
    const v1::SummarizeRequest& request, BatchClock::time_point received,
    v1::SummarizeResponse* response, Completion complete, TokenSink on_token) const {
  ASSIGN_OR_RETURN(const ServedModel* model,
                   FindModelFor(registry_, request.model(), Task::kSummarize));
  if (model->abstractive()) {
    return PrepareAbstractive(*model, request, received, response, std::move(complete),
                              std::move(on_token));
  }
  RETURN_IF_ERROR(CheckBudget(*model, request.budget()));
  RETURN_IF_ERROR(CheckOptions(request.options()));
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

  std::vector<Sentence> sentences = SplitSentences(input.text);
  // Fragments (headings, list numbers) make poor summary sentences; use them
  // only when there is nothing else.
  std::vector<int> candidates;
  for (size_t i = 0; i < sentences.size(); ++i) {
    if (sentences[i].words >= 4) candidates.push_back(static_cast<int>(i));
  }
  if (candidates.empty()) {
    for (size_t i = 0; i < sentences.size(); ++i) candidates.push_back(static_cast<int>(i));
  }
  const size_t limit = static_cast<size_t>(model->encoder->max_sequence_length());
  std::vector<std::vector<int32_t>> framed;
  for (int index : candidates) {
    framed.push_back(
        model->tokenizer->Frame(model->tokenizer->Encode(sentences[index].text), limit));
  }
  ASSIGN_OR_RETURN(const ItemAttentionOptions attention,
                   PlanBudget(*model, request.budget(), request.options(), framed));

  JobContext context{model, received, input.tokenize_ms, false, Lengths(framed)};
  const int count =
      params.max_sentences() > 0 ? params.max_sentences() : model->serving.extractive.max_sentences;
  const float diversity =
      params.has_diversity() ? params.diversity() : model->serving.extractive.diversity;
  auto job = MakeJob(*model, "summarize", std::move(framed), attention);
  job->done = Completes(std::move(complete), [&request, response, context, count, diversity,
                                              candidates = std::move(candidates),
                                              sentences = std::move(sentences)](
                                                 EncodeJob& job, const EncodeResult& result) {
    std::vector<std::string> chosen;
    for (const SelectedSentence& selected :
         SelectSentences(L2Normalize(result.pooled.mean), count, diversity)) {
      const Sentence& sentence = sentences[candidates[selected.index]];
      v1::ExtractedSentence* out = response->add_sentences();
      out->set_index(candidates[selected.index]);
      out->set_text(sentence.text);
      out->set_score(selected.score);
      out->set_begin_byte(static_cast<int64_t>(sentence.begin));
      out->set_end_byte(static_cast<int64_t>(sentence.end));
      chosen.push_back(sentence.text);
    }
    response->set_model(context.model->name);
    response->set_kind(v1::SUMMARY_KIND_EXTRACTIVE);
    response->set_summary(absl::StrJoin(chosen, " "));
    FinishCost(context, request.budget(), request.options(), job, result, response->mutable_cost());
    return absl::OkStatus();
  });
  return job;
}

absl::StatusOr<std::unique_ptr<EncodeJob>> DocumentTasks::PrepareAbstractive(
    const ServedModel& model, const v1::SummarizeRequest& request, BatchClock::time_point received,
    v1::SummarizeResponse* response, Completion complete, TokenSink on_token) const {
  RETURN_IF_ERROR(CheckBudget(model, request.budget()));
  RETURN_IF_ERROR(CheckOptions(request.options()));
  if (request.extractive().max_sentences() != 0 || request.extractive().has_diversity()) {
    return absl::InvalidArgumentError(
        absl::StrCat("extractive: model '", model.name,
                     "' summarizes abstractively; extractive parameters apply to encoder models"));
  }
  ASSIGN_OR_RETURN(GenerationConfig generation, ResolveGeneration(model, request.generation()));
  ASSIGN_OR_RETURN(PreparedInput input, Prepare(model, request.document(), limits_));
  ASSIGN_OR_RETURN(SummarizerInput framed, FrameForSummarizer(model, input.ids, request.options()));
  std::vector<std::vector<int32_t>> sequences = {std::move(framed.framed)};
  ASSIGN_OR_RETURN(const ItemAttentionOptions attention,
                   PlanBudget(model, request.budget(), request.options(), sequences));

  JobContext context{&model, received, input.tokenize_ms, framed.truncated, Lengths(sequences)};
  // Requests with different generation settings share batches: the
  // generator takes a config per sequence.
  auto job = MakeJob(model, "summarize_abstractive", std::move(sequences), attention);
  job->generation = std::make_unique<GenerationJob>();
  job->generation->config = std::move(generation);
  job->generation->request_id = request.options().request_id();
  if (on_token) {
    job->generation->on_token = StreamTextPieces(*model.tokenizer, std::move(on_token));
  }
  job->done = Completes(std::move(complete), [&request, response, context](
                                                 EncodeJob& job, const EncodeResult& result) {
    FinishCost(context, request.budget(), request.options(), job, result, response->mutable_cost());
    FillAbstractiveSummary(*context.model, *job.generation, context.received, response);
    return absl::OkStatus();
  });
  return job;
}

void DocumentTasks::ListModels(v1::ListModelsResponse* response) const {
  for (const ServedModel* model : registry_.models()) {
    v1::ModelInfo* info = response->add_models();
    info->set_name(model->name);
    info->set_architecture(model->architecture());
    for (Task task : model->serving.tasks) {
      info->add_tasks(task == Task::kEmbed      ? v1::TASK_EMBED
                      : task == Task::kClassify ? v1::TASK_CLASSIFY
                                                : v1::TASK_SUMMARIZE);
    }
    info->set_attention(ToProto(model->attention().kind()));
    for (AttentionKind kind : AvailableAttention(*model)) {
      info->add_available_attention(ToProto(kind));
    }
    info->set_max_position_tokens(static_cast<int32_t>(model->max_sequence_length()));
    info->set_max_document_tokens(static_cast<int32_t>(
        std::min<int64_t>(limits_.max_document_tokens, model->serving.max_document_tokens)));
    const EncoderShape shape = model->encoder_shape();
    info->set_hidden_size(shape.hidden);
    info->set_num_layers(shape.num_layers);
    info->set_num_heads(shape.num_heads);
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
