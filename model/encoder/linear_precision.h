// How the encoder's linear layers run in a chosen precision (docsparse.json
// "precision", the server's --precision): fp32, or bf16 products on the CPU's
// bf16 hardware (AMX tiles, AVX512-BF16) through LibTorch's oneDNN matmul,
// with biases, residuals, LayerNorm, softmax and attention kept in fp32.
#ifndef DOCSPARSE_MODEL_ENCODER_LINEAR_PRECISION_H_
#define DOCSPARSE_MODEL_ENCODER_LINEAR_PRECISION_H_

#include <ATen/ATen.h>

#include "kernels/cpu_features.h"
#include "model/checkpoint/precision.h"

namespace docsparse {

// kAuto becomes bf16 where `cpu` multiplies bf16 natively, else fp32; the
// others are returned as they are. Never returns kAuto.
Precision ResolvePrecision(Precision requested, const CpuFeatures& cpu);

// A weight matrix [out, in] stored for `precision` (kFp32 or kBf16): a bf16
// copy, made once at load, or the fp32 tensor itself.
at::Tensor WeightForPrecision(const at::Tensor& weight, Precision precision);

// x·weightᵀ + bias with x and the result in fp32. With a bf16 weight, x is
// rounded to bf16 for the product and the bias is added in fp32 afterwards.
at::Tensor Project(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ENCODER_LINEAR_PRECISION_H_
