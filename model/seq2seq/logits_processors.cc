#include "model/seq2seq/logits_processors.h"

#include <algorithm>
#include <cstddef>
#include <limits>

namespace docsparse {
namespace {

constexpr float kNegativeInfinity = -std::numeric_limits<float>::infinity();

// Everything -inf except `allowed`, which become 0: HF's forced-token
// processors overwrite the scores rather than mask them.
void Force(absl::Span<const int64_t> allowed, absl::Span<float> scores) {
  std::fill(scores.begin(), scores.end(), kNegativeInfinity);
  for (const int64_t id : allowed) scores[static_cast<size_t>(id)] = 0.0f;
}

}  // namespace

void ApplyNoRepeatNGram(int ngram_size, absl::Span<const int64_t> row_tokens,
                        absl::Span<float> scores) {
  const int64_t cur_len = static_cast<int64_t>(row_tokens.size());
  // _calc_banned_ngram_tokens: nothing is banned before a full n-gram fits.
  if (ngram_size <= 0 || cur_len + 1 < ngram_size) return;
  const size_t n = static_cast<size_t>(ngram_size);
  const size_t prefix_start = row_tokens.size() + 1 - n;  // the last n-1 tokens
  // Every earlier n-gram whose first n-1 tokens equal the row's last n-1
  // bans its last token (HF builds a dict of all n-grams; the scan is the same
  // lookup without the dict).
  for (size_t start = 0; start + n <= row_tokens.size(); ++start) {
    if (std::equal(row_tokens.begin() + start, row_tokens.begin() + start + n - 1,
                   row_tokens.begin() + prefix_start)) {
      scores[static_cast<size_t>(row_tokens[start + n - 1])] = kNegativeInfinity;
    }
  }
}

void ApplyMinLength(int min_length, absl::Span<const int64_t> eos_token_ids, int64_t cur_len,
                    absl::Span<float> scores) {
  if (cur_len >= min_length) return;
  for (const int64_t id : eos_token_ids) scores[static_cast<size_t>(id)] = kNegativeInfinity;
}

void ApplyForcedBos(int64_t bos_token_id, int64_t cur_len, absl::Span<float> scores) {
  if (cur_len != 1) return;
  const int64_t allowed[] = {bos_token_id};
  Force(allowed, scores);
}

void ApplyForcedEos(int max_length, absl::Span<const int64_t> eos_token_ids, int64_t cur_len,
                    absl::Span<float> scores) {
  if (cur_len != max_length - 1) return;
  Force(eos_token_ids, scores);
}

void ApplyLogitsProcessors(const GenerationConfig& config, absl::Span<const int64_t> row_tokens,
                           absl::Span<float> scores) {
  const int64_t cur_len = static_cast<int64_t>(row_tokens.size());
  if (config.no_repeat_ngram_size > 0) {
    ApplyNoRepeatNGram(config.no_repeat_ngram_size, row_tokens, scores);
  }
  // HF adds MinLength only with eos ids and min_length > 0.
  if (config.min_length > 0 && !config.eos_token_ids.empty()) {
    ApplyMinLength(config.min_length, config.eos_token_ids, cur_len, scores);
  }
  if (config.forced_bos_token_id) ApplyForcedBos(*config.forced_bos_token_id, cur_len, scores);
  if (!config.forced_eos_token_ids.empty()) {
    ApplyForcedEos(config.max_total_length(), config.forced_eos_token_ids, cur_len, scores);
  }
}

}  // namespace docsparse
