#include "server/abstractive_summary.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "model/text/streaming_detokenizer.h"
#include "server/request_validation.h"

namespace docsparse {

absl::StatusOr<GenerationConfig> ResolveGeneration(const ServedModel& model,
                                                   const v1::GenerationParams& params) {
  GenerationOverrides overrides;
  if (params.has_num_beams()) overrides.num_beams = params.num_beams();
  if (params.has_max_length()) overrides.max_length = params.max_length();
  if (params.has_min_length()) overrides.min_length = params.min_length();
  if (params.has_length_penalty()) {
    overrides.length_penalty = DecimalFloatToDouble(params.length_penalty());
  }
  if (params.has_early_stopping()) overrides.early_stopping = params.early_stopping();
  if (params.has_no_repeat_ngram_size()) {
    overrides.no_repeat_ngram_size = params.no_repeat_ngram_size();
  }
  if (params.has_max_new_tokens()) overrides.max_new_tokens = params.max_new_tokens();
  const int limit = static_cast<int>(
      std::min<int64_t>(model.seq2seq->max_decoder_length(), kMaxGenerationLength));
  return ApplyGenerationOverrides(model.generation, overrides, limit);
}

absl::StatusOr<SummarizerInput> FrameForSummarizer(const ServedModel& model,
                                                   const std::vector<int32_t>& ids,
                                                   const v1::RequestOptions& options) {
  const size_t limit = static_cast<size_t>(model.max_sequence_length());
  SummarizerInput input;
  input.framed = model.tokenizer->Frame(ids, limit);
  const size_t overhead =
      model.tokenizer->FramePrefix().size() + model.tokenizer->FrameSuffix().size();
  if (ids.size() + overhead <= limit) return input;
  if (options.overflow() == v1::OVERFLOW_CHUNK) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.overflow: CHUNK does not apply to abstractive summaries (model '", model.name,
        "' reads one sequence of at most ", limit, " tokens); use TRUNCATE or REJECT"));
  }
  if (ResolveOverflow(options, model) == OverflowPolicy::kReject) {
    return absl::ResourceExhaustedError(
        absl::StrCat("document: ", ids.size() + overhead, " tokens; model '", model.name,
                     "' reads at most ", limit, " (set options.overflow to TRUNCATE)"));
  }
  input.truncated = true;
  return input;
}

std::function<void(int32_t token)> StreamTextPieces(const Tokenizer& tokenizer, TokenSink sink) {
  // std::function must be copyable; the detokenizer's state is shared by
  // the copies, of which only one is ever called.
  auto detokenizer = std::make_shared<StreamingDetokenizer>(tokenizer);
  return [detokenizer, sink = std::move(sink)](int32_t token) {
    sink(token, detokenizer->Append(token));
  };
}

void FillAbstractiveSummary(const ServedModel& model, const GenerationJob& generated,
                            BatchClock::time_point received, v1::SummarizeResponse* response) {
  response->set_model(model.name);
  response->set_kind(v1::SUMMARY_KIND_ABSTRACTIVE);
  response->mutable_token_ids()->Add(generated.tokens.begin(), generated.tokens.end());
  response->set_summary(model.tokenizer->Decode(generated.tokens));
  v1::CostReport* cost = response->mutable_cost();
  cost->set_generated_tokens(static_cast<int32_t>(generated.tokens.size()));
  cost->set_decoder_flops(generated.decoder_flops);
  cost->set_total_flops(cost->total_flops() + generated.decoder_flops);
  cost->set_dense_equivalent_flops(cost->dense_equivalent_flops() + generated.decoder_flops);
  cost->mutable_timings()->set_time_to_first_token_ms(
      std::chrono::duration<double, std::milli>(generated.first_token - received).count());
}

}  // namespace docsparse
