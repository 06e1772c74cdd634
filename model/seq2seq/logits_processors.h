// Hugging Face's logits processors that BART/Pegasus generation uses,
// computed exactly as transformers 4.36 (generation/logits_process.py)
// computes them, one decoder row at a time.
//
// `row_tokens` is the row's decoder input so far: the decoder start token
// and every token chosen since; its size is HF's `cur_len`
// (input_ids.shape[-1]). `scores` is the row's next-token scores, [vocab]:
// raw logits under greedy search, log-probabilities under beam search (HF
// applies the processors after log_softmax there). Banned tokens become
// -inf; forced tokens become 0 with everything else -inf. Token ids must be
// below scores.size().
#ifndef DOCSPARSE_MODEL_SEQ2SEQ_LOGITS_PROCESSORS_H_
#define DOCSPARSE_MODEL_SEQ2SEQ_LOGITS_PROCESSORS_H_

#include <cstdint>

#include "absl/types/span.h"
#include "model/checkpoint/generation_config.h"

namespace docsparse {

// NoRepeatNGramLogitsProcessor: bans every token that would complete an
// n-gram already present in the row (the start token counts), i.e. the
// tokens that followed earlier occurrences of the row's last n-1 tokens.
void ApplyNoRepeatNGram(int ngram_size, absl::Span<const int64_t> row_tokens,
                        absl::Span<float> scores);

// MinLengthLogitsProcessor: bans the eos ids while cur_len < min_length.
void ApplyMinLength(int min_length, absl::Span<const int64_t> eos_token_ids, int64_t cur_len,
                    absl::Span<float> scores);

// ForcedBOSTokenLogitsProcessor: the first generated token (cur_len 1) is
// `bos_token_id`.
void ApplyForcedBos(int64_t bos_token_id, int64_t cur_len, absl::Span<float> scores);

// ForcedEOSTokenLogitsProcessor: the token chosen at cur_len max_length - 1
// (the last one max_length allows) is one of `eos_token_ids`.
void ApplyForcedEos(int max_length, absl::Span<const int64_t> eos_token_ids, int64_t cur_len,
                    absl::Span<float> scores);

// The processors `config` enables, in the order of transformers'
// GenerationMixin._get_logits_processor: no-repeat n-gram, min length,
// forced BOS, forced EOS (the last with max_total_length(), as generate()
// rewrites max_length from max_new_tokens before building it).
void ApplyLogitsProcessors(const GenerationConfig& config, absl::Span<const int64_t> row_tokens,
                           absl::Span<float> scores);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_SEQ2SEQ_LOGITS_PROCESSORS_H_
