// Beam search for one sequence, as transformers 4.36 does it
// (GenerationMixin.beam_search with BeamSearchScorer and BeamHypotheses,
// generation/beam_search.py), so that token ids match model.generate().
//
// Transformers runs a whole batch through one scorer; every batch item's
// decisions depend only on its own rows, so one BeamSearch per sequence
// computes the same thing and lets a finished sequence leave the batch.
//
// HF details kept on purpose:
//   - scores are float32 (log-probabilities plus the beam's float32 running
//     score); hypothesis scores are Python floats (double):
//     sum_logprobs / generated_len ** length_penalty, where generated_len
//     counts the generated tokens, eos included, start token excluded;
//   - the first step starts from one real beam: the others score -1e9;
//   - candidates are the top max(2, 1 + #eos ids) * num_beams of
//     (beams x vocab) by torch.topk; an eos candidate becomes a hypothesis
//     only when its rank is below num_beams, and never continues as a beam;
//   - when a hypothesis list is full, a new one replaces the worst only if
//     strictly better; ties are broken as Python's sort would;
//   - a hypothesis that ended with eos is returned with eos_token_ids[0]
//     appended (HF's finalize writes the first eos id, whichever was chosen).
#ifndef DOCSPARSE_MODEL_SEQ2SEQ_BEAM_SEARCH_H_
#define DOCSPARSE_MODEL_SEQ2SEQ_BEAM_SEARCH_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/checkpoint/generation_config.h"

namespace docsparse {

// One finished text and its length-penalised score.
struct BeamHypothesis {
  double score = 0.0;
  std::vector<int64_t> tokens;  // decoder start token first; no eos
  bool ended_with_eos = false;
};

// HF BeamHypotheses: the best `num_beams` finished texts of one sequence.
class BeamHypotheses {
 public:
  BeamHypotheses(int num_beams, double length_penalty, EarlyStopping early_stopping,
                 int max_length);

  // Offers a finished text whose log-probabilities sum to `sum_logprobs`;
  // `tokens` starts with the decoder start token and excludes eos.
  void Add(std::vector<int64_t> tokens, double sum_logprobs, bool ended_with_eos);

  // Whether no running beam can still make the list (HF is_done):
  // `best_sum_logprobs` is the best candidate score of this step and
  // `cur_len` the decoder length after it (start token included).
  bool IsDone(double best_sum_logprobs, int cur_len) const;

  // The best `count` hypotheses, best first (count <= size()).
  std::vector<BeamHypothesis> Best(int count) const;

  int size() const { return static_cast<int>(hypotheses_.size()); }
  double worst_score() const { return worst_score_; }

 private:
  double Score(double sum_logprobs, int generated_len) const;

  int num_beams_;
  double length_penalty_;
  EarlyStopping early_stopping_;
  int max_length_;
  // In insertion order, as HF's list (its order decides ties).
  std::vector<BeamHypothesis> hypotheses_;
  double worst_score_ = 1e9;
};

// A candidate continuation: its score and its index in (beams x vocab).
struct Candidate {
  float score;
  int64_t index;
};

// The `count` best of scores[beam_rows[b]][t] + beam_scores[b] over beams b
// and tokens t of `scores` ([rows, vocab] row-major), best first, ties in
// index order (torch.topk's order on such ties on the CPU); fewer when there
// are fewer scores. NaN scores are never taken.
std::vector<Candidate> TopCandidates(const float* scores, int64_t vocab,
                                     const std::vector<int64_t>& beam_rows,
                                     const std::vector<float>& beam_scores, int64_t count);

// The beams of one sequence and its finished hypotheses.
class BeamSearch {
 public:
  // `config.num_beams` beams, all at the decoder start token.
  explicit BeamSearch(const GenerationConfig& config);

  // Decoder rows whose scores the next Advance reads: 1 before the first
  // step (all beams are the start token), num_beams after.
  int input_rows() const { return static_cast<int>(input_row_tokens_.size()); }
  // Tokens of input row `row` (start token first): what the processors see.
  const std::vector<int64_t>& input_row_tokens(int row) const { return input_row_tokens_[row]; }

  // One step. `processed_log_probs`: [input_rows(), vocab] float32 CPU,
  // log_softmax of the logits with the processors applied (HF's
  // next_token_scores_processed). Returns, for each new beam (num_beams of
  // them, in HF's order), the input row it continues; those rows' tokens
  // grow by the chosen token.
  absl::StatusOr<std::vector<int64_t>> Advance(const at::Tensor& processed_log_probs);

  // The decoder length (start token included) after the last Advance.
  int cur_len() const { return cur_len_; }
  // Beam search may stop for this sequence (HF's per-item _done).
  bool done() const { return done_; }

  // HF finalize: when not done (stopped by max_length), the running beams
  // join the hypotheses; returns the best num_return_sequences, best first.
  std::vector<BeamHypothesis> Finalize();

  // The token this beam chose last (what the decoder is fed next).
  int64_t last_token(int beam) const { return input_row_tokens_[beam].back(); }

 private:
  GenerationConfig config_;
  BeamHypotheses hypotheses_;
  std::vector<std::vector<int64_t>> input_row_tokens_;
  // Per beam: which input row it reads, and its running float32 score.
  std::vector<int64_t> beam_rows_;
  std::vector<float> beam_scores_;
  int cur_len_ = 1;
  bool done_ = false;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_SEQ2SEQ_BEAM_SEARCH_H_
