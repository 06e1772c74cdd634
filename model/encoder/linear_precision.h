// How the encoder runs in a chosen precision (docsparse.json "precision", the
// server's --precision): fp32, or bf16 as OpenVINO runs it on the same CPUs:
// parameters and the activations between operations in bf16, products on the
// CPU's bf16 hardware (AMX tiles, AVX512-BF16) through oneDNN's matmul
// (linear.h), and every reduction (product sums, softmax, LayerNorm
// statistics) accumulated in fp32. Converting activations to bf16 before
// each product and back after it cost more than the products at 16k tokens.
#ifndef DOCSPARSE_MODEL_ENCODER_LINEAR_PRECISION_H_
#define DOCSPARSE_MODEL_ENCODER_LINEAR_PRECISION_H_

#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "kernels/cpu_features.h"
#include "model/checkpoint/precision.h"

namespace docsparse {

// kAuto becomes bf16 where `cpu` multiplies bf16 natively, int8 on AVX2
// without AVX-512, else fp32; the others are returned as they are. Never
// returns kAuto.
Precision ResolvePrecision(Precision requested, const CpuFeatures& cpu);

// The element type of the activations between operations for a resolved
// `precision`: bf16 for kBf16, and for kInt8 where `cpu` multiplies bf16
// natively; fp16 for kFp16 (a CUDA device's); fp32 otherwise.
at::ScalarType ActivationType(Precision precision, const CpuFeatures& cpu = HostCpuFeatures());

// The precision attention is told (AttentionInputs::precision) for
// activations of `type`: the CPU's bf16 executors follow it; a device's
// take the operands' own type.
Precision AttentionPrecision(at::ScalarType type);

// INVALID_ARGUMENT naming the field where `precision` cannot run on
// `device` (int8 off the CPU, fp16 on it), with what to write instead;
// `model` names the kind of model in the message ("an encoder",
// "a summarizer").
absl::Status CheckPrecisionOn(Precision precision, at::Device device, const char* model);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ENCODER_LINEAR_PRECISION_H_
