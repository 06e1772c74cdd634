// The encoder's packed linear layers (linear.h, kernels/packed_linear.h)
// against LibTorch's at::linear in double: both precisions, row counts the
// packing reference (512) did not see, the bias left to the caller, and calls
// from several threads at once.
#include "model/encoder/linear.h"

#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "kernels/cpu_features.h"

namespace docsparse {
namespace {

double MaxError(const at::Tensor& got, const at::Tensor& want) {
  return (got.to(at::kDouble) - want).abs().max().item<double>();
}

TEST(LinearTest, Fp32MatchesDoubleProductAtAnyRowCount) {
  c10::InferenceMode inference_mode;
  at::manual_seed(1);
  const at::Tensor weight = at::randn({96, 64}) * 0.1;
  const at::Tensor bias = at::randn({96});
  const Linear linear(weight, bias, Precision::kFp32);
  EXPECT_EQ(linear.implementation().rfind("onednn:", 0), 0u) << linear.implementation();
  for (int64_t rows : {1, 7, 37, 512, 700}) {
    const at::Tensor x = at::randn({rows, 64});
    const at::Tensor want =
        at::linear(x.to(at::kDouble), weight.to(at::kDouble), bias.to(at::kDouble));
    const at::Tensor got = linear(x);
    EXPECT_EQ(got.scalar_type(), at::kFloat);
    EXPECT_LT(MaxError(got, want), 1e-5) << rows << " rows";
  }
  // Leading dimensions are kept.
  const at::Tensor batched = at::randn({2, 5, 64});
  EXPECT_EQ(linear(batched).sizes(), (std::vector<int64_t>{2, 5, 96}));
  EXPECT_LT(MaxError(linear(batched)[1], linear(batched[1])), 1e-6);
}

TEST(LinearTest, Bf16StaysBf16AndWithinItsRounding) {
  c10::InferenceMode inference_mode;
  at::manual_seed(3);
  const at::Tensor x = at::randn({2, 7, 48});
  const at::Tensor weight = at::randn({40, 48}) * 0.1;
  const at::Tensor bias = at::randn({40});
  const at::Tensor want =
      at::linear(x.to(at::kDouble), weight.to(at::kDouble), bias.to(at::kDouble));
  const at::Tensor got = Linear(weight, bias, Precision::kBf16)(x);
  EXPECT_EQ(got.scalar_type(), at::kBFloat16);
  EXPECT_EQ(got.sizes(), want.sizes());
  // x, the weight and the result each rounded to bf16 (8 bits of mantissa):
  // a few 2^-8 relative to the terms' magnitude.
  EXPECT_LT(MaxError(got, want), 0.05);
  EXPECT_GT(MaxError(got, want), 0.0);  // it did round
}

// GroupMajor is the product with its outputs regrouped, in every precision
// and through every path (oneDNN's staged pieces, LibTorch's fallback where
// bf16 has no oneDNN product), and it reuses the caller's storage.
TEST(LinearTest, GroupMajorIsTheProductRegroupedInCallerStorage) {
  c10::InferenceMode inference_mode;
  at::manual_seed(4);
  const at::Tensor weight = at::randn({48, 40}) * 0.1;
  const at::Tensor bias = at::randn({48});
  for (const Precision precision : {Precision::kFp32, Precision::kBf16, Precision::kInt8}) {
    const Linear linear(weight, bias, precision);
    at::Tensor storage;
    // 3 x 300 rows: more than one staging piece (256 rows).
    for (const std::vector<int64_t>& shape :
         {std::vector<int64_t>{3, 300, 40}, std::vector<int64_t>{5, 40}}) {
      const at::Tensor x = at::randn(shape);
      const int64_t rows = x.numel() / 40;
      const at::Tensor want = linear(x).reshape({rows, 6, 8}).permute({1, 0, 2});
      const at::Tensor got = linear.GroupMajor(x, 6, &storage);
      EXPECT_EQ(got.sizes(), (std::vector<int64_t>{6, rows, 8})) << PrecisionName(precision);
      EXPECT_TRUE(at::equal(got, want)) << PrecisionName(precision) << " " << rows << " rows";
      EXPECT_EQ(got.data_ptr(), storage.data_ptr());
    }
    // The smaller result reused the storage the larger one grew.
    EXPECT_GE(storage.numel(), 900 * 48 * linear(at::randn({1, 40})).element_size());
  }
  EXPECT_THROW(Linear(weight, bias, Precision::kFp32).GroupMajor(at::randn({2, 40}), 5, nullptr),
               c10::Error);
}

// int8 weights with per-row dynamic activation scales: each term carries two
// roundings of <= 1/254 of its row's or channel's largest value.
TEST(LinearTest, Int8IsWithinItsQuantizationOfTheDoubleProduct) {
  c10::InferenceMode inference_mode;
  at::manual_seed(4);
  const at::Tensor weight = at::randn({96, 64}) * 0.1;
  const at::Tensor bias = at::randn({96});
  const Linear linear(weight, bias, Precision::kInt8);
  // oneDNN's kernel ("onednn:brg:avx512_core_amx_int8" on AMX), or ours
  // where the CPU has no int32 dot products.
  const bool ours = !HostCpuFeatures().int8_dot && !HostCpuFeatures().amx_int8 &&
                    HostCpuFeatures().avx2_fma;
  EXPECT_EQ(linear.implementation().rfind(ours ? "docsparse:int8_gemm_avx2" : "onednn:", 0), 0u)
      << linear.implementation();
  for (int64_t rows : {1, 37, 700}) {
    const at::Tensor x = at::randn({rows, 64});
    const at::Tensor want =
        at::linear(x.to(at::kDouble), weight.to(at::kDouble), bias.to(at::kDouble));
    const at::Tensor got = linear(x);
    // |x| <= ~4, |w| <= ~0.4: 64 terms, each off by <= ~(4·0.4)/127 at worst,
    // typically far less; bf16 output rounding adds 2^-9 relative.
    EXPECT_LT(MaxError(got, want), 0.15) << rows << " rows";
    EXPECT_LT((got.to(at::kDouble) - want).abs().mean().item<double>(), 0.02);
    // Far above fp32's ~1e-6: the products really ran in int8.
    EXPECT_GT(MaxError(got, want), 1e-3);
  }
}

TEST(LinearTest, BiasLeftToTheCallerIsLeftOut) {
  c10::InferenceMode inference_mode;
  at::manual_seed(5);
  const at::Tensor weight = at::randn({32, 16});
  const at::Tensor bias = at::randn({32}) + 10;
  const at::Tensor x = at::randn({9, 16});
  for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
    const Linear with(weight, bias, precision);
    const Linear without(weight, bias, precision, Linear::Bias::kByCaller);
    EXPECT_EQ(without.bias().scalar_type(), with(x).scalar_type());
    const at::Tensor sum = without(x).to(at::kFloat) + without.bias().to(at::kFloat);
    EXPECT_LT(MaxError(sum, with(x).to(at::kDouble)), precision == Precision::kBf16 ? 0.1 : 1e-5);
    EXPECT_GT(MaxError(without(x), with(x).to(at::kDouble)), 5.0);
  }
}

// The activation inside the product (a oneDNN post-op on the fp32 sum) and,
// for int8, after it: each against the double product through the exact
// function, and far from the product without it.
TEST(LinearTest, ActivationAppliesToTheBiasedSumInEveryPrecision) {
  c10::InferenceMode inference_mode;
  at::manual_seed(6);
  const at::Tensor weight = at::randn({64, 48}) * 0.2;
  const at::Tensor bias = at::randn({64});
  const at::Tensor x = at::randn({37, 48});
  const at::Tensor sum =
      at::linear(x.to(at::kDouble), weight.to(at::kDouble), bias.to(at::kDouble));
  struct Case {
    Activation activation;
    at::Tensor want;
  };
  const Case cases[] = {{Activation::kGelu, at::gelu(sum)},
                        {Activation::kGeluNew, at::gelu(sum, "tanh")},
                        {Activation::kRelu, at::relu(sum)}};
  for (const Case& c : cases) {
    for (Precision precision : {Precision::kFp32, Precision::kBf16, Precision::kInt8}) {
      const Linear linear(weight, bias, precision, Linear::Bias::kInProduct, c.activation);
      const at::Tensor got = linear(x);
      const double tolerance = precision == Precision::kFp32   ? 1e-5
                               : precision == Precision::kBf16 ? 0.05
                                                               : 0.15;
      EXPECT_LT(MaxError(got, c.want), tolerance)
          << static_cast<int>(c.activation) << " " << PrecisionName(precision);
      EXPECT_GT(MaxError(got, sum), 0.5) << "the activation was not applied";
    }
  }
  // gelu and gelu_new differ by up to ~5e-4 near |x| = 2: fp32 tells them apart.
  const at::Tensor erf_form =
      Linear(weight, bias, Precision::kFp32, Linear::Bias::kInProduct, Activation::kGelu)(x);
  EXPECT_LT(MaxError(erf_form, at::gelu(sum)), 1e-5);
  EXPECT_GT(MaxError(erf_form, at::gelu(sum, "tanh")), 1e-4);
}

// int8 with an activation inside (on int8_gemm_avx2's CPUs: bias and GELU as
// one pass after the product) is the activation of the same int8 product,
// with a bias or without one.
TEST(LinearTest, Int8ActivationIsTheActivationOfTheInt8Product) {
  c10::InferenceMode inference_mode;
  at::manual_seed(7);
  const at::Tensor weight = at::randn({40, 56}) * 0.2;
  const at::Tensor x = at::randn({23, 56});
  for (const at::Tensor& bias : {at::randn({40}), at::Tensor()}) {
    const at::Tensor product = Linear(weight, bias, Precision::kInt8)(x);
    for (Activation activation : {Activation::kGelu, Activation::kGeluNew, Activation::kRelu}) {
      const at::Tensor got =
          Linear(weight, bias, Precision::kInt8, Linear::Bias::kInProduct, activation)(x);
      EXPECT_LT(MaxError(got, ApplyActivation(product, activation).to(at::kDouble)), 1e-5)
          << static_cast<int>(activation) << (bias.defined() ? " with bias" : " without bias");
    }
  }
}

TEST(LinearTest, ConcurrentCallsWithDifferentRowCountsGiveTheSameBits) {
  c10::InferenceMode inference_mode;
  at::manual_seed(7);
  for (Precision precision : {Precision::kFp32, Precision::kBf16}) {
    const Linear linear(at::randn({128, 64}), at::randn({128}), precision);
    std::vector<at::Tensor> inputs, alone;
    for (int64_t rows : {3, 64, 100, 257}) {
      inputs.push_back(at::randn({rows, 64}));
      alone.push_back(linear(inputs.back()));
    }
    std::vector<at::Tensor> together(inputs.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < inputs.size(); ++i) {
      threads.emplace_back([&, i] {
        c10::InferenceMode thread_mode;
        for (int repeat = 0; repeat < 20; ++repeat) together[i] = linear(inputs[i]);
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (size_t i = 0; i < inputs.size(); ++i) EXPECT_TRUE(at::equal(together[i], alone[i])) << i;
  }
}

}  // namespace
}  // namespace docsparse
