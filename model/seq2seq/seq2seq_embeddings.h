// Weight-loading pieces shared by the BART-family encoder and decoder
// (model/seq2seq/bart_encoder.h, model/seq2seq/bart_decoder.h): where a checkpoint keeps the
// model's tensors, and the position tables (BART's learned ones, Pegasus'
// sinusoidal ones).
#ifndef DOCSPARSE_MODEL_SEQ2SEQ_SEQ2SEQ_EMBEDDINGS_H_
#define DOCSPARSE_MODEL_SEQ2SEQ_SEQ2SEQ_EMBEDDINGS_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "model/checkpoint/bart_config.h"
#include "model/checkpoint/safetensors.h"

namespace docsparse {

// The prefix of the encoder/decoder tensors: "" for a bare BartModel /
// PegasusModel checkpoint, "model." for task models such as
// BartForConditionalGeneration, "led." for LEDForConditionalGeneration. InvalidArgument naming the probed tensor
// when neither holds it.
absl::StatusOr<std::string> FindSeq2SeqPrefix(const Checkpoint& checkpoint);

// The shared token embedding [vocab, h]: `shared.weight`, which
// save_pretrained keeps for the tied embeddings, else
// `<part>.embed_tokens.weight` (part: "encoder" or "decoder").
absl::StatusOr<at::Tensor> ReadTokenEmbeddings(const Checkpoint& checkpoint,
                                               const std::string& prefix, const std::string& part,
                                               const BartConfig& config);

// `<part>.embed_positions.weight`: BART's learned table
// [max_position_embeddings + 2, h] (required; LED's: [max_encoder_ or
// max_decoder_position_embeddings, h]); Pegasus' sinusoidal table
// [max_position_embeddings, h], read when the checkpoint has it (HF loads
// it like any weight) and otherwise computed as SinusoidalPositions does.
absl::StatusOr<at::Tensor> ReadPositionTable(const Checkpoint& checkpoint,
                                             const std::string& prefix, const std::string& part,
                                             const BartConfig& config);

// PegasusSinusoidalPositionalEmbedding._init_weight: row p, column k <
// ceil(dim/2) is sin(p / 10000^(2k/dim)), column ceil(dim/2) + k is
// cos(p / 10000^(2k/dim)) (not interleaved); float64 math rounded to float32
// as numpy then torch do. [rows, dim] float32.
at::Tensor SinusoidalPositions(int64_t rows, int64_t dim);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_SEQ2SEQ_SEQ2SEQ_EMBEDDINGS_H_
