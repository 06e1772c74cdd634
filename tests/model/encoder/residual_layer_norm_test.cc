// The encoder's residual LayerNorm (residual_layer_norm.h) against LibTorch's
// add and layer_norm in double, in both CPU element types, with a new output
// and with the result written over one of its inputs.
#include "model/encoder/residual_layer_norm.h"

#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

namespace docsparse {
namespace {

struct Inputs {
  at::Tensor x, residual, gamma, beta;
};

Inputs MakeInputs(at::ScalarType type, int64_t width) {
  at::manual_seed(7);
  return {(at::randn({2, 37, width}) * 3 + 10).to(type), at::randn({2, 37, width}).to(type),
          at::randn({width}) * 0.1 + 1, at::randn({width}) * 0.1};
}

at::Tensor Reference(const Inputs& in) {
  const int64_t width = in.x.size(-1);
  return at::layer_norm(in.x.to(at::kDouble) + in.residual.to(at::kDouble), {width},
                        in.gamma.to(at::kDouble), in.beta.to(at::kDouble), 1e-12);
}

double MaxError(const at::Tensor& got, const at::Tensor& want) {
  return (got.to(at::kDouble) - want).abs().max().item<double>();
}

TEST(ResidualLayerNormTest, MatchesLibTorchInFp32AndBf16) {
  c10::InferenceMode inference_mode;
  for (const at::ScalarType type : {at::kFloat, at::kBFloat16}) {
    for (const int64_t width : {384, 37}) {
      const Inputs in = MakeInputs(type, width);
      const at::Tensor got = ResidualLayerNorm(in.x, in.residual, in.gamma, in.beta, /*eps=*/1e-12);
      EXPECT_EQ(got.scalar_type(), type);
      EXPECT_EQ(got.sizes(), in.x.sizes());
      // bf16 rounds the output to 8 bits (outputs up to ~4: 2^-7 each).
      EXPECT_LT(MaxError(got, Reference(in)), type == at::kFloat ? 1e-5 : 0.02)
          << at::toString(type) << " width " << width;
    }
  }
}

TEST(ResidualLayerNormTest, WritesIntoOutEvenOverItsInput) {
  c10::InferenceMode inference_mode;
  for (const at::ScalarType type : {at::kFloat, at::kBFloat16}) {
    Inputs in = MakeInputs(type, 384);
    const at::Tensor want = Reference(in);
    const at::Tensor x = in.x;
    const at::Tensor got = ResidualLayerNorm(x, in.residual, in.gamma, in.beta, 1e-12, x);
    EXPECT_EQ(got.data_ptr(), x.data_ptr());
    EXPECT_LT(MaxError(x, want), type == at::kFloat ? 1e-5 : 0.02) << at::toString(type);
  }
}

TEST(ResidualLayerNormTest, RefusesAMismatchedOutOrResidual) {
  c10::InferenceMode inference_mode;
  const Inputs in = MakeInputs(at::kFloat, 384);
  EXPECT_THROW(ResidualLayerNorm(in.x, in.residual.to(at::kBFloat16), in.gamma, in.beta, 1e-12),
               c10::Error);
  EXPECT_THROW(ResidualLayerNorm(in.x, in.residual, in.gamma, in.beta, 1e-12,
                                 at::empty({2, 37, 384}, at::kBFloat16)),
               c10::Error);
  EXPECT_THROW(ResidualLayerNorm(in.x, in.residual, in.gamma, in.beta, 1e-12,
                                 at::empty({2, 384, 37}).transpose(1, 2)),
               c10::Error);
}

}  // namespace
}  // namespace docsparse
