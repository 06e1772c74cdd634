#include "model/encoder/linear.h"

#include "kernels/group_major_rows.h"
#include "model/encoder/linear_precision.h"

namespace docsparse {
namespace {

LinearActivation InProduct(std::optional<Activation> activation) {
  if (!activation.has_value()) return LinearActivation::kNone;
  switch (*activation) {
    case Activation::kGelu:
      return LinearActivation::kGeluErf;
    case Activation::kGeluNew:
      return LinearActivation::kGeluTanh;
    case Activation::kRelu:
      return LinearActivation::kRelu;
  }
  return LinearActivation::kNone;
}

LinearElement ElementOf(at::ScalarType type) {
  return type == at::kBFloat16 ? LinearElement::kBf16 : LinearElement::kFp32;
}

LinearWeights WeightsOf(Precision precision) {
  return precision == Precision::kInt8 ? LinearWeights::kInt8 : LinearWeights::kElementType;
}

}  // namespace

at::Tensor ApplyActivation(const at::Tensor& x, Activation activation) {
  switch (activation) {
    case Activation::kGelu:
      return at::gelu(x);
    case Activation::kGeluNew:
      return at::gelu(x, "tanh");
    case Activation::kRelu:
      return at::relu(x);
  }
  return x;
}

Linear::Linear(const at::Tensor& weight, const at::Tensor& bias, Precision precision,
               Bias placement, std::optional<Activation> activation, at::Device device)
    : type_(ActivationType(precision)),
      in_features_(weight.size(1)),
      out_features_(weight.size(0)),
      bias_in_product_(placement == Bias::kInProduct),
      activation_(activation),
      activation_in_product_(
          activation.has_value() &&
          PackedLinear::TakesActivation(ElementOf(type_), WeightsOf(precision))) {
  TORCH_CHECK(weight.dim() == 2, "Linear: weight must be [out, in]");
  TORCH_CHECK(!activation.has_value() || bias_in_product_,
              "Linear: an activation needs the bias in the product");
  const at::Tensor w = weight.to(at::kFloat).contiguous();
  const at::Tensor b = bias.defined() ? bias.to(at::kFloat).contiguous() : at::Tensor();
  if (!device.is_cpu()) {
    TORCH_CHECK(precision != Precision::kInt8 && bias_in_product_,
                "Linear: int8 products and a bias left to the caller run on the CPU only");
    weight_ = w.to(device, type_);
    if (b.defined()) bias_ = b.to(device, type_);
    activation_in_product_ = false;
    return;
  }
  TORCH_CHECK(type_ != at::kHalf, "Linear: fp16 products run on a CUDA device only");
  packed_ = PackedLinear::Create(
      w.data_ptr<float>(), bias_in_product_ && b.defined() ? b.data_ptr<float>() : nullptr,
      out_features_, in_features_, ElementOf(type_), WeightsOf(precision),
      activation_in_product_ ? InProduct(activation_) : LinearActivation::kNone);
  if (!packed_) {
    bf16_in_fp32_ = type_ == at::kBFloat16;
    weight_ = bf16_in_fp32_ ? w.to(at::kBFloat16).to(at::kFloat) : w.to(type_);
    activation_in_product_ = false;
  }
  if (b.defined()) bias_ = b.to(type_);
}

void Linear::CheckInFeatures(const at::Tensor& x) const {
  TORCH_CHECK(x.size(-1) == in_features_, "Linear: expected ", in_features_,
              " input features, got ", x.size(-1));
}

at::Tensor Linear::operator()(const at::Tensor& x) const {
  CheckInFeatures(x);
  const at::Tensor bias = bias_in_product_ ? bias_ : at::Tensor();
  const auto activate = [this](const at::Tensor& y) {
    return activation_.has_value() && !activation_in_product_ ? ApplyActivation(y, *activation_)
                                                              : y;
  };
  if (bf16_in_fp32_) {
    const at::Tensor product = at::linear(x.to(type_).to(at::kFloat), weight_,
                                          bias.defined() ? bias.to(at::kFloat) : bias);
    return activate(product).to(type_);
  }
  if (!packed_) return activate(at::linear(x.to(type_), weight_, bias));
  const at::Tensor in = x.to(type_).contiguous();
  std::vector<int64_t> sizes = in.sizes().vec();
  sizes.back() = out_features_;
  at::Tensor out = at::empty(sizes, in.options());
  packed_->Run(in.data_ptr(), in.numel() / in_features_, out.data_ptr());
  return activate(out);
}

at::Tensor Linear::GroupMajor(const at::Tensor& x, int64_t groups, at::Tensor* storage) const {
  TORCH_CHECK(x.is_cpu() && storage != nullptr, "Linear::GroupMajor: CPU tensors and a storage");
  TORCH_CHECK(groups > 0 && out_features_ % groups == 0, "Linear::GroupMajor: ", out_features_,
              " outputs do not split into ", groups, " groups");
  CheckInFeatures(x);
  const int64_t rows = x.numel() / in_features_;
  const int64_t width = out_features_ / groups;
  const int64_t element_bytes = static_cast<int64_t>(c10::elementSize(type_));
  const int64_t bytes = rows * out_features_ * element_bytes;
  if (!storage->defined() || storage->numel() < bytes) *storage = at::empty({bytes}, at::kByte);
  at::Tensor out = storage->narrow(0, 0, bytes).view(type_).view({groups, rows, width});
  if (!packed_ || (activation_.has_value() && !activation_in_product_)) {
    out.copy_((*this)(x).reshape({rows, groups, width}).permute({1, 0, 2}));
    return out;
  }
  const at::Tensor in = x.to(type_).contiguous();
  const GroupMajorRows target{static_cast<uint8_t*>(out.data_ptr()), rows, groups,
                              width * element_bytes, /*streamed=*/type_ == at::kBFloat16};
  packed_->RunStaged(
      in.data_ptr(), rows, [&target](const void* staged, int64_t first, int64_t count) {
        CopyRowsGroupMajor(static_cast<const uint8_t*>(staged), first, count, target);
      });
  return out;
}

std::string Linear::implementation() const {
  if (packed_) return packed_->implementation();
  if (bf16_in_fp32_) return "libtorch:bf16-in-fp32";
  return weight_.defined() && weight_.is_cuda() ? "libtorch:cuda" : "libtorch";
}

}  // namespace docsparse
