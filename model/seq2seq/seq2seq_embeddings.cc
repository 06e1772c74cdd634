#include "model/seq2seq/seq2seq_embeddings.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/checkpoint/checkpoint_tensor.h"

namespace docsparse {

absl::StatusOr<std::string> FindSeq2SeqPrefix(const Checkpoint& checkpoint) {
  // Every BART/Pegasus checkpoint has encoder layers; position tables may be
  // missing (Pegasus' are computed).
  // Task models keep them under "model." (LED's under "led.").
  const std::string probe = "encoder.layers.0.fc1.weight";
  for (const char* prefix : {"model.", "led.", ""}) {
    if (checkpoint.Has(prefix + probe)) return std::string(prefix);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "checkpoint has no tensor '", probe, "' under any of the prefixes ['', 'model.', 'led.']"));
}

absl::StatusOr<at::Tensor> ReadTokenEmbeddings(const Checkpoint& checkpoint,
                                               const std::string& prefix, const std::string& part,
                                               const BartConfig& config) {
  const std::string name = checkpoint.Has(prefix + "shared.weight")
                               ? prefix + "shared.weight"
                               : absl::StrCat(prefix, part, ".embed_tokens.weight");
  return ReadFloatTensor(checkpoint, name, {config.vocab_size, config.hidden_size});
}

absl::StatusOr<at::Tensor> ReadPositionTable(const Checkpoint& checkpoint,
                                             const std::string& prefix, const std::string& part,
                                             const BartConfig& config) {
  const std::string name = absl::StrCat(prefix, part, ".embed_positions.weight");
  const int64_t rows = (part == "decoder" ? config.decoder_max_position_embeddings
                                          : config.max_position_embeddings) +
                       config.position_offset();
  if (config.sinusoidal_positions() && !checkpoint.Has(name)) {
    return SinusoidalPositions(rows, config.hidden_size);
  }
  return ReadFloatTensor(checkpoint, name, {rows, config.hidden_size});
}

at::Tensor SinusoidalPositions(int64_t rows, int64_t dim) {
  const int64_t sin_columns = (dim + 1) / 2;
  const int64_t cos_columns = dim / 2;
  const at::Tensor positions = at::arange(rows, at::kDouble).unsqueeze(1);
  // Column j of HF's position_enc divides by 10000^(2 * (j // 2) / dim); the
  // sines take the even j (exponent 2k/dim), the cosines the odd j (also
  // 2k/dim).
  const auto rates = [&](int64_t count) {
    return at::pow(10000.0, at::arange(count, at::kDouble) * 2.0 / static_cast<double>(dim));
  };
  const at::Tensor sines = at::sin(positions / rates(sin_columns).unsqueeze(0));
  const at::Tensor cosines = at::cos(positions / rates(cos_columns).unsqueeze(0));
  return at::cat({sines, cosines}, 1).to(at::kFloat).contiguous();
}

}  // namespace docsparse
