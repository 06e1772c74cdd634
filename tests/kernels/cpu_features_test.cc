// The instruction-set cap (DOCSPARSE_MAX_CPU_ISA): each level removes what
// lies above it and never adds what the CPU lacks; unknown names are
// refused.
#include "kernels/cpu_features.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace docsparse {
namespace {

CpuFeatures Everything() {
  CpuFeatures all;
  all.avx2_fma = all.avx512f = all.avx512bw_vl = all.avx512dq = all.avx512_bf16 = true;
  all.amx_bf16 = all.amx_int8 = all.int8_dot = true;
  return all;
}

TEST(CpuFeaturesTest, EachCapRemovesWhatLiesAboveIt) {
  CpuFeatures f = Everything();
  ASSERT_TRUE(CapCpuFeatures("amx", &f));
  EXPECT_EQ(IsaName(f), "amx");
  ASSERT_TRUE(CapCpuFeatures("", &f));
  EXPECT_EQ(IsaName(f), "amx");

  f = Everything();
  ASSERT_TRUE(CapCpuFeatures("avx512_bf16", &f));
  EXPECT_EQ(IsaName(f), "avx512_bf16");
  EXPECT_FALSE(f.amx_int8);
  EXPECT_TRUE(HasNativeBf16(f));

  f = Everything();
  ASSERT_TRUE(CapCpuFeatures("avx512", &f));
  EXPECT_EQ(IsaName(f), "avx512");
  EXPECT_FALSE(HasNativeBf16(f));
  EXPECT_TRUE(f.avx512bw_vl && f.avx512dq && f.int8_dot);

  f = Everything();
  ASSERT_TRUE(CapCpuFeatures("avx2", &f));
  EXPECT_EQ(IsaName(f), "avx2");
  EXPECT_FALSE(f.avx512f || f.avx512bw_vl || f.avx512dq || f.int8_dot || f.amx_int8);

  f = Everything();
  ASSERT_TRUE(CapCpuFeatures("baseline", &f));
  EXPECT_EQ(IsaName(f), "baseline");
}

TEST(CpuFeaturesTest, ACapNeverAddsWhatTheCpuLacks) {
  CpuFeatures none;
  ASSERT_TRUE(CapCpuFeatures("avx2", &none));
  EXPECT_FALSE(none.avx2_fma);
  CpuFeatures avx2;
  avx2.avx2_fma = true;
  ASSERT_TRUE(CapCpuFeatures("avx512_bf16", &avx2));
  EXPECT_EQ(IsaName(avx2), "avx2");
}

TEST(CpuFeaturesTest, UnknownNamesAreRefusedAndChangeNothing) {
  for (const char* name : {"AVX2", "avx", "sse4", "amx_bf16", "avx512f"}) {
    CpuFeatures f = Everything();
    EXPECT_FALSE(CapCpuFeatures(name, &f)) << name;
    EXPECT_EQ(IsaName(f), "amx") << name;
  }
}

// An unknown value stops the process at the first use, naming the variable
// and the values it takes (a cap that silently did nothing would make every
// figure measured under it wrong). "threadsafe" death tests re-run the
// binary, so the child's features are read afresh.
TEST(CpuFeaturesDeathTest, UnknownCapStopsTheProcessNamingTheVariable) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv(kMaxCpuIsaVariable, "avx3", 1);
        HostCpuFeatures();
      },
      ::testing::ExitedWithCode(2),
      "DOCSPARSE_MAX_CPU_ISA=avx3: expected amx, avx512_bf16, avx512, avx2 or baseline");
}

}  // namespace
}  // namespace docsparse
