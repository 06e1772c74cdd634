// Knob choice under budgets (model/attention/lsg_budget.h) for the default model's
// shape and LSG config.
#include "model/attention/lsg_budget.h"

#include <gtest/gtest.h>

#include "model/attention/lsg_attention.h"

namespace docsparse {
namespace {

const EncoderShape kMiniLm{6, 12, 32, 384, 1536};

TEST(LsgBudgetTest, NoCapKeepsTheNativeConfig) {
  const LsgConfig native;
  const LsgKnobChoice choice = ChooseLsgKnobs(native, {6842}, kMiniLm, {});
  EXPECT_TRUE(choice.fits);
  EXPECT_EQ(choice.config.block_size, native.block_size);
  EXPECT_EQ(choice.config.sparse_block_size, native.sparse_block_size);
  EXPECT_EQ(choice.config.sparsity_factor, native.sparsity_factor);
}

TEST(LsgBudgetTest, TighterCapsGiveCheaperPlansThatFit) {
  const LsgConfig native;
  double previous = 1;
  for (double cap : {0.08, 0.04, 0.02, 0.01}) {
    LsgCap lsg_cap;
    lsg_cap.max_density = cap;
    const LsgKnobChoice choice = ChooseLsgKnobs(native, {6842, 3000}, kMiniLm, lsg_cap);
    ASSERT_TRUE(choice.fits) << cap;
    EXPECT_LE(choice.planned_density, cap);
    EXPECT_LE(choice.planned_density, previous);
    previous = choice.planned_density;
    // The planned density is what the planner then computes.
    const LsgConfig applied = ApplyLsgKnobs(native, choice.options);
    EXPECT_EQ(applied.block_size, choice.config.block_size);
    double edges = 0, pairs = 0;
    for (int64_t n : {6842, 3000}) {
      edges += static_cast<double>(LsgPlannedEdges(applied, n, kMiniLm.num_heads));
      pairs += static_cast<double>(n + 1) * (n + 1) * kMiniLm.num_heads;
    }
    EXPECT_DOUBLE_EQ(edges / pairs, choice.planned_density);
  }
}

TEST(LsgBudgetTest, FlopCapAndUnreachableCap) {
  const LsgConfig native;
  LsgCap flops;
  flops.max_attention_gflops = 10;
  const LsgKnobChoice fit = ChooseLsgKnobs(native, {6842}, kMiniLm, flops);
  EXPECT_TRUE(fit.fits);
  EXPECT_LE(fit.planned_attention_gflops, 10);

  LsgCap impossible;
  impossible.max_density = 1e-6;
  const LsgKnobChoice cheapest = ChooseLsgKnobs(native, {6842}, kMiniLm, impossible);
  EXPECT_FALSE(cheapest.fits);
  EXPECT_GT(cheapest.planned_density, 1e-6);
  EXPECT_LT(cheapest.planned_density, fit.planned_density);
  EXPECT_TRUE(ValidateLsgConfig(cheapest.config, "cheapest").ok());
}

}  // namespace
}  // namespace docsparse
