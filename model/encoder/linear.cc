#include "model/encoder/linear.h"

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
      activation_in_product_(activation.has_value() && precision != Precision::kInt8) {
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
  const LinearElement element =
      type_ == at::kBFloat16 ? LinearElement::kBf16 : LinearElement::kFp32;
  packed_ = PackedLinear::Create(
      w.data_ptr<float>(), bias_in_product_ && b.defined() ? b.data_ptr<float>() : nullptr,
      out_features_, in_features_, element,
      precision == Precision::kInt8 ? LinearWeights::kInt8 : LinearWeights::kElementType,
      activation_in_product_ ? InProduct(activation_) : LinearActivation::kNone);
  if (!packed_) {
    bf16_in_fp32_ = type_ == at::kBFloat16;
    weight_ = bf16_in_fp32_ ? w.to(at::kBFloat16).to(at::kFloat) : w.to(type_);
    activation_in_product_ = false;
  }
  if (b.defined()) bias_ = b.to(type_);
}

at::Tensor Linear::operator()(const at::Tensor& x) const { return (*this)(x, nullptr); }

at::Tensor Linear::operator()(const at::Tensor& x, at::Tensor* storage) const {
  TORCH_CHECK(x.size(-1) == in_features_, "Linear: expected ", in_features_,
              " input features, got ", x.size(-1));
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
  at::Tensor out;
  if (storage == nullptr) {
    out = at::empty(sizes, in.options());
  } else {
    int64_t bytes = in.element_size();
    for (int64_t size : sizes) bytes *= size;
    if (!storage->defined() || storage->numel() < bytes) *storage = at::empty({bytes}, at::kByte);
    out = storage->narrow(0, 0, bytes).view(in.scalar_type()).view(sizes);
  }
  packed_->Run(in.data_ptr(), in.numel() / in_features_, out.data_ptr(),
               storage == nullptr ? PackedLinear::OutputWrite::kCached
                                  : PackedLinear::OutputWrite::kStreamed);
  return activate(out);
}

std::string Linear::implementation() const {
  if (packed_) return "onednn:" + packed_->implementation();
  if (bf16_in_fp32_) return "libtorch:bf16-in-fp32";
  return weight_.defined() && weight_.is_cuda() ? "libtorch:cuda" : "libtorch";
}

}  // namespace docsparse
