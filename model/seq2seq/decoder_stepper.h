// The contract between generation (model/seq2seq/generator.h: greedy and beam search
// with Hugging Face semantics) and an encoder-decoder (model/seq2seq/seq2seq_model.h:
// BART, Pegasus, their LSG forms). Generation only sees decoder rows: one per
// (request, beam) still decoding. The model keeps each row's KV cache (the
// self-attention cache grows by one position a step; the cross-attention keys
// and values were computed once, when the encoder output was attached).
#ifndef DOCSPARSE_MODEL_SEQ2SEQ_DECODER_STEPPER_H_
#define DOCSPARSE_MODEL_SEQ2SEQ_DECODER_STEPPER_H_

#include <ATen/ATen.h>

#include <cstdint>

#include "absl/status/statusor.h"

namespace docsparse {

class DecoderStepper {
 public:
  virtual ~DecoderStepper() = default;

  // Rows currently decoding.
  virtual int64_t rows() const = 0;

  // Feeds one token per row (`tokens`: [rows()] int64; the first call feeds
  // decoder_start_token_id) and returns the next-token logits, [rows(),
  // vocab] float32, final_logits_bias included, before any processing.
  virtual absl::StatusOr<at::Tensor> Step(const at::Tensor& tokens) = 0;

  // Rebuilds the rows: new row r continues old row source[r] (`source`:
  // [new_rows] int64, entries may repeat or be left out). Beam search uses
  // it to follow the chosen beams; finished requests leave by being left
  // out. Caches move with their rows.
  virtual absl::Status Reorder(const at::Tensor& source) = 0;

  // FLOPs of the Step calls so far (matmuls, 2 per multiply-add), for the
  // cost report's decoder share.
  virtual double flops() const = 0;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_SEQ2SEQ_DECODER_STEPPER_H_
