#include "model/seq2seq/beam_search.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/strings/str_format.h"

namespace docsparse {
namespace {

// BeamSearchScorer's decoder_prompt_len for an encoder-decoder: the decoder
// prompt is the start token alone.
constexpr int kDecoderPromptLength = 1;

// beam_search(): beams other than the first start at -1e9 so that the first
// step's candidates come from one beam, not num_beams copies of it.
constexpr float kInactiveBeamScore = -1e9f;

}  // namespace

BeamHypotheses::BeamHypotheses(int num_beams, double length_penalty, EarlyStopping early_stopping,
                               int max_length)
    : num_beams_(num_beams),
      length_penalty_(length_penalty),
      early_stopping_(early_stopping),
      max_length_(max_length) {}

double BeamHypotheses::Score(double sum_logprobs, int generated_len) const {
  return sum_logprobs / std::pow(static_cast<double>(generated_len), length_penalty_);
}

void BeamHypotheses::Add(std::vector<int64_t> tokens, double sum_logprobs, bool ended_with_eos) {
  // Generated tokens: eos counts, the start token does not.
  const int generated_len =
      static_cast<int>(tokens.size()) - kDecoderPromptLength + (ended_with_eos ? 1 : 0);
  const double score = Score(sum_logprobs, generated_len);
  if (size() >= num_beams_ && !(score > worst_score_)) return;
  hypotheses_.push_back(BeamHypothesis{score, std::move(tokens), ended_with_eos});
  if (size() <= num_beams_) {
    worst_score_ = std::min(score, worst_score_);
    return;
  }
  // HF sorts (score, index) pairs, drops the first and takes the second's
  // score as the new worst: equal scores go by list position.
  std::vector<std::pair<double, size_t>> ranked;
  ranked.reserve(hypotheses_.size());
  for (size_t i = 0; i < hypotheses_.size(); ++i) ranked.emplace_back(hypotheses_[i].score, i);
  std::sort(ranked.begin(), ranked.end());
  hypotheses_.erase(hypotheses_.begin() + static_cast<std::ptrdiff_t>(ranked[0].second));
  worst_score_ = ranked[1].first;
}

bool BeamHypotheses::IsDone(double best_sum_logprobs, int cur_len) const {
  if (size() < num_beams_) return false;
  switch (early_stopping_) {
    case EarlyStopping::kWhenBeamsFinished:
      return true;
    case EarlyStopping::kHeuristic:
      // Not exact when length_penalty > 0 (a longer beam divides by more),
      // which is why HF added "never".
      return worst_score_ >= Score(best_sum_logprobs, cur_len - kDecoderPromptLength);
    case EarlyStopping::kNever: {
      // With length_penalty > 0 the best a beam can reach is at max_length.
      const int length = length_penalty_ > 0.0 ? max_length_ : cur_len;
      return worst_score_ >= Score(best_sum_logprobs, length - kDecoderPromptLength);
    }
  }
  return false;
}

std::vector<BeamHypothesis> BeamHypotheses::Best(int count) const {
  // finalize(): sorted(key=score) is stable and pop() takes from the end, so
  // among equal scores the one added last wins.
  std::vector<BeamHypothesis> sorted = hypotheses_;
  std::stable_sort(
      sorted.begin(), sorted.end(),
      [](const BeamHypothesis& a, const BeamHypothesis& b) { return a.score < b.score; });
  std::vector<BeamHypothesis> best;
  for (int i = 0; i < count && !sorted.empty(); ++i) {
    best.push_back(std::move(sorted.back()));
    sorted.pop_back();
  }
  return best;
}

std::vector<Candidate> TopCandidates(const float* scores, int64_t vocab,
                                     const std::vector<int64_t>& beam_rows,
                                     const std::vector<float>& beam_scores, int64_t count) {
  // One pass, keeping the best `count` in order: past the first few hundred
  // tokens a score rarely beats the worst kept, so this costs a compare per
  // score, tested 16 at a time (at::topk over 4 x 50k scores took 7% of a
  // beam-4 step).
  constexpr int64_t kBlock = 16;
  std::vector<Candidate> top;
  top.reserve(static_cast<size_t>(count) + 1);
  for (size_t beam = 0; beam < beam_rows.size(); ++beam) {
    const float* row = scores + beam_rows[beam] * vocab;
    const float running = beam_scores[beam];
    const int64_t base = static_cast<int64_t>(beam) * vocab;
    for (int64_t first = 0; first < vocab; first += kBlock) {
      const int64_t end = std::min(vocab, first + kBlock);
      if (static_cast<int64_t>(top.size()) == count && end - first == kBlock) {
        // A whole block below the worst kept (the common case) in one
        // vectorised test.
        const float worst = top.back().score;
        bool any = false;
        for (int64_t i = 0; i < kBlock; ++i) any |= row[first + i] + running > worst;
        if (!any) continue;
      }
      for (int64_t token = first; token < end; ++token) {
        const float score = row[token] + running;
        if (static_cast<int64_t>(top.size()) == count) {
          if (!(score > top.back().score)) continue;
        } else if (std::isnan(score)) {
          continue;
        }
        // After every kept score at least as high: ties keep the lower
        // index first.
        auto at =
            std::upper_bound(top.begin(), top.end(), score,
                             [](float value, const Candidate& kept) { return value > kept.score; });
        top.insert(at, Candidate{score, base + token});
        if (static_cast<int64_t>(top.size()) > count) top.pop_back();
      }
    }
  }
  return top;
}

BeamSearch::BeamSearch(const GenerationConfig& config)
    : config_(config),
      hypotheses_(config.num_beams, config.length_penalty, config.early_stopping,
                  config.max_total_length()),
      input_row_tokens_{{config.decoder_start_token_id}},
      beam_rows_(static_cast<size_t>(config.num_beams), 0),
      beam_scores_(static_cast<size_t>(config.num_beams), kInactiveBeamScore) {
  beam_scores_[0] = 0.0f;
}

absl::StatusOr<std::vector<int64_t>> BeamSearch::Advance(const at::Tensor& processed_log_probs) {
  if (processed_log_probs.dim() != 2 || processed_log_probs.size(0) != input_rows() ||
      processed_log_probs.scalar_type() != at::kFloat || !processed_log_probs.device().is_cpu()) {
    return absl::InternalError(
        absl::StrFormat("beam search: expected [%d, vocab] float32 CPU scores", input_rows()));
  }
  const int num_beams = config_.num_beams;
  const int64_t vocab = processed_log_probs.size(1);
  const int num_eos = static_cast<int>(config_.eos_token_ids.size());
  const int64_t num_candidates = static_cast<int64_t>(std::max(2, 1 + num_eos)) * num_beams;
  if (num_candidates > num_beams * vocab) {
    return absl::InvalidArgumentError(
        absl::StrFormat("beam search: %d beams need %d candidates, the vocabulary has %d tokens",
                        num_beams, num_candidates, vocab));
  }

  // next_token_scores = processed + beam_scores[:, None], in float32, then
  // the top candidates over (beams x vocab) as HF lays it out.
  const at::Tensor processed = processed_log_probs.contiguous();
  const std::vector<Candidate> top =
      TopCandidates(processed.data_ptr<float>(), vocab, beam_rows_, beam_scores_, num_candidates);

  const int next_len = cur_len_ + 1;
  std::vector<std::vector<int64_t>> next_row_tokens;
  std::vector<float> next_scores;
  std::vector<int64_t> sources;
  for (int64_t rank = 0; rank < num_candidates; ++rank) {
    const int64_t parent_row = beam_rows_[static_cast<size_t>(top[rank].index / vocab)];
    const int64_t token = top[rank].index % vocab;
    const bool is_eos = std::find(config_.eos_token_ids.begin(), config_.eos_token_ids.end(),
                                  token) != config_.eos_token_ids.end();
    if (is_eos) {
      // Only an eos among the top num_beams candidates ends a hypothesis.
      if (rank >= num_beams) continue;
      hypotheses_.Add(input_row_tokens_[static_cast<size_t>(parent_row)],
                      static_cast<double>(top[rank].score), /*ended_with_eos=*/true);
    } else {
      std::vector<int64_t> tokens = input_row_tokens_[static_cast<size_t>(parent_row)];
      tokens.push_back(token);
      next_row_tokens.push_back(std::move(tokens));
      next_scores.push_back(top[rank].score);
      sources.push_back(parent_row);
    }
    if (static_cast<int>(sources.size()) == num_beams) break;
  }
  if (static_cast<int>(sources.size()) < num_beams) {
    return absl::InternalError(
        absl::StrFormat("beam search: fewer than %d non-eos candidates among the top %d", num_beams,
                        num_candidates));
  }
  // HF passes next_scores.max(): the best candidate, eos or not.
  done_ = done_ || hypotheses_.IsDone(static_cast<double>(top[0].score), next_len);

  input_row_tokens_ = std::move(next_row_tokens);
  beam_scores_ = std::move(next_scores);
  std::iota(beam_rows_.begin(), beam_rows_.end(), 0);
  cur_len_ = next_len;
  return sources;
}

std::vector<BeamHypothesis> BeamSearch::Finalize() {
  if (!done_) {
    for (size_t beam = 0; beam < beam_rows_.size(); ++beam) {
      hypotheses_.Add(input_row_tokens_[static_cast<size_t>(beam_rows_[beam])],
                      static_cast<double>(beam_scores_[beam]), /*ended_with_eos=*/false);
    }
    done_ = true;
  }
  return hypotheses_.Best(config_.num_return_sequences);
}

}  // namespace docsparse
