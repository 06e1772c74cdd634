// An encoder-decoder summarizer (BART, Pegasus, LSG-BART, LED) loaded from a
// Hugging Face checkpoint folder: config.json + model.safetensors (or a
// sharded index). The encoder runs through an AttentionMechanism (dense, LSG
// or any other planner); the decoder is dense with a KV cache and is driven
// by generation (model/seq2seq/generator.h) through DecoderStepper.
//
// Flow: Encode(batch) once per batch of documents, then StartDecoding(output,
// rows_per_sequence) hands out a DecoderStepper whose rows are the
// sequences' beams, sequence-major (row r decodes sequence r /
// rows_per_sequence), as HF's repeat_interleave lays them out.
#ifndef DOCSPARSE_MODEL_SEQ2SEQ_SEQ2SEQ_MODEL_H_
#define DOCSPARSE_MODEL_SEQ2SEQ_SEQ2SEQ_MODEL_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/attention/attention.h"
#include "model/attention/cost_model.h"
#include "model/checkpoint/bart_config.h"
#include "model/encoder/encoder.h"
#include "model/seq2seq/bart_decoder.h"
#include "model/seq2seq/bart_encoder.h"
#include "model/seq2seq/decoder_stepper.h"

namespace docsparse {

// What the decoder cross-attends to, for a batch of documents.
struct Seq2SeqEncoding {
  // [batch, rows, h] float32. With LSG and pass_global_tokens_to_decoder the
  // global tokens' rows come first (LSGBartModel / LSGPegasusModel hand them
  // to their decoder).
  at::Tensor hidden;
  // [batch]: rows [0, valid_rows[b]) of sequence b are real (globals
  // included); the decoder never attends past them.
  std::vector<int64_t> valid_rows;
  // [batch]: input tokens of sequence b (special tokens included).
  std::vector<int64_t> lengths;
};

// Immutable after Create; Encode, StartDecoding and DecoderLogits may run on
// several threads at once. A DecoderStepper borrows the model: the model must
// outlive it.
class Seq2SeqModel {
 public:
  // Reads `model_dir`/config.json (model/checkpoint/bart_config.h) and the weights.
  // `attention` runs the encoder's self-attention; null picks the model's
  // native one (model/attention/planner_registry.h, NativeAttentionOf): LSG
  // for an LSG config, Longformer's window with one global token for LED,
  // else dense. Errors name the file, field or tensor.
  static absl::StatusOr<std::unique_ptr<Seq2SeqModel>> Create(
      const std::string& model_dir, std::unique_ptr<AttentionMechanism> attention = nullptr);
  // The same with an already parsed config (tests, benchmarks), on `device`
  // in `precision` (kFp32, kBf16, or kInt8 on the CPU: int8 products with
  // per-row dynamic activation scales, the rest bf16 where the CPU has it;
  // kAuto: bf16 on a CUDA device, fp32 on the CPU, where the server serves
  // the others only when docsparse.json asks).
  static absl::StatusOr<std::unique_ptr<Seq2SeqModel>> Create(
      const std::string& model_dir, const BartConfig& config,
      std::unique_ptr<AttentionMechanism> attention, at::Device device = at::kCPU,
      Precision precision = Precision::kFp32);
  Seq2SeqModel(std::unique_ptr<BartEncoder> encoder, std::unique_ptr<BartDecoder> decoder);

  at::Device device() const { return encoder_->device(); }
  // kFp32, kBf16 or kInt8: what it was created in.
  Precision precision() const { return encoder_->precision(); }

  // Encodes the documents (ids with the tokenizer's special tokens) as
  // BartEncoder::Forward does, adding sequence i's encoder cost to
  // row_costs[i] (entries may be null; empty counts nothing).
  absl::StatusOr<Seq2SeqEncoding> Encode(const EncoderBatch& batch,
                                         const std::vector<CostAccount*>& row_costs) const;

  // A stepper over encoding.hidden.size(0) * rows_per_sequence rows, with
  // every layer's cross-attention keys/values projected now, once per
  // sequence (not per row). InvalidArgument for rows_per_sequence < 1 or an
  // encoding whose shapes disagree.
  absl::StatusOr<std::unique_ptr<DecoderStepper>> StartDecoding(const Seq2SeqEncoding& encoding,
                                                                int rows_per_sequence) const;

  // Teacher forcing: logits [batch, steps, vocab] float32 for
  // `decoder_input_ids` ([batch, steps] int64, one row per sequence),
  // final_logits_bias included: what HF's model(input_ids,
  // decoder_input_ids=...).logits returns.
  absl::StatusOr<at::Tensor> DecoderLogits(const Seq2SeqEncoding& encoding,
                                           const at::Tensor& decoder_input_ids) const;

  const BartConfig& config() const { return encoder_->config(); }
  const BartEncoder& encoder() const { return *encoder_; }
  const BartDecoder& decoder() const { return *decoder_; }
  // Longest decoder sequence (start token included) the position table
  // allows: the bound for generation's max_length.
  int64_t max_decoder_length() const { return decoder_->max_positions(); }

 private:
  std::unique_ptr<BartEncoder> encoder_;
  std::unique_ptr<BartDecoder> decoder_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_SEQ2SEQ_SEQ2SEQ_MODEL_H_
