// What an abstractive Summarize asks of its batch, and what the batch gives
// back, beside the encoder work every EncodeJob carries.
#ifndef DOCSPARSE_SERVER_GENERATION_JOB_H_
#define DOCSPARSE_SERVER_GENERATION_JOB_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/checkpoint/generation_config.h"
#include "server/batch_former.h"

namespace docsparse {

struct GenerationJob {
  // The model's generation_config.json with the request's overrides applied
  // and checked (ApplyGenerationOverrides).
  GenerationConfig config;
  // Streaming greedy search: called on the thread running the batch with each token
  // chosen for this request, in order, as it is chosen. Beam search knows
  // its tokens only at the end and does not call it.
  std::function<void(int32_t token)> on_token;
  // For the log line when decoding stops early (may be empty).
  std::string request_id;

  // Filled by the batch before `done`:
  // The generated ids, decoder start token excluded (HF's sequences[0][1:]),
  // eos included when the text ended with it.
  std::vector<int32_t> tokens;
  // This request's share of the decoder's FLOPs: each step's FLOPs divided
  // among the rows decoding in it, its rows' shares summed.
  double decoder_flops = 0;
  // When the first decoder step for this request returned (its first token
  // was chosen); the batch's start when generation failed before.
  BatchClock::time_point first_token;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_GENERATION_JOB_H_
