#include "model/encoder/linear.h"

#include "model/encoder/linear_precision.h"

namespace docsparse {

Linear::Linear(const at::Tensor& weight, const at::Tensor& bias, Precision precision,
               Bias placement)
    : type_(ActivationType(precision)),
      in_features_(weight.size(1)),
      out_features_(weight.size(0)),
      bias_in_product_(placement == Bias::kInProduct) {
  TORCH_CHECK(weight.dim() == 2, "Linear: weight must be [out, in]");
  const at::Tensor w = weight.to(at::kFloat).contiguous();
  const at::Tensor b = bias.defined() ? bias.to(at::kFloat).contiguous() : at::Tensor();
  const LinearElement element =
      type_ == at::kBFloat16 ? LinearElement::kBf16 : LinearElement::kFp32;
  packed_ = PackedLinear::Create(
      w.data_ptr<float>(), bias_in_product_ && b.defined() ? b.data_ptr<float>() : nullptr,
      out_features_, in_features_, element,
      precision == Precision::kInt8 ? LinearWeights::kInt8 : LinearWeights::kElementType);
  if (!packed_) weight_ = w.to(type_);
  if (b.defined()) bias_ = b.to(type_);
}

at::Tensor Linear::operator()(const at::Tensor& x) const {
  TORCH_CHECK(x.size(-1) == in_features_, "Linear: expected ", in_features_,
              " input features, got ", x.size(-1));
  const at::Tensor bias = bias_in_product_ ? bias_ : at::Tensor();
  if (!packed_) return at::linear(x.to(type_), weight_, bias);
  const at::Tensor in = x.to(type_).contiguous();
  std::vector<int64_t> sizes = in.sizes().vec();
  sizes.back() = out_features_;
  at::Tensor out = at::empty(sizes, in.options());
  packed_->Run(in.data_ptr(), in.numel() / in_features_, out.data_ptr());
  return out;
}

std::string Linear::implementation() const {
  return packed_ ? "onednn:" + packed_->implementation() : "libtorch";
}

}  // namespace docsparse
