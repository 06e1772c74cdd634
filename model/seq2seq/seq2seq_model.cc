#include "model/seq2seq/seq2seq_model.h"

#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/attention/planner_registry.h"
#include "model/checkpoint/safetensors.h"
#include "model/encoder/linear_precision.h"

namespace docsparse {
namespace {

// The DecoderStepper of a Seq2SeqModel: the rows' self-attention cache and
// which sequence each row decodes; the cross-attention memory is per
// sequence and never moves.
class BartDecoderStepper : public DecoderStepper {
 public:
  BartDecoderStepper(const BartDecoder& decoder, CrossAttentionMemory memory,
                     std::vector<int64_t> row_sequence, double attach_flops)
      : decoder_(decoder),
        memory_(std::move(memory)),
        row_sequence_(std::move(row_sequence)),
        flops_(attach_flops) {}

  int64_t rows() const override { return static_cast<int64_t>(row_sequence_.size()); }

  absl::StatusOr<at::Tensor> Step(const at::Tensor& tokens) override {
    if (tokens.dim() != 1 || tokens.size(0) != rows()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokens: expected [", rows(), "] int64, got ", tokens.dim(), " dims"));
    }
    ASSIGN_OR_RETURN(at::Tensor logits, decoder_.Forward(tokens.to(at::kLong).unsqueeze(1),
                                                         row_sequence_, memory_, &cache_, &flops_));
    return logits.select(1, 0);
  }

  absl::Status Reorder(const at::Tensor& source) override {
    if (source.dim() != 1) return absl::InvalidArgumentError("source: expected [new_rows] int64");
    const at::Tensor index = source.to(at::kLong).contiguous();
    std::vector<int64_t> row_sequence;
    const int64_t* rows_from = index.data_ptr<int64_t>();
    for (int64_t r = 0; r < index.size(0); ++r) {
      if (rows_from[r] < 0 || rows_from[r] >= rows()) {
        return absl::InvalidArgumentError(
            absl::StrCat("source[", r, "] = ", rows_from[r], " outside [0, ", rows(), ")"));
      }
      row_sequence.push_back(row_sequence_[rows_from[r]]);
    }
    try {
      c10::InferenceMode inference_mode;
      cache_.SelectRows(index);
    } catch (const c10::Error& error) {
      return absl::InternalError(
          absl::StrCat("decoder cache reorder failed: ", error.what_without_backtrace()));
    }
    row_sequence_ = std::move(row_sequence);
    return absl::OkStatus();
  }

  // Includes the cross-attention key/value projections made when decoding
  // started: they are the decoder's share of the request too.
  double flops() const override { return flops_; }

 private:
  const BartDecoder& decoder_;
  const CrossAttentionMemory memory_;
  std::vector<int64_t> row_sequence_;  // [rows]: sequence of memory_ per row
  SelfAttentionCache cache_;
  double flops_ = 0;
};

absl::Status CheckEncoding(const Seq2SeqEncoding& encoding) {
  if (!encoding.hidden.defined() || encoding.hidden.dim() != 3) {
    return absl::InvalidArgumentError("encoding.hidden: expected [batch, rows, h]");
  }
  if (encoding.hidden.size(0) != static_cast<int64_t>(encoding.valid_rows.size())) {
    return absl::InvalidArgumentError(absl::StrCat("encoding: ", encoding.valid_rows.size(),
                                                   " valid_rows for a batch of ",
                                                   encoding.hidden.size(0)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Seq2SeqModel>> Seq2SeqModel::Create(
    const std::string& model_dir, std::unique_ptr<AttentionMechanism> attention) {
  ASSIGN_OR_RETURN(const BartConfig config, LoadBartConfig(model_dir + "/config.json"));
  return Create(model_dir, config, std::move(attention));
}

absl::StatusOr<std::unique_ptr<Seq2SeqModel>> Seq2SeqModel::Create(
    const std::string& model_dir, const BartConfig& config,
    std::unique_ptr<AttentionMechanism> attention, at::Device device, Precision precision) {
  if (precision == Precision::kAuto) {
    precision = device.is_cpu() ? Precision::kFp32 : Precision::kBf16;
  }
  RETURN_IF_ERROR(CheckPrecisionOn(precision, device, "a summarizer"));
  ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint, Checkpoint::Open(model_dir));
  ASSIGN_OR_RETURN(BartEncoderWeights encoder_weights, LoadBartEncoderWeights(*checkpoint, config));
  ASSIGN_OR_RETURN(BartDecoderWeights decoder_weights, LoadBartDecoderWeights(*checkpoint, config));
  if (attention == nullptr) {
    ASSIGN_OR_RETURN(attention,
                     MakeNativeMechanism(NativeAttentionOf(config), PlannerSourceOf(config)));
  }
  try {
    return std::make_unique<Seq2SeqModel>(
        std::make_unique<BartEncoder>(config, std::move(encoder_weights), std::move(attention),
                                      device, precision),
        std::make_unique<BartDecoder>(config, std::move(decoder_weights), device, precision));
  } catch (const c10::Error& error) {
    return absl::InternalError(absl::StrCat("placing the summarizer on ", device.str(),
                                            " failed: ", error.what_without_backtrace()));
  }
}

Seq2SeqModel::Seq2SeqModel(std::unique_ptr<BartEncoder> encoder,
                           std::unique_ptr<BartDecoder> decoder)
    : encoder_(std::move(encoder)), decoder_(std::move(decoder)) {}

absl::StatusOr<Seq2SeqEncoding> Seq2SeqModel::Encode(
    const EncoderBatch& batch, const std::vector<CostAccount*>& row_costs) const {
  ASSIGN_OR_RETURN(EncoderOutput output, encoder_->Forward(batch, row_costs));
  Seq2SeqEncoding encoding;
  encoding.hidden = std::move(output.hidden);
  for (int64_t length : output.lengths) {
    encoding.valid_rows.push_back(encoder_->global_rows() + length);
  }
  encoding.lengths = std::move(output.lengths);
  return encoding;
}

absl::StatusOr<std::unique_ptr<DecoderStepper>> Seq2SeqModel::StartDecoding(
    const Seq2SeqEncoding& encoding, int rows_per_sequence) const {
  RETURN_IF_ERROR(CheckEncoding(encoding));
  if (rows_per_sequence < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows_per_sequence must be >= 1, got ", rows_per_sequence));
  }
  double flops = 0;
  ASSIGN_OR_RETURN(CrossAttentionMemory memory,
                   decoder_->Attend(encoding.hidden, encoding.valid_rows, &flops));
  std::vector<int64_t> row_sequence;
  for (int64_t b = 0; b < encoding.hidden.size(0); ++b) {
    row_sequence.insert(row_sequence.end(), rows_per_sequence, b);
  }
  return std::make_unique<BartDecoderStepper>(*decoder_, std::move(memory), std::move(row_sequence),
                                              flops);
}

absl::StatusOr<at::Tensor> Seq2SeqModel::DecoderLogits(const Seq2SeqEncoding& encoding,
                                                       const at::Tensor& decoder_input_ids) const {
  RETURN_IF_ERROR(CheckEncoding(encoding));
  if (decoder_input_ids.dim() != 2 || decoder_input_ids.size(0) != encoding.hidden.size(0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("decoder_input_ids: expected [", encoding.hidden.size(0), ", steps] int64"));
  }
  ASSIGN_OR_RETURN(CrossAttentionMemory memory,
                   decoder_->Attend(encoding.hidden, encoding.valid_rows, nullptr));
  std::vector<int64_t> row_sequence;
  for (int64_t b = 0; b < encoding.hidden.size(0); ++b) row_sequence.push_back(b);
  SelfAttentionCache cache;
  return decoder_->Forward(decoder_input_ids.to(at::kLong), row_sequence, memory, &cache, nullptr);
}

}  // namespace docsparse
