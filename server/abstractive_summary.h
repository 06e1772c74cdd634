// The abstractive side of Summarize, free of gRPC: a request's generation
// parameters over the model's generation_config.json, its document framed
// for the summarizer's encoder, streamed text pieces, and the response
// built from what the batch generated.
//
// Overflow: a summarizer reads one sequence of at most its encoder's
// positions, as Hugging Face's tokenizer(truncation=True) gives it; windows
// cannot be summarized separately and joined. TRUNCATE keeps the first
// positions (cost.truncated says so); REJECT is RESOURCE_EXHAUSTED naming
// the limit; CHUNK asked by the request is INVALID_ARGUMENT naming
// options.overflow; a docsparse.json default of "chunk" (the default when it
// says nothing) truncates.
#ifndef DOCSPARSE_SERVER_ABSTRACTIVE_SUMMARY_H_
#define DOCSPARSE_SERVER_ABSTRACTIVE_SUMMARY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "docsparse/v1/docsparse.pb.h"
#include "model/checkpoint/generation_config.h"
#include "model/text/tokenizer.h"
#include "server/batch_former.h"
#include "server/generation_job.h"
#include "server/model_registry.h"

namespace docsparse {

// Streaming: called on the thread running the batch with each token chosen (greedy
// search) and the text that became final with it (often empty; see
// model/text/streaming_detokenizer.h). The pieces are a prefix of the summary.
using TokenSink = std::function<void(int32_t token, const std::string& text)>;

// The model's generation defaults with the request's GenerationParams;
// INVALID_ARGUMENT names the field ("generation.num_beams: ...").
absl::StatusOr<GenerationConfig> ResolveGeneration(const ServedModel& model,
                                                   const v1::GenerationParams& params);

struct SummarizerInput {
  std::vector<int32_t> framed;  // with the tokenizer's special tokens
  bool truncated = false;
};

// Frames unframed document ids for the summarizer's encoder under the
// overflow policy (header comment).
absl::StatusOr<SummarizerInput> FrameForSummarizer(const ServedModel& model,
                                                   const std::vector<int32_t>& ids,
                                                   const v1::RequestOptions& options);

// An on_token for GenerationJob that turns ids into stable text pieces for
// `sink`. Borrows the tokenizer.
std::function<void(int32_t token)> StreamTextPieces(const Tokenizer& tokenizer, TokenSink sink);

// Fills the abstractive fields of `response` from what was generated: kind,
// token ids, the summary (Tokenizer::Decode: HF skip_special_tokens and
// clean_up_tokenization_spaces), and in its cost report (whose encoder part
// is filled already) generated_tokens, decoder_flops, total and
// dense-equivalent FLOPs with the decoder's (it is dense) and
// time_to_first_token_ms from `received`.
void FillAbstractiveSummary(const ServedModel& model, const GenerationJob& generated,
                            BatchClock::time_point received, v1::SummarizeResponse* response);

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_ABSTRACTIVE_SUMMARY_H_
