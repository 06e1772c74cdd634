// An encoder's linear layer in the model's precision: the weights packed once
// at load for oneDNN's matmul (kernels/packed_linear.h; int8 weights for
// kInt8), or, where oneDNN has no kernel for the precision on this CPU (bf16
// without AVX-512) and on a CUDA device, LibTorch's at::linear on the weights
// stored in the activation type (on the device: cuBLAS).
#ifndef DOCSPARSE_MODEL_ENCODER_LINEAR_H_
#define DOCSPARSE_MODEL_ENCODER_LINEAR_H_

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>

#include "kernels/packed_linear.h"
#include "model/checkpoint/hf_config.h"
#include "model/checkpoint/precision.h"

namespace docsparse {

// A feed-forward activation as Hugging Face's ACT2FN computes it (LibTorch).
at::Tensor ApplyActivation(const at::Tensor& x, Activation activation);

class Linear {
 public:
  // Where the bias is added: in the product, or by the caller in a fused pass
  // of its own (the feed-forward's bias + GELU, kernels/bias_gelu.h).
  enum class Bias { kInProduct, kByCaller };

  Linear() = default;
  // `weight` [out, in] and `bias` [out] in fp32; `precision` kFp32, kBf16 or
  // kInt8 (int8 weights, activations as ActivationType says). `activation`,
  // if any, is applied to the output: inside the product (on the fp32 sum,
  // before rounding) where oneDNN runs it with element-type weights, else
  // after it. On a CUDA `device` the weights live there; kInt8 and kByCaller
  // are CPU-only.
  Linear(const at::Tensor& weight, const at::Tensor& bias, Precision precision,
         Bias placement = Bias::kInProduct, std::optional<Activation> activation = std::nullopt,
         at::Device device = at::kCPU);

  // x [..., in] -> [..., out] in the precision's activation type (x is
  // converted to it first if it is not in it); without the bias for kByCaller.
  at::Tensor operator()(const at::Tensor& x) const;
  // x [..., in] -> [groups, rows, out / groups] (rows: x's rows flattened),
  // group-major: row r's outputs [g·w, (g + 1)·w) become result[g][r] (the
  // encoder's q, k and v head by head, kernels/group_major_rows.h). Written
  // into `*storage`, a byte tensor the caller keeps across calls, grown here
  // as needed: the result is a view of it, so the caller must be done with
  // the previous result before the next call (large fresh outputs would be
  // mapped and faulted in anew at every call: glibc maps anything above
  // 32 MB). For outputs far larger than the caches and read later (the
  // encoder calls it above 32 MB): bf16 rows go out with non-temporal stores,
  // which took the 16k-token q/k/v projection from 8.2-8.6 to 6.6 ms a layer
  // (an fp32 product is slow enough to hide its writes). CPU only.
  at::Tensor GroupMajor(const at::Tensor& x, int64_t groups, at::Tensor* storage) const;

  // The bias in the activation type (for kByCaller).
  const at::Tensor& bias() const { return bias_; }
  // "onednn:<kernel>", "libtorch" or "libtorch:bf16-in-fp32" (see bf16_in_fp32_).
  std::string implementation() const;

 private:
  // x's last dimension is in_features_, else a named error.
  void CheckInFeatures(const at::Tensor& x) const;

  at::ScalarType type_ = at::kFloat;
  int64_t in_features_ = 0;
  int64_t out_features_ = 0;
  bool bias_in_product_ = true;
  std::optional<Activation> activation_;
  bool activation_in_product_ = false;
  std::shared_ptr<const PackedLinear> packed_;
  // The fallback's weight (undefined when packed_ runs), and the bias in the
  // activation type (kept for kByCaller and the fallback).
  at::Tensor weight_;
  at::Tensor bias_;
  // The CPU fallback of a bf16 product (no oneDNN bf16 product on this CPU:
  // AVX2 only): weight_ holds the bf16-rounded weights as fp32 and the
  // product runs in fp32 on bf16 inputs, as bf16 hardware computes it (exact
  // products, fp32 sums), then rounds to bf16; LibTorch's own bf16 products
  // there are an emulation several times slower.
  bool bf16_in_fp32_ = false;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ENCODER_LINEAR_H_
