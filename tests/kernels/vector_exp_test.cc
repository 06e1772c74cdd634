#include "kernels/vector_exp.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu_features.h"

// GCC 12 warns inside its own AVX-512 headers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace docsparse {
namespace {

__attribute__((target("avx512f"))) float ExpNonPositiveLane(float x) {
  float out[16];
  _mm512_storeu_ps(out, ExpNonPositive512(_mm512_set1_ps(x)));
  return out[0];
}

TEST(VectorExpTest, ExpNonPositiveIsWithin1e5OfExpAndUnderflowsToZero) {
  if (!HostCpuFeatures().avx512f) GTEST_SKIP() << "no AVX-512 on this CPU";
  double worst = 0;
  for (double x = 0; x >= -87; x -= 0.00731) {
    const double want = std::exp(x);
    worst = std::max(worst, std::fabs(ExpNonPositiveLane(static_cast<float>(x)) - want) / want);
  }
  EXPECT_LT(worst, 1e-5);
  EXPECT_EQ(ExpNonPositiveLane(0.0f), 1.0f);
  EXPECT_EQ(ExpNonPositiveLane(-200.0f), 0.0f);
  EXPECT_EQ(ExpNonPositiveLane(-1e30f), 0.0f);
}

__attribute__((target("avx2,fma"))) float ExpNonPositive256Lane(float x) {
  float out[8];
  _mm256_storeu_ps(out, ExpNonPositive256(_mm256_set1_ps(x)));
  return out[0];
}

TEST(VectorExpTest, ExpNonPositive256IsWithin1e5OfExpAndFloorsAtTheSmallestNormals) {
  if (!HostCpuFeatures().avx2_fma) GTEST_SKIP() << "no AVX2+FMA on this CPU";
  double worst = 0;
  for (double x = 0; x >= -87; x -= 0.00731) {
    const double want = std::exp(x);
    worst = std::max(worst, std::fabs(ExpNonPositive256Lane(static_cast<float>(x)) - want) / want);
  }
  EXPECT_LT(worst, 1e-5);
  EXPECT_EQ(ExpNonPositive256Lane(0.0f), 1.0f);
  // Clamped at 2^-126: a masked score's weight is at most 1.7e-38 (0 under
  // flush-to-zero where the polynomial's factor is below 1).
  EXPECT_LE(ExpNonPositive256Lane(-200.0f), 1.7e-38f);
  EXPECT_LE(ExpNonPositive256Lane(-1e30f), 1.7e-38f);
  EXPECT_GE(ExpNonPositive256Lane(-1e30f), 0.0f);
}

__attribute__((target("avx512f,avx512dq"))) float Exp2ForBf16Lane(float t) {
  float out[16];
  _mm512_storeu_ps(out, Exp2ForBf16_512(_mm512_set1_ps(t)));
  return out[0];
}

TEST(VectorExpTest, Exp2ForBf16IsWithinATwentiethOfBf16sStepAndUnderflowsToZero) {
  const CpuFeatures& cpu = HostCpuFeatures();
  if (!cpu.avx512f || !cpu.avx512dq) GTEST_SKIP() << "no AVX-512 DQ on this CPU";
  double worst = 0;
  for (double t = 0; t >= -120; t -= 0.00377) {
    const double want = std::exp2(t);
    worst = std::max(worst, std::fabs(Exp2ForBf16Lane(static_cast<float>(t)) - want) / want);
  }
  EXPECT_LT(worst, 1e-4);  // bf16 rounds to within 2^-9 = 2e-3
  EXPECT_NEAR(Exp2ForBf16Lane(0.0f), 1.0f, 1e-4);
  EXPECT_EQ(Exp2ForBf16Lane(-1000.0f), 0.0f);  // the AMX kernel's padding exponent
}

}  // namespace
}  // namespace docsparse
