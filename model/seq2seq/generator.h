// Text generation over a DecoderStepper with Hugging Face semantics: greedy
// search (num_beams 1) and beam search, token for token what transformers
// 4.36 `model.generate()` returns for the same logits (see
// model/seq2seq/logits_processors.h and model/seq2seq/beam_search.h for the details kept).
//
// A batch of sequences decodes together, one decoder row per greedy
// sequence and num_beams rows per beam-search sequence. Each sequence has
// its own GenerationConfig (requests in a batch may differ); with equal
// configs the result is that of one batched generate() call. A sequence
// leaves the batch as soon as it is finished (eos, beam search done, max
// length) or cancelled: its rows are dropped with Reorder, so decoding cost
// falls as sequences finish.
//
// Thread-compatible: one Generate call per stepper at a time.
#ifndef DOCSPARSE_MODEL_SEQ2SEQ_GENERATOR_H_
#define DOCSPARSE_MODEL_SEQ2SEQ_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "model/checkpoint/generation_config.h"
#include "model/seq2seq/decoder_stepper.h"

namespace docsparse {

enum class FinishReason {
  kEos,        // greedy: chose an eos id; beam search: the best text ended with eos
  kMaxLength,  // reached the config's max_total_length()
  kCancelled,  // GenerationCallbacks::is_cancelled said so
};

struct GeneratedHypothesis {
  // Generated token ids: the decoder start token excluded, the eos token
  // included when the text ended with one (beam search: eos_token_ids[0], as
  // HF writes it).
  std::vector<int64_t> token_ids;
  // Beam search: HF's sequences_scores (sum of log-probabilities over
  // generated_len ** length_penalty). Greedy search scores nothing.
  std::optional<double> beam_score;
};

struct GeneratedSequence {
  // Best first: num_return_sequences of them under beam search, one under
  // greedy. A cancelled greedy sequence keeps the tokens chosen so far; a
  // cancelled beam search returns none.
  std::vector<GeneratedHypothesis> hypotheses;
  FinishReason finish_reason = FinishReason::kMaxLength;
};

struct GenerationResult {
  std::vector<GeneratedSequence> sequences;  // in the stepper's initial row order
  int64_t decoder_steps = 0;                 // Step calls
  int64_t decoder_row_steps = 0;             // rows summed over Step calls (decoder work)
};

struct GenerationCallbacks {
  // Greedy sequences only (beam search knows its text only at the end, and
  // HF refuses streamers with beams too): called with (sequence, token id) as
  // each token is chosen, eos included, before the next decoder step.
  std::function<void(int sequence, int64_t token_id)> on_token;
  // Polled before every decoder step for each sequence still decoding; true
  // stops that sequence (FinishReason::kCancelled) and drops its rows.
  std::function<bool(int sequence)> is_cancelled;
};

// Decodes `configs.size()` sequences. `stepper` holds one row per sequence,
// in order, nothing fed yet (its first Step feeds the start tokens); its rows
// are reordered and expanded to beams as decoding goes. Configs should come
// from ApplyGenerationOverrides; their token ids must be below the logits'
// vocabulary size (INVALID_ARGUMENT otherwise). Errors from the stepper are
// returned as they are.
absl::StatusOr<GenerationResult> Generate(DecoderStepper& stepper,
                                          const std::vector<GenerationConfig>& configs,
                                          const GenerationCallbacks& callbacks);

// What transformers' generate() returns for the same batch: per sequence and
// hypothesis, [decoder_start_token_id] + token_ids, right-padded with
// pad_token_id to the longest row. For comparing with HF fixtures.
std::vector<std::vector<int64_t>> HfGenerateSequences(const GenerationResult& result,
                                                      const std::vector<GenerationConfig>& configs);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_SEQ2SEQ_GENERATOR_H_
