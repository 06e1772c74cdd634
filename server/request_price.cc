#include "server/request_price.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "server/request_validation.h"

namespace docsparse {

int64_t RequestPrice::total_tokens() const {
  int64_t total = 0;
  for (const auto& [part, count] : tokens) total += count;
  return total;
}

RequestPrice& RequestPrice::operator+=(const RequestPrice& other) {
  for (const auto& [part, count] : other.tokens) tokens[part] += count;
  flops += other.flops;
  return *this;
}

RequestPrice PriceEncoding(const ServedModel& model, const ItemAttentionOptions& attention,
                           const std::vector<std::vector<int32_t>>& sequences,
                           const std::string& part) {
  RequestPrice price;
  int64_t tokens = 0;
  for (const auto& sequence : sequences) tokens += static_cast<int64_t>(sequence.size());
  if (tokens == 0) return price;
  price.tokens[part] = tokens;
  price.flops = EncoderLinearFlops(tokens, model.encoder_shape()) +
                PlannedAttentionFlops(model, attention, sequences);
  return price;
}

double DecoderFlops(const ServedModel& model, const GenerationConfig& generation,
                    int64_t encoder_rows) {
  if (!model.abstractive()) return 0;
  const BartConfig& config = model.seq2seq->config();
  const double h = config.hidden_size;
  const double n = static_cast<double>(encoder_rows);
  const double steps = generation.max_total_length();
  const double beams = generation.num_beams;
  // One token of one beam at step t attends to at most `steps` cached rows.
  const double per_layer = 2.0 * 4 * h * h        // self-attention q, k, v, out
                           + 2.0 * 2 * h * h      // cross-attention q, out
                           + 2.0 * 2 * steps * h  // self-attention over the cache
                           + 2.0 * 2 * n * h      // cross-attention over the encoder rows
                           + 2.0 * 2 * h * config.decoder_ffn_size;
  const double per_token = config.decoder_layers * per_layer + 2.0 * h * config.vocab_size;
  const double cross_keys_values = config.decoder_layers * 2.0 * 2 * n * h * h;
  return beams * steps * per_token + cross_keys_values;
}

absl::Status AdmitRequest(const RequestPrice& price, const ServerLimits& limits) {
  std::vector<std::string> parts;
  for (const auto& [part, count] : price.tokens) parts.push_back(absl::StrCat(count, " ", part));
  const std::string breakdown = absl::StrJoin(parts, " + ");
  const int64_t tokens = price.total_tokens();
  if (tokens > limits.max_request_tokens) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "request: priced at ", tokens, " tokens to encode (", breakdown, "), over the limit of ",
        limits.max_request_tokens, " tokens per request (--max_request_tokens)"));
  }
  const double gflops = price.flops / 1e9;
  if (gflops > limits.max_request_gflops) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "request: priced at %.1f GFLOP (%d tokens: %s), over the limit of %g GFLOP per request "
        "(--max_request_gflops)",
        gflops, tokens, breakdown, limits.max_request_gflops));
  }
  return absl::OkStatus();
}

absl::Status CheckGenerationCaps(const GenerationConfig& generation, const ServerLimits& limits) {
  const int generated = generation.max_total_length() - 1;  // the start token is not generated
  if (generated > limits.max_generated_tokens) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "generation.max_new_tokens: up to ", generated,
        " generated tokens (the request's max_length / max_new_tokens, else the model's); the "
        "server allows ",
        limits.max_generated_tokens, " (--max_generated_tokens)"));
  }
  if (generation.num_beams > limits.max_beams) {
    return absl::ResourceExhaustedError(
        absl::StrCat("generation.num_beams: ", generation.num_beams,
                     " beams (the request's, else the model's); the server allows ",
                     limits.max_beams, " (--max_beams)"));
  }
  return absl::OkStatus();
}

}  // namespace docsparse
