#include "server/summarizer_batch_runner.h"

#include <c10/core/InferenceMode.h>

#include <iostream>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "model/attention/compute_device.h"
#include "model/seq2seq/generator.h"
#include "server/metered_decoder_stepper.h"

namespace docsparse {
namespace {

// Encodes the batch and generates every job's summary; on OK each job's
// generation holds its tokens, FLOP share and first-token time, and
// `stopped[i]` says whether (and why) job i was stopped early.
absl::Status EncodeAndGenerate(const Seq2SeqModel& model, const SummarizerHooks& hooks,
                               std::vector<std::unique_ptr<EncodeJob>>& batch,
                               BatchClock::time_point started,
                               std::vector<std::optional<GenerationStop>>* stopped) {
  const int count = static_cast<int>(batch.size());
  EncoderBatch encoder_batch;
  std::vector<CostAccount*> costs;
  std::vector<GenerationConfig> configs;
  for (const auto& job : batch) {
    encoder_batch.sequences.push_back(job->sequences.front());
    encoder_batch.attention_options.push_back(job->attention);
    costs.push_back(&job->cost);
    configs.push_back(job->generation->config);
  }
  // Polled before every encoder layer and every decoder step: the places a
  // request's work can stop early. The deadline is checked first: a client
  // whose deadline passed is also cancelled by gRPC, and the deadline is the
  // better reason to give.
  const auto abandoned = [&batch, stopped](size_t sequence) {
    std::optional<GenerationStop>& stop = (*stopped)[sequence];
    if (stop.has_value()) return true;
    const std::optional<DropReason> reason = batch[sequence]->Abandoned(BatchClock::now());
    if (reason.has_value()) {
      stop = *reason == DropReason::kDeadline ? GenerationStop::kDeadline
                                              : GenerationStop::kClientCancelled;
    }
    return stop.has_value();
  };
  encoder_batch.abandoned = abandoned;
  c10::InferenceMode inference_mode;
  absl::StatusOr<Seq2SeqEncoding> encoding = model.Encode(encoder_batch, costs);
  // Every request left while encoding: each is answered with its reason.
  if (absl::IsCancelled(encoding.status())) return absl::OkStatus();
  if (!encoding.ok()) return encoding.status();
  absl::StatusOr<std::unique_ptr<DecoderStepper>> stepper = model.StartDecoding(*encoding, 1);
  if (!stepper.ok()) return stepper.status();
  std::vector<int> owners(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) owners[static_cast<size_t>(i)] = i;
  // Cross-attention keys and values are projected per encoder row.
  std::vector<double> encoder_rows;
  for (const int64_t rows : encoding->valid_rows) encoder_rows.push_back(static_cast<double>(rows));
  MeteredDecoderStepper metered(**stepper, std::move(owners), count, hooks.on_decode_step,
                                encoder_rows);

  GenerationCallbacks callbacks;
  callbacks.on_token = [&batch](int sequence, int64_t token) {
    const auto& on_token = batch[static_cast<size_t>(sequence)]->generation->on_token;
    if (on_token) on_token(static_cast<int32_t>(token));
  };
  callbacks.is_cancelled = [&abandoned](int sequence) {
    return abandoned(static_cast<size_t>(sequence));
  };
  absl::StatusOr<GenerationResult> result = Generate(metered, configs, callbacks);
  if (!result.ok()) return result.status();
  for (int i = 0; i < count; ++i) {
    GenerationJob& generation = *batch[static_cast<size_t>(i)]->generation;
    const GeneratedSequence& sequence = result->sequences[static_cast<size_t>(i)];
    generation.tokens.clear();
    if (!sequence.hypotheses.empty()) {
      for (const int64_t token : sequence.hypotheses.front().token_ids) {
        generation.tokens.push_back(static_cast<int32_t>(token));
      }
    }
    generation.decoder_flops = metered.request_flops(i);
    generation.first_token = metered.first_step(i).value_or(started);
  }
  return absl::OkStatus();
}

}  // namespace

void SummarizerBatchRunner::Run(std::vector<std::unique_ptr<EncodeJob>> batch) {
  EncodeResult shared;
  shared.batch_size = static_cast<int>(batch.size());
  shared.started = BatchClock::now();
  // Malformed jobs are answered now; the rest run.
  std::vector<std::unique_ptr<EncodeJob>> runnable;
  for (auto& job : batch) {
    if (job->generation == nullptr || job->sequences.size() != 1) {
      job->done(*job, absl::InternalError("summarizer job without generation or with " +
                                          std::to_string(job->sequences.size()) + " sequences"));
      continue;
    }
    runnable.push_back(std::move(job));
  }
  if (runnable.empty()) return;
  std::vector<std::optional<GenerationStop>> stopped(runnable.size());
  absl::Status status;
  DeviceStopwatch device_time(model_.device());
  try {
    status = EncodeAndGenerate(model_, hooks_, runnable, shared.started, &stopped);
  } catch (const c10::Error& error) {
    status =
        absl::InternalError(absl::StrCat("summarization failed: ", error.what_without_backtrace()));
  }
  shared.device_seconds = device_time.Stop();
  shared.finished = BatchClock::now();
  if (shared.device_seconds.has_value() && hooks_.on_device_seconds) {
    hooks_.on_device_seconds(*shared.device_seconds);
  }
  for (size_t i = 0; i < runnable.size(); ++i) {
    EncodeJob& job = *runnable[i];
    if (!status.ok()) {
      job.done(job, status);
      continue;
    }
    if (stopped[i].has_value()) {
      const bool deadline = *stopped[i] == GenerationStop::kDeadline;
      if (hooks_.on_generation_stopped) hooks_.on_generation_stopped(*stopped[i]);
      std::cerr << "docsparse-server: model '" << job.pending.key.model << "': decoding of request "
                << (job.generation->request_id.empty() ? "(no id)" : job.generation->request_id)
                << " stopped after " << job.generation->tokens.size()
                << " token(s): " << (deadline ? "deadline passed" : "client cancelled")
                << std::endl;
      job.done(job, deadline ? absl::DeadlineExceededError("deadline passed while generating")
                             : absl::CancelledError("client cancelled while generating"));
      continue;
    }
    job.done(job, shared);
  }
}

}  // namespace docsparse
