// Brute force: for random LSG configs and lengths, the query-key pairs a plan
// computes equal those of an explicit mask built from the definition (the
// reference's pad / unfold / slice of the derived sequence, simulated on
// index arrays), and the cost model's density equals that mask's density.
#include "model/attention/lsg_planner.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <utility>

#include "model/attention/cost_model.h"

namespace docsparse {
namespace {

using Pair = std::pair<int32_t, int32_t>;  // (query row, extended key)

// The derived positions block j sees, by simulating the reference's
// reshape_to_sparse_block on the positions 0..derived-1: pad by s on both
// sides (-1), unfold windows of 6·S with step st, drop the last window when
// st is odd, and take [u-S, u) and [size-u', size-u'+S) of window j.
std::vector<int32_t> ReferenceSparseWindow(const LsgConfig& c, int32_t derived, int32_t j) {
  const int32_t st = c.SparseStep();
  const int32_t odd = st % 2;
  const int32_t size = 6 * c.sparse_block_size;
  const int32_t s = (size - st) / 2 + odd;
  std::vector<int32_t> padded(s, -1);
  for (int32_t p = 0; p < derived; ++p) padded.push_back(p);
  padded.insert(padded.end(), s, -1);
  const int32_t start = j * st;  // window j of the unfold
  const int32_t u = (size - 3 * st) / 2 + odd;
  const int32_t u2 = u + odd;
  std::vector<int32_t> out;
  for (int32_t r = u - c.sparse_block_size; r < u; ++r) out.push_back(padded[start + r]);
  for (int32_t r = size - u2; r < size - u2 + c.sparse_block_size; ++r) {
    out.push_back(padded[start + r]);
  }
  return out;
}

std::set<Pair> DefinitionPairs(const LsgConfig& c, const LsgLayout& l,
                               const std::vector<uint8_t>& valid_head) {
  std::set<Pair> pairs;
  const int32_t g = l.global;
  auto token_ok = [&](int32_t k) {
    return k >= 0 && k < l.tokens && !(l.first_token_masked && k == 0);
  };
  for (int32_t q = 0; q < g + l.tokens; ++q) {
    const bool global_query = q < g;
    for (int32_t k = 0; k < g; ++k) pairs.insert({q, k});
    if (global_query || l.full) {
      for (int32_t k = 0; k < l.tokens; ++k) {
        if (token_ok(k)) pairs.insert({q, l.TokenKey(k)});
      }
      continue;
    }
    const int32_t j = (q - g) / c.block_size;
    for (int32_t k = 0; k < l.tokens; ++k) {
      if (token_ok(k) && std::abs(k / c.block_size - j) <= 1) pairs.insert({q, l.TokenKey(k)});
    }
    if (l.derived_keys > 0) {
      for (int32_t p : ReferenceSparseWindow(c, l.derived_keys, j)) {
        if (p >= 0 && valid_head[p]) pairs.insert({q, l.DerivedKey(p)});
      }
    }
  }
  return pairs;
}

std::set<Pair> PlanPairs(const LsgPlan& plan, int head, int32_t real_rows, size_t* duplicates) {
  std::set<Pair> pairs;
  const int32_t blocks = static_cast<int32_t>(plan.query_block_starts.size()) - 1;
  for (int32_t b = 0; b < blocks; ++b) {
    const int32_t row = head * blocks + b;
    for (int32_t q = plan.query_block_starts[b];
         q < std::min(plan.query_block_starts[b + 1], real_rows); ++q) {
      for (int32_t s = plan.span_offsets[row]; s < plan.span_offsets[row + 1]; ++s) {
        for (int32_t k = 0; k < plan.spans[s].length; ++k) {
          if (!pairs.insert({q, plan.spans[s].begin + k}).second) ++*duplicates;
        }
      }
    }
  }
  return pairs;
}

LsgConfig RandomConfig(std::mt19937& rng) {
  for (;;) {
    LsgConfig c;
    const int blocks[] = {2, 4, 6, 8, 16};
    c.block_size = blocks[rng() % 5];
    const int factors[] = {0, 1, 2, 4, 8};
    c.sparsity_factor = factors[rng() % 5];
    c.sparse_block_size = static_cast<int>(rng() % 10);
    const LsgSparsity types[] = {LsgSparsity::kNone,        LsgSparsity::kNorm,
                                 LsgSparsity::kPooling,     LsgSparsity::kStride,
                                 LsgSparsity::kBlockStride, LsgSparsity::kBosPooling};
    c.sparsity_type = types[rng() % 6];
    c.num_global_tokens = 1 + static_cast<int>(rng() % 4);
    c.mask_first_token = rng() % 3 == 0;
    if (ValidateLsgConfig(c, "random").ok()) return c;
  }
}

TEST(LsgPlannerTest, PlansEqualTheDefinitionAndDensityIsExact) {
  std::mt19937 rng(20261121);
  int sparse_cases = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const LsgConfig c = RandomConfig(rng);
    const int32_t tokens = 1 + static_cast<int32_t>(rng() % 90);
    const int heads = 1 + static_cast<int>(rng() % 3);
    const LsgLayout layout = LayoutLsgSequence(c, c.num_global_tokens, tokens);
    std::vector<uint8_t> valid(static_cast<size_t>(heads) * layout.derived_keys);
    for (uint8_t& v : valid) v = rng() % 4 != 0;
    const bool padding_rows = rng() % 2 == 0;
    const LsgPlan plan = PlanLsgSequence(c, layout, heads, valid, padding_rows);
    SCOPED_TRACE(::testing::Message()
                 << "trial " << trial << " B=" << c.block_size << " S=" << c.sparse_block_size
                 << " f=" << c.sparsity_factor << " type=" << LsgSparsityName(c.sparsity_type)
                 << " G=" << c.num_global_tokens << " n=" << tokens);
    const int32_t real_rows = layout.global + tokens;
    EncoderShape shape{1, heads, 8, 8 * heads, 16};
    CostAccount account(shape);
    ItemAttentionCost cost;
    int64_t mask_pairs = 0;
    for (int h = 0; h < heads; ++h) {
      const std::vector<uint8_t> head_valid(valid.begin() + h * layout.derived_keys,
                                            valid.begin() + (h + 1) * layout.derived_keys);
      size_t duplicates = 0;
      const std::set<Pair> planned = PlanPairs(plan, h, real_rows, &duplicates);
      const std::set<Pair> defined = DefinitionPairs(c, layout, head_valid);
      ASSERT_EQ(duplicates, 0u) << "head " << h;
      ASSERT_EQ(planned, defined) << "head " << h;
      ASSERT_EQ(plan.head_edges[h], static_cast<int64_t>(defined.size()));
      mask_pairs += static_cast<int64_t>(defined.size());
      cost.head_edges.push_back(plan.head_edges[h]);
    }
    account.AddAttention(0, cost);
    account.AddSequence(real_rows, real_rows);
    // Exact: both are ratios of the same integers.
    EXPECT_EQ(account.MeanDensity(), static_cast<double>(mask_pairs) /
                                         (static_cast<double>(real_rows) * real_rows * heads));
    sparse_cases += !layout.full && layout.derived_keys > 0;
  }
  EXPECT_GT(sparse_cases, 100);
}

}  // namespace
}  // namespace docsparse
