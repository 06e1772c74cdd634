#include "model/seq2seq/generator.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "model/seq2seq/beam_search.h"
#include "model/seq2seq/logits_processors.h"

namespace docsparse {
namespace {

bool IsEos(const GenerationConfig& config, int64_t token) {
  return std::find(config.eos_token_ids.begin(), config.eos_token_ids.end(), token) !=
         config.eos_token_ids.end();
}

absl::Status CheckConfig(const GenerationConfig& config, int sequence) {
  const auto bad = [sequence](std::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrFormat("generation (sequence %d): %s", sequence, what));
  };
  if (config.num_beams < 1) return bad("num_beams must be at least 1");
  if (config.num_return_sequences < 1 || config.num_return_sequences > config.num_beams) {
    return bad("num_return_sequences must be in [1, num_beams]");
  }
  if (config.max_total_length() < 2) return bad("max_length must be at least 2");
  return absl::OkStatus();
}

// Token ids index the logits row directly, so they must fit the vocabulary.
absl::Status CheckTokenIds(const GenerationConfig& config, int sequence, int64_t vocab) {
  std::vector<int64_t> ids = {config.decoder_start_token_id};
  ids.insert(ids.end(), config.eos_token_ids.begin(), config.eos_token_ids.end());
  ids.insert(ids.end(), config.forced_eos_token_ids.begin(), config.forced_eos_token_ids.end());
  if (config.forced_bos_token_id) ids.push_back(*config.forced_bos_token_id);
  for (const int64_t id : ids) {
    if (id < 0 || id >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrFormat("generation (sequence %d): token id %d is outside the vocabulary [0, %d)",
                          sequence, id, vocab));
    }
  }
  return absl::OkStatus();
}

// torch.argmax: the first maximal entry.
int64_t ArgMax(const float* scores, int64_t vocab) {
  int64_t best = 0;
  for (int64_t i = 1; i < vocab; ++i) {
    if (scores[i] > scores[best]) best = i;
  }
  return best;
}

// One sequence still decoding and the decoder rows it owns.
struct DecodingSequence {
  int index = 0;
  const GenerationConfig* config = nullptr;
  int64_t first_row = 0;
  std::vector<int64_t> greedy_tokens;  // greedy: start token + chosen tokens
  std::unique_ptr<BeamSearch> beams;   // beam search

  int64_t rows() const { return beams ? beams->input_rows() : 1; }
  const std::vector<int64_t>& row_tokens(int row) const {
    return beams ? beams->input_row_tokens(row) : greedy_tokens;
  }
};

GeneratedSequence CancelledSequence(const DecodingSequence& sequence) {
  GeneratedSequence output;
  output.finish_reason = FinishReason::kCancelled;
  if (!sequence.beams) {
    output.hypotheses.push_back(GeneratedHypothesis{
        std::vector<int64_t>(sequence.greedy_tokens.begin() + 1, sequence.greedy_tokens.end()),
        std::nullopt});
  }
  return output;
}

GeneratedSequence FinishedBeamSequence(BeamSearch& beams, const GenerationConfig& config) {
  GeneratedSequence output;
  const std::vector<BeamHypothesis> best = beams.Finalize();
  for (const BeamHypothesis& hypothesis : best) {
    std::vector<int64_t> tokens(hypothesis.tokens.begin() + 1, hypothesis.tokens.end());
    if (hypothesis.ended_with_eos) tokens.push_back(config.eos_token_ids.front());
    output.hypotheses.push_back(GeneratedHypothesis{std::move(tokens), hypothesis.score});
  }
  output.finish_reason =
      !best.empty() && best.front().ended_with_eos ? FinishReason::kEos : FinishReason::kMaxLength;
  return output;
}

// Keeps `source` rows (in order) unless that is every row as it stands.
absl::Status KeepRows(DecoderStepper& stepper, const std::vector<int64_t>& source) {
  bool identity = static_cast<int64_t>(source.size()) == stepper.rows();
  for (size_t i = 0; identity && i < source.size(); ++i)
    identity = source[i] == static_cast<int64_t>(i);
  if (identity || source.empty()) return absl::OkStatus();
  return stepper.Reorder(at::tensor(source, at::kLong));
}

}  // namespace

absl::StatusOr<GenerationResult> Generate(DecoderStepper& stepper,
                                          const std::vector<GenerationConfig>& configs,
                                          const GenerationCallbacks& callbacks) {
  if (stepper.rows() != static_cast<int64_t>(configs.size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "generation: %d configs for a decoder with %d rows", configs.size(), stepper.rows()));
  }
  GenerationResult result;
  result.sequences.resize(configs.size());
  std::vector<DecodingSequence> active;
  for (size_t i = 0; i < configs.size(); ++i) {
    RETURN_IF_ERROR(CheckConfig(configs[i], static_cast<int>(i)));
    DecodingSequence sequence;
    sequence.index = static_cast<int>(i);
    sequence.config = &configs[i];
    sequence.first_row = static_cast<int64_t>(i);
    if (configs[i].num_beams > 1) {
      sequence.beams = std::make_unique<BeamSearch>(configs[i]);
    } else {
      sequence.greedy_tokens = {configs[i].decoder_start_token_id};
    }
    active.push_back(std::move(sequence));
  }

  while (!active.empty()) {
    // Cancelled sequences leave before the step that would cost them.
    if (callbacks.is_cancelled) {
      std::vector<DecodingSequence> kept;
      std::vector<int64_t> source;
      for (DecodingSequence& sequence : active) {
        if (callbacks.is_cancelled(sequence.index)) {
          result.sequences[static_cast<size_t>(sequence.index)] = CancelledSequence(sequence);
          continue;
        }
        const int64_t first_row = static_cast<int64_t>(source.size());
        for (int64_t row = 0; row < sequence.rows(); ++row)
          source.push_back(sequence.first_row + row);
        sequence.first_row = first_row;
        kept.push_back(std::move(sequence));
      }
      active = std::move(kept);
      if (active.empty()) break;
      RETURN_IF_ERROR(KeepRows(stepper, source));
    }

    // Feed each row its last token (the start token on the first step).
    std::vector<int64_t> feed;
    for (const DecodingSequence& sequence : active) {
      for (int row = 0; row < sequence.rows(); ++row)
        feed.push_back(sequence.row_tokens(row).back());
    }
    ASSIGN_OR_RETURN(at::Tensor raw_logits, stepper.Step(at::tensor(feed, at::kLong)));
    ++result.decoder_steps;
    result.decoder_row_steps += static_cast<int64_t>(feed.size());
    if (raw_logits.dim() != 2 || raw_logits.size(0) != static_cast<int64_t>(feed.size())) {
      return absl::InternalError(
          absl::StrFormat("generation: decoder returned logits of %d dims "
                          "for %d rows",
                          raw_logits.dim(), feed.size()));
    }
    // Processing is per-token host work (n-gram lookups, hypothesis lists)
    // and writes into the scores: always a private CPU copy, never the
    // stepper's own buffer.
    at::Tensor logits =
        raw_logits.to(at::kCPU, at::kFloat, /*non_blocking=*/false, /*copy=*/true).contiguous();
    const int64_t vocab = logits.size(1);
    if (result.decoder_steps == 1) {
      for (const DecodingSequence& sequence : active) {
        RETURN_IF_ERROR(CheckTokenIds(*sequence.config, sequence.index, vocab));
      }
    }

    std::vector<DecodingSequence> continuing;
    std::vector<int64_t> source;
    for (DecodingSequence& sequence : active) {
      const GenerationConfig& config = *sequence.config;
      std::vector<int64_t> next_rows;
      if (!sequence.beams) {
        float* scores = logits.data_ptr<float>() + sequence.first_row * vocab;
        ApplyLogitsProcessors(config, sequence.greedy_tokens,
                              absl::MakeSpan(scores, static_cast<size_t>(vocab)));
        const int64_t token = ArgMax(scores, vocab);
        sequence.greedy_tokens.push_back(token);
        if (callbacks.on_token) callbacks.on_token(sequence.index, token);
        const bool eos = IsEos(config, token);
        if (eos || static_cast<int>(sequence.greedy_tokens.size()) >= config.max_total_length()) {
          result.sequences[static_cast<size_t>(sequence.index)] = GeneratedSequence{
              {GeneratedHypothesis{std::vector<int64_t>(sequence.greedy_tokens.begin() + 1,
                                                        sequence.greedy_tokens.end()),
                                   std::nullopt}},
              eos ? FinishReason::kEos : FinishReason::kMaxLength};
          continue;
        }
        next_rows.push_back(0);
      } else {
        // HF: log_softmax, then the processors on log-probabilities.
        at::Tensor log_probs =
            at::log_softmax(logits.narrow(0, sequence.first_row, sequence.rows()), 1).contiguous();
        for (int row = 0; row < sequence.rows(); ++row) {
          ApplyLogitsProcessors(config, sequence.row_tokens(row),
                                absl::MakeSpan(log_probs.data_ptr<float>() + row * vocab,
                                               static_cast<size_t>(vocab)));
        }
        ASSIGN_OR_RETURN(next_rows, sequence.beams->Advance(log_probs));
        if (sequence.beams->done() || sequence.beams->cur_len() >= config.max_total_length()) {
          result.sequences[static_cast<size_t>(sequence.index)] =
              FinishedBeamSequence(*sequence.beams, config);
          continue;
        }
      }
      const int64_t first_row = static_cast<int64_t>(source.size());
      for (const int64_t row : next_rows) source.push_back(sequence.first_row + row);
      sequence.first_row = first_row;
      continuing.push_back(std::move(sequence));
    }
    active = std::move(continuing);
    if (!active.empty()) RETURN_IF_ERROR(KeepRows(stepper, source));
  }
  return result;
}

std::vector<std::vector<int64_t>> HfGenerateSequences(
    const GenerationResult& result, const std::vector<GenerationConfig>& configs) {
  std::vector<std::vector<int64_t>> rows;
  std::vector<int64_t> pads;
  size_t longest = 0;
  for (size_t i = 0; i < result.sequences.size() && i < configs.size(); ++i) {
    for (const GeneratedHypothesis& hypothesis : result.sequences[i].hypotheses) {
      std::vector<int64_t> row = {configs[i].decoder_start_token_id};
      row.insert(row.end(), hypothesis.token_ids.begin(), hypothesis.token_ids.end());
      longest = std::max(longest, row.size());
      rows.push_back(std::move(row));
      // HF needs a pad id only when lengths differ; then generate() has one.
      pads.push_back(configs[i].pad_token_id.value_or(0));
    }
  }
  for (size_t i = 0; i < rows.size(); ++i) rows[i].resize(longest, pads[i]);
  return rows;
}

}  // namespace docsparse
