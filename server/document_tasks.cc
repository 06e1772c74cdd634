#include "server/document_tasks.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "model/attention/planner_registry.h"
#include "model/encoder/pooling.h"
#include "model/tasks/extractive_summary.h"
#include "model/tasks/zero_shot.h"
#include "model/text/sentence_splitter.h"
#include "server/abstractive_summary.h"
#include "server/cost_report.h"
#include "server/request_price.h"

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

// Cost, budget, batch, timings and the optional mask map. A strict budget
// whose β the planner had to raise to its floor (only known once it ran:
// the floor's β depends on the content) fails here, naming the floor.
absl::Status FinishCost(const JobContext& context, const v1::SparsityBudget& budget,
                        const v1::RequestOptions& options, const EncodeJob& job,
                        const EncodeResult& result, v1::CostReport* report) {
  const AttentionPlanner& planner = ServedPlanner(*context.model, job.attention);
  if (budget.strict() && job.cost.raised_to_floor()) {
    // Named after what the client set: a cap, else its knobs.
    std::string asked = "budget.knobs";
    switch (budget.cap_case()) {
      case v1::SparsityBudget::kMaxDensity:
        asked = absl::StrCat("budget.max_density: ", budget.max_density());
        break;
      case v1::SparsityBudget::kMaxAttentionGflops:
        asked = absl::StrCat("budget.max_attention_gflops: ", budget.max_attention_gflops());
        break;
      case v1::SparsityBudget::kEdgeRegularization:
        asked = absl::StrCat("budget.edge_regularization: ", budget.edge_regularization());
        break;
      case v1::SparsityBudget::CAP_NOT_SET:
        break;
    }
    return absl::InvalidArgumentError(
        absl::StrCat(asked, " leaves the plan below its floor on model '", context.model->name,
                     "' (", planner.FloorDescription(),
                     "); the floor ran instead (ask for less sparsity, or drop "
                     "strict)"));
  }
  FillCostReport(job.cost, planner.kind(), planner.samples(), report);
  FillAttentionKnobs(*context.model, job.attention, report->mutable_knobs());
  report->set_truncated(context.truncated);
  *report->mutable_budget() = budget;
  report->set_budget_met(BudgetMet(budget, job.cost));
  report->set_batch_size(result.batch_size);
  report->set_precision(std::string(PrecisionName(context.model->precision())));
  report->set_isa(context.model->isa());
  v1::Timings* timings = report->mutable_timings();
  timings->set_tokenize_ms(context.tokenize_ms);
  timings->set_queue_ms(Milliseconds(result.started - job.pending.enqueued));
  timings->set_inference_ms(Milliseconds(result.finished - result.started));
  if (result.device_seconds.has_value()) timings->set_device_ms(*result.device_seconds * 1e3);
  timings->set_total_ms(Milliseconds(BatchClock::now() - context.received));
  if (options.return_mask_map()) {
    const int resolution = options.mask_map_resolution() > 0 ? options.mask_map_resolution() : 64;
    int cells = 0;
    const ServedModel& model = *context.model;
    const std::vector<float> map =
        ServedPlanner(model, job.attention)
            .MaskMap(job.attention.knobs, context.document_lengths, resolution, &cells);
    // Position patterns pick the same pairs in every layer.
    for (int layer = 0; layer < context.model->encoder_shape().num_layers; ++layer) {
      v1::MaskMap* out = report->add_mask_maps();
      out->set_layer(layer);
      out->set_rows(cells);
      out->set_cols(cells);
      out->mutable_density()->Add(map.begin(), map.end());
    }
  }
  return absl::OkStatus();
}

// Runs `work` (post-processing on LibTorch) and turns a c10::Error into a
// Status.
template <typename Work>
absl::Status Guarded(Work work) {
  try {
    c10::InferenceMode inference_mode;
    return work();
  } catch (const c10::Error& error) {
    return absl::InternalError(
        absl::StrCat("post-processing failed: ", error.what_without_backtrace()));
  }
}

// Runs `finish` on the job's result and reports how it went.
template <typename Finish>
std::function<void(EncodeJob&, absl::StatusOr<EncodeResult>)> Completes(Completion complete,
                                                                        Finish finish) {
  return [complete = std::move(complete), finish = std::move(finish)](
             EncodeJob& job, absl::StatusOr<EncodeResult> result) {
    if (!result.ok()) return complete(result.status());
    complete(Guarded([&] { return finish(job, *result); }));
  };
}

// Prices the job and refuses it when over the server's per-request caps.
absl::Status PriceAndAdmit(RequestPrice price, const ServerLimits& limits, EncodeJob* job) {
  job->price = std::move(price);
  return AdmitRequest(job->price, limits);
}

// The checkpoint's own head over each window's pooled row (its first
// token's, or the mean, as the head reads); with several windows the logits
// are averaged weighted by the windows' token counts.
std::vector<LabelProbability> ScoreWithHead(const ClassificationHead& head,
                                            const at::Tensor& pooled_windows,
                                            const std::vector<std::vector<int32_t>>& windows) {
  const at::Tensor logits =
      CombineWindows(head.LogitsOfPooled(pooled_windows), windows, /*normalize=*/false);
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

void AddScores(const std::vector<LabelProbability>& scores, v1::ClassifyResponse* response) {
  for (const LabelProbability& score : scores) {
    v1::LabelScore* out = response->add_scores();
    out->set_label(score.label);
    out->set_score(score.probability);
    out->set_similarity(score.similarity);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<EncodeJob>> DocumentTasks::PrepareEmbed(
    const v1::EmbedRequest& request, BatchClock::time_point received, v1::EmbedResponse* response,
    Completion complete) const {
  ASSIGN_OR_RETURN(const ServedModel* model,
                   FindModelFor(registry_, request.model(), Task::kEmbed));
  RETURN_IF_ERROR(CheckBudget(*model, request.budget()));
  RETURN_IF_ERROR(CheckOptions(request.options()));
  const OverflowPolicy overflow = ResolveOverflow(request.options(), *model);
  ASSIGN_OR_RETURN(PreparedInput input, Prepare(*model, request.document(), limits_, overflow));
  ASSIGN_OR_RETURN(DocumentWindows windows, model->text->Windows(input.ids, overflow));
  ASSIGN_OR_RETURN(const ItemAttentionOptions attention,
                   PlanBudget(*model, request.budget(), request.options(), windows.windows));

  JobContext context{model, received, input.tokenize_ms, windows.truncated,
                     Lengths(windows.windows)};
  const PoolingMode pooling = ResolvePooling(request.pooling(), *model);
  const bool normalize = request.has_normalize() ? request.normalize() : model->serving.normalize;
  auto job = MakeJob(*model, "embed", windows.windows, attention);
  RETURN_IF_ERROR(PriceAndAdmit(PriceEncoding(*model, attention, windows.windows, "document"),
                                limits_, job.get()));
  job->done = Completes(std::move(complete), [&request, response, context, pooling, normalize,
                                              sequences = std::move(windows.windows)](
                                                 EncodeJob& job, const EncodeResult& result) {
    const at::Tensor rows = pooling == PoolingMode::kCls ? result.pooled.first : result.pooled.mean;
    const at::Tensor vector = CombineWindows(rows, sequences, normalize).contiguous();
    response->set_model(context.model->name);
    response->mutable_embedding()->Add(vector.data_ptr<float>(),
                                       vector.data_ptr<float>() + vector.numel());
    return FinishCost(context, request.budget(), request.options(), job, result,
                      response->mutable_cost());
  });
  return job;
}

absl::StatusOr<std::unique_ptr<EncodeJob>> DocumentTasks::PrepareClassify(
    const v1::ClassifyRequest& request, BatchClock::time_point received,
    v1::ClassifyResponse* response, Completion complete, LabelSharing sharing) const {
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
  const OverflowPolicy overflow = ResolveOverflow(request.options(), *model);
  ASSIGN_OR_RETURN(PreparedInput input, Prepare(*model, request.document(), limits_, overflow));
  ASSIGN_OR_RETURN(DocumentWindows windows, model->text->Windows(input.ids, overflow));
  ASSIGN_OR_RETURN(const ItemAttentionOptions attention,
                   PlanBudget(*model, request.budget(), request.options(), windows.windows));

  // The job that embeds the request's labels looks them up now (the rows it
  // finds stay valid whatever the cache evicts meanwhile); the ones missing
  // ride in the same job, after the windows.
  const bool embeds_labels = !use_head && sharing.embeds;
  std::vector<at::Tensor> cached;
  std::vector<std::string> missing;
  if (embeds_labels) {
    cached = model->labels->Lookup(labels);
    for (size_t i = 0; i < labels.size(); ++i) {
      if (!cached[i].defined()) missing.push_back(labels[i]);
    }
  }
  std::vector<std::vector<int32_t>> label_prompts;
  const size_t limit = static_cast<size_t>(model->encoder->max_sequence_length());
  for (const std::string& label : missing) {
    label_prompts.push_back(
        model->tokenizer->Frame(model->tokenizer->Encode(LabelPrompt(label, zero_shot)), limit));
  }
  RequestPrice price = PriceEncoding(*model, attention, windows.windows, "document");
  price += PriceEncoding(*model, attention, label_prompts, "label");
  std::vector<std::vector<int32_t>> sequences = windows.windows;
  sequences.insert(sequences.end(), label_prompts.begin(), label_prompts.end());
  JobContext context{model, received, input.tokenize_ms, windows.truncated,
                     Lengths(windows.windows)};
  auto job =
      MakeJob(*model, use_head ? "classify_head" : "classify", std::move(sequences), attention);
  RETURN_IF_ERROR(PriceAndAdmit(std::move(price), limits_, job.get()));
  std::shared_ptr<SharedLabelRows> shared =
      sharing.rows != nullptr ? sharing.rows : std::make_shared<SharedLabelRows>();
  job->done = [&request, response, complete = std::move(complete), context, use_head, embeds_labels,
               labels, cached = std::move(cached), missing, temperature, shared,
               windows = std::move(windows.windows)](EncodeJob& job,
                                                     absl::StatusOr<EncodeResult> result) {
    if (!result.ok()) {
      // The documents waiting for this job's label rows hear why too.
      if (embeds_labels) shared->Publish(result.status());
      return complete(result.status());
    }
    const ServedModel& model = *context.model;
    const int64_t count = static_cast<int64_t>(windows.size());
    response->set_model(model.name);
    if (use_head) {
      return complete(Guarded([&] {
        response->set_method(v1::CLASSIFICATION_METHOD_HEAD);
        const at::Tensor& pooled = model.head->pooling() == PoolingMode::kMean
                                       ? result->pooled.mean
                                       : result->pooled.first;
        AddScores(ScoreWithHead(*model.head, pooled.slice(0, 0, count), windows), response);
        return FinishCost(context, request.budget(), request.options(), job, *result,
                          response->mutable_cost());
      }));
    }
    response->set_method(v1::CLASSIFICATION_METHOD_ZERO_SHOT);
    at::Tensor document;
    absl::Status status = Guarded([&] {
      document = CombineWindows(result->pooled.mean.slice(0, 0, count), windows,
                                /*normalize=*/true);
      return FinishCost(context, request.budget(), request.options(), job, *result,
                        response->mutable_cost());
    });
    if (embeds_labels) {
      absl::StatusOr<at::Tensor> rows;
      const absl::Status embedded = Guarded([&] {
        // The labels embedded in this batch, then the cached ones.
        const at::Tensor fresh = L2Normalize(result->pooled.mean.slice(0, count));
        std::vector<at::Tensor> label_rows = cached;
        for (size_t i = 0, next = 0; i < label_rows.size(); ++i) {
          if (label_rows[i].defined()) continue;
          label_rows[i] = fresh[static_cast<int64_t>(next)];
          model.labels->Insert(missing[next], label_rows[i]);
          ++next;
        }
        rows = at::stack(label_rows);
        return absl::OkStatus();
      });
      shared->Publish(embedded.ok() ? rows : embedded);
    }
    if (!status.ok()) return complete(status);
    shared->WhenReady([response, complete, labels, temperature,
                       document](const absl::StatusOr<at::Tensor>& rows) {
      if (!rows.ok()) return complete(rows.status());
      complete(Guarded([&] {
        AddScores(ScoreLabels(document, *rows, labels, temperature), response);
        return absl::OkStatus();
      }));
    });
  };
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
  ASSIGN_OR_RETURN(PreparedInput input,
                   Prepare(*model, request.document(), limits_, OverflowPolicy::kReject));

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
  RequestPrice price = PriceEncoding(*model, attention, framed, "sentence");
  auto job = MakeJob(*model, "summarize", std::move(framed), attention);
  RETURN_IF_ERROR(PriceAndAdmit(std::move(price), limits_, job.get()));
  job->done =
      Completes(std::move(complete),
                [&request, response, context, count, diversity, candidates = std::move(candidates),
                 sentences = std::move(sentences)](EncodeJob& job, const EncodeResult& result) {
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
                  return FinishCost(context, request.budget(), request.options(), job, result,
                                    response->mutable_cost());
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
  RETURN_IF_ERROR(CheckGenerationCaps(generation, limits_));
  ASSIGN_OR_RETURN(PreparedInput input, Prepare(model, request.document(), limits_,
                                                ResolveOverflow(request.options(), model)));
  ASSIGN_OR_RETURN(SummarizerInput framed, FrameForSummarizer(model, input.ids, request.options()));
  std::vector<std::vector<int32_t>> sequences = {std::move(framed.framed)};
  ASSIGN_OR_RETURN(const ItemAttentionOptions attention,
                   PlanBudget(model, request.budget(), request.options(), sequences));

  JobContext context{&model, received, input.tokenize_ms, framed.truncated, Lengths(sequences)};
  RequestPrice price = PriceEncoding(model, attention, sequences, "document");
  price.flops += DecoderFlops(
      model, generation,
      model.seq2seq->encoder().global_rows() + static_cast<int64_t>(sequences[0].size()));
  // Requests with different generation settings share batches: the
  // generator takes a config per sequence.
  auto job = MakeJob(model, "summarize_abstractive", std::move(sequences), attention);
  RETURN_IF_ERROR(PriceAndAdmit(std::move(price), limits_, job.get()));
  job->generation = std::make_unique<GenerationJob>();
  job->generation->config = std::move(generation);
  job->generation->request_id = request.options().request_id();
  if (on_token) {
    job->generation->on_token = StreamTextPieces(*model.tokenizer, std::move(on_token));
  }
  job->done = Completes(std::move(complete), [&request, response, context](
                                                 EncodeJob& job, const EncodeResult& result) {
    RETURN_IF_ERROR(FinishCost(context, request.budget(), request.options(), job, result,
                               response->mutable_cost()));
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
    info->set_attention(ToProto(model->planners->native().kind()));
    for (AttentionKind kind : AvailableAttention(*model)) {
      info->add_available_attention(ToProto(kind));
      const AttentionPlanner& planner = *model->planners->Find(kind);
      v1::PlannerInfo* planner_info = info->add_planners();
      planner_info->set_attention(ToProto(kind));
      planner_info->set_samples(planner.samples());
      for (const auto& [name, range] : planner.Knobs()) {
        v1::KnobInfo& knob = (*planner_info->mutable_knobs())[name];
        knob.set_native(range.native);
        knob.set_min(range.min);
        knob.set_max(range.max);
        knob.set_integer(range.integer);
      }
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
  // Folders that did not load: listed, never ready; their requests get
  // UNAVAILABLE saying why.
  for (const auto& [name, status] : registry_.failed()) {
    v1::ModelInfo* info = response->add_models();
    info->set_name(name);
    info->set_ready(false);
  }
}

}  // namespace docsparse
