// The edge-list executor against a two-pass softmax in double over the same
// edges: odd shapes, empty rows, padded batches, both instruction sets, and
// thread-count independence; and the bf16 executor against the same
// reference on bf16-rounded inputs, in place in an interleaved projection.
#include "kernels/edge_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/edge_attention_bf16.h"

namespace docsparse {
namespace {

struct Problem {
  int batch, heads, q_len, k_len, head_dim;
  std::vector<float> q, k, v;
  // Per (item, head): CSR over that item's `rows` real queries.
  std::vector<std::vector<int64_t>> offsets;
  std::vector<std::vector<int32_t>> keys;
  std::vector<int32_t> rows;
  // Per (item, head): a logit bias per edge, or empty.
  std::vector<std::vector<float>> bias;
};

// Random q, k, v; item b has lengths[b] real tokens (the rest is padding, with
// garbage values that must not matter). Each real query gets a random set of
// distinct real keys with density `density`; about one row in `empty_every`
// is left empty.
Problem MakeProblem(int heads, int seq, int head_dim, const std::vector<int>& lengths,
                    double density, int empty_every, uint32_t seed) {
  Problem p{
      static_cast<int>(lengths.size()), heads, seq, seq, head_dim, {}, {}, {}, {}, {}, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  // q and k at twice unit scale spread the scores (several chunk maxima per
  // row exercise the online rescaling); v at unit scale, as in a model.
  for (std::vector<float>* x : {&p.q, &p.k, &p.v}) {
    x->resize(static_cast<size_t>(p.batch) * heads * seq * head_dim);
    const float scale = x == &p.v ? 1.0f : 2.0f;
    for (float& value : *x) value = scale * normal(rng);
  }
  std::uniform_real_distribution<double> uniform(0, 1);
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      std::vector<int64_t> offsets = {0};
      std::vector<int32_t> keys;
      for (int i = 0; i < lengths[b]; ++i) {
        const bool empty = empty_every > 0 && static_cast<int>(rng() % empty_every) == 0;
        for (int j = 0; j < lengths[b] && !empty; ++j) {
          if (uniform(rng) < density) keys.push_back(j);
        }
        // Unsorted rows must work too.
        std::shuffle(keys.begin() + offsets.back(), keys.end(), rng);
        offsets.push_back(static_cast<int64_t>(keys.size()));
      }
      p.offsets.push_back(std::move(offsets));
      p.keys.push_back(std::move(keys));
      p.rows.push_back(lengths[b]);
    }
  }
  return p;
}

// The CSR views of every (item, head).
std::vector<EdgeListView> Views(const Problem& p) {
  std::vector<EdgeListView> views;
  for (size_t i = 0; i < p.keys.size(); ++i) {
    views.push_back({p.offsets[i].data(), p.keys[i].data(), p.rows[i],
                     p.bias.empty() ? nullptr : p.bias[i].data()});
  }
  return views;
}

std::vector<float> RunKernel(const Problem& p, int threads, EdgeKernelIsa isa) {
  std::vector<float> out(p.q.size(), -7.0f);  // every element must be written
  const std::vector<EdgeListView> views = Views(p);
  EdgeAttentionParams params{p.q.data(),
                             p.k.data(),
                             p.v.data(),
                             out.data(),
                             views.data(),
                             p.batch,
                             p.heads,
                             p.q_len,
                             p.k_len,
                             p.head_dim,
                             1.0f / std::sqrt(static_cast<float>(p.head_dim)),
                             isa};
  EdgeAttentionCpu(params, threads);
  return out;
}

// Two-pass softmax in double; zeros for empty rows and padding queries.
std::vector<float> Reference(const Problem& p) {
  std::vector<float> out(p.q.size(), 0.0f);
  for (int bh = 0; bh < p.batch * p.heads; ++bh) {
    for (int i = 0; i < p.rows[bh]; ++i) {
      const int64_t begin = p.offsets[bh][i], end = p.offsets[bh][i + 1];
      if (begin == end) continue;
      const float* q = &p.q[(static_cast<size_t>(bh) * p.q_len + i) * p.head_dim];
      std::vector<double> scores;
      for (int64_t e = begin; e < end; ++e) {
        const float* k = &p.k[(static_cast<size_t>(bh) * p.k_len + p.keys[bh][e]) * p.head_dim];
        double dot = 0;
        for (int d = 0; d < p.head_dim; ++d) dot += static_cast<double>(q[d]) * k[d];
        scores.push_back(dot / std::sqrt(static_cast<double>(p.head_dim)) +
                         (p.bias.empty() ? 0.0 : p.bias[bh][e]));
      }
      const double max_score = *std::max_element(scores.begin(), scores.end());
      double total = 0;
      for (double& s : scores) total += (s = std::exp(s - max_score));
      for (int d = 0; d < p.head_dim; ++d) {
        double acc = 0;
        for (int64_t e = begin; e < end; ++e) {
          acc += scores[e - begin] *
                 p.v[(static_cast<size_t>(bh) * p.k_len + p.keys[bh][e]) * p.head_dim + d];
        }
        out[(static_cast<size_t>(bh) * p.q_len + i) * p.head_dim + d] =
            static_cast<float>(acc / total);
      }
    }
  }
  return out;
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(a[i] - b[i])));
  }
  return worst;
}

TEST(EdgeAttentionTest, PaddedBatchWithEmptyRowsMatchesReference) {
  // Longer rows than one chunk (64 keys) exercise the online rescaling.
  const Problem p = MakeProblem(3, 150, 32, {150, 77, 1}, 0.6, 5, 1);
  const std::vector<float> want = Reference(p);
  EXPECT_LE(MaxAbsDiff(RunKernel(p, 2, EdgeKernelIsa::kAuto), want), 1e-5);
  EXPECT_LE(MaxAbsDiff(RunKernel(p, 2, EdgeKernelIsa::kPortable), want), 1e-5);
}

TEST(EdgeAttentionTest, OddHeadDimsAndSparseRowsMatchReference) {
  for (int head_dim : {1, 7, 8, 16, 24, 32, 40, 64, 128}) {
    const Problem p = MakeProblem(2, 67, head_dim, {67, 40}, 0.08, 7, 10 + head_dim);
    const std::vector<float> want = Reference(p);
    EXPECT_LE(MaxAbsDiff(RunKernel(p, 3, EdgeKernelIsa::kAuto), want), 1e-5) << head_dim;
    EXPECT_LE(MaxAbsDiff(RunKernel(p, 1, EdgeKernelIsa::kPortable), want), 1e-5) << head_dim;
  }
}

TEST(EdgeAttentionTest, EmptyRowsAndPaddingQueriesGiveZeros) {
  Problem p = MakeProblem(1, 10, 8, {10, 6}, 1.0, 0, 3);
  // Item 0: rows 2 and 5 empty.
  std::vector<int64_t>& offsets = p.offsets[0];
  std::vector<int32_t> keys;
  std::vector<int64_t> new_offsets = {0};
  for (int i = 0; i < 10; ++i) {
    if (i != 2 && i != 5) {
      keys.insert(keys.end(), p.keys[0].begin() + offsets[i], p.keys[0].begin() + offsets[i + 1]);
    }
    new_offsets.push_back(static_cast<int64_t>(keys.size()));
  }
  p.keys[0] = keys;
  p.offsets[0] = new_offsets;
  const std::vector<float> out = RunKernel(p, 1, EdgeKernelIsa::kAuto);
  for (int d = 0; d < 8; ++d) {
    EXPECT_EQ(out[2 * 8 + d], 0.0f);
    EXPECT_EQ(out[5 * 8 + d], 0.0f);
    for (int i = 6; i < 10; ++i) EXPECT_EQ(out[(10 + i) * 8 + d], 0.0f) << "padding query " << i;
  }
  EXPECT_LE(MaxAbsDiff(out, Reference(p)), 1e-5);
}

TEST(EdgeAttentionTest, SingleEdgeCopiesItsValue) {
  Problem p = MakeProblem(1, 5, 16, {5}, 1.0, 0, 4);
  p.offsets[0] = {0, 1, 1, 1, 1, 1};
  p.keys[0] = {3};
  const std::vector<float> out = RunKernel(p, 1, EdgeKernelIsa::kAuto);
  for (int d = 0; d < 16; ++d) EXPECT_FLOAT_EQ(out[d], p.v[3 * 16 + d]);
}

TEST(EdgeAttentionTest, ThreadCountDoesNotChangeBits) {
  const Problem p = MakeProblem(4, 90, 32, {90, 31}, 0.3, 9, 5);
  for (EdgeKernelIsa isa : {EdgeKernelIsa::kAuto, EdgeKernelIsa::kPortable}) {
    const std::vector<float> one = RunKernel(p, 1, isa);
    EXPECT_EQ(one, RunKernel(p, 2, isa));
    EXPECT_EQ(one, RunKernel(p, 5, isa));
  }
}

TEST(EdgeAttentionTest, LogitBiasAddsToEachEdgesScore) {
  Problem p = MakeProblem(2, 90, 24, {90, 41}, 0.5, 7, 3);
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> uniform(0, 6);
  for (const std::vector<int32_t>& keys : p.keys) {
    std::vector<float> bias(keys.size());
    for (float& b : bias) b = uniform(rng);
    p.bias.push_back(std::move(bias));
  }
  const std::vector<float> want = Reference(p);
  EXPECT_LE(MaxAbsDiff(RunKernel(p, 2, EdgeKernelIsa::kAuto), want), 1e-5);
  EXPECT_LE(MaxAbsDiff(RunKernel(p, 2, EdgeKernelIsa::kPortable), want), 1e-5);
  for (const int head_dim : {16, 32, 40, 64}) {  // the fixed-size kernels and the generic one
    Problem q = MakeProblem(2, 70, head_dim, {70, 33}, 0.6, 0, 5);
    for (const std::vector<int32_t>& keys : q.keys) {
      std::vector<float> bias(keys.size());
      for (float& b : bias) b = uniform(rng);
      q.bias.push_back(std::move(bias));
    }
    EXPECT_LE(MaxAbsDiff(RunKernel(q, 2, EdgeKernelIsa::kAuto), Reference(q)), 1e-5) << head_dim;
  }
  p.bias.clear();
  EXPECT_GT(MaxAbsDiff(RunKernel(p, 2, EdgeKernelIsa::kAuto), want), 1e-2)
      << "the biases move the output";
}

// --- The bf16 executor ---

// Rounds q, k and v to bf16 values in place; returns their bits.
struct Bf16Operands {
  std::vector<uint16_t> q, k, v;
};
Bf16Operands RoundToBf16(Problem* p) {
  Bf16Operands bits;
  const std::pair<std::vector<float>*, std::vector<uint16_t>*> operands[] = {
      {&p->q, &bits.q}, {&p->k, &bits.k}, {&p->v, &bits.v}};
  for (const auto& [values, out] : operands) {
    for (float& value : *values) {
      out->push_back(FloatToBf16(value));
      value = Bf16ToFloat(out->back());
    }
  }
  return bits;
}

// The bf16 executor on contiguous operands; the output widened to fp32.
std::vector<float> RunBf16(const Problem& p, const Bf16Operands& bits, int threads) {
  std::vector<uint16_t> out(p.q.size(), 0x7fc0);  // NaN: every element must be written
  const std::vector<EdgeListView> views = Views(p);
  EdgeAttentionBf16Params params{bits.q.data(),
                                 bits.k.data(),
                                 bits.v.data(),
                                 out.data(),
                                 views.data(),
                                 p.batch,
                                 p.heads,
                                 p.q_len,
                                 p.k_len,
                                 p.head_dim,
                                 1.0f / std::sqrt(static_cast<float>(p.head_dim))};
  EdgeAttentionCpuBf16(params, threads);
  std::vector<float> widened;
  for (uint16_t x : out) widened.push_back(Bf16ToFloat(x));
  return widened;
}

// What is left against the double reference on the same bf16 inputs is the
// bf16 rounding of the output (at most 2^-8 relative: half a unit in the
// last of its 8 significant bits) and fp32 sums.
void ExpectWithinBf16(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  double total = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double error = std::fabs(static_cast<double>(got[i]) - want[i]);
    ASSERT_LE(error, 4.5e-3 * std::fabs(want[i]) + 1e-5) << "element " << i << " of " << want[i];
    total += error;
  }
  EXPECT_LE(total / static_cast<double>(got.size()), 1e-3);
}

bool SkipWithoutBf16() { return !EdgeAttentionBf16Available(32); }

TEST(EdgeAttentionBf16Test, MatchesReferenceOnEveryHeadDim) {
  if (SkipWithoutBf16()) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> uniform(0, 6);
  for (int head_dim : {32, 64, 96, 128}) {
    // Rows of up to 150 edges (three chunks of 64, a last group of fewer
    // than 16 keys), empty rows, a padded batch, a logit bias on every edge.
    Problem p = MakeProblem(3, 150, head_dim, {150, 77, 1}, 0.7, 5, 20 + head_dim);
    for (const std::vector<int32_t>& keys : p.keys) {
      std::vector<float> bias(keys.size());
      for (float& b : bias) b = uniform(rng);
      p.bias.push_back(std::move(bias));
    }
    const Bf16Operands bits = RoundToBf16(&p);
    SCOPED_TRACE(head_dim);
    ExpectWithinBf16(RunBf16(p, bits, 2), Reference(p));
  }
}

TEST(EdgeAttentionBf16Test, SparseRowsOfEveryLengthMatchReference) {
  if (SkipWithoutBf16()) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  // Density 0.08 over 67 keys: rows of 0 to ~15 edges, every partial group.
  Problem p = MakeProblem(2, 67, 32, {67, 40}, 0.08, 7, 9);
  const Bf16Operands bits = RoundToBf16(&p);
  ExpectWithinBf16(RunBf16(p, bits, 3), Reference(p));
}

TEST(EdgeAttentionBf16Test, EmptyRowsAndPaddingQueriesGiveZeros) {
  if (SkipWithoutBf16()) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  Problem p = MakeProblem(1, 12, 64, {12, 5}, 1.0, 0, 3);
  p.offsets[0] = {0, 12, 12, 24, 36, 48, 60, 72, 84, 96, 108, 120, 132};
  p.keys[0].resize(132);  // row 1 empty
  const Bf16Operands bits = RoundToBf16(&p);
  const std::vector<float> out = RunBf16(p, bits, 2);
  for (int d = 0; d < 64; ++d) {
    EXPECT_EQ(out[64 + d], 0.0f) << "empty row";
    for (int i = 5; i < 12; ++i) EXPECT_EQ(out[(12 + i) * 64 + d], 0.0f) << "padding query " << i;
  }
  ExpectWithinBf16(out, Reference(p));
}

TEST(EdgeAttentionBf16Test, ThreadCountDoesNotChangeBits) {
  if (SkipWithoutBf16()) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  Problem p = MakeProblem(4, 90, 32, {90, 31}, 0.3, 9, 5);
  const Bf16Operands bits = RoundToBf16(&p);
  const std::vector<float> one = RunBf16(p, bits, 1);
  EXPECT_EQ(one, RunBf16(p, bits, 2));
  EXPECT_EQ(one, RunBf16(p, bits, 5));
}

// Read in place from a projection [batch, len, 3, heads, head_dim] and
// written into [batch, len, heads, head_dim + 8] (the encoder's layouts,
// with a spare column per row that must stay untouched), the executor gives
// the contiguous run's bits.
TEST(EdgeAttentionBf16Test, InterleavedProjectionGivesContiguousBits) {
  if (SkipWithoutBf16()) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  Problem p = MakeProblem(3, 70, 32, {70, 45}, 0.4, 6, 11);
  const Bf16Operands bits = RoundToBf16(&p);
  const std::vector<float> contiguous = RunBf16(p, bits, 2);
  const int d = p.head_dim, heads = p.heads, len = p.q_len;
  const int64_t width = int64_t{3} * heads * d, out_row = int64_t{heads} * (d + 8);
  std::vector<uint16_t> qkv(static_cast<size_t>(p.batch) * len * width);
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < len; ++i) {
        const size_t from = ((static_cast<size_t>(b) * heads + h) * len + i) * d;
        uint16_t* row = qkv.data() + (int64_t{b} * len + i) * width + int64_t{h} * d;
        std::copy_n(bits.q.begin() + from, d, row);
        std::copy_n(bits.k.begin() + from, d, row + int64_t{heads} * d);
        std::copy_n(bits.v.begin() + from, d, row + 2 * int64_t{heads} * d);
      }
    }
  }
  std::vector<uint16_t> out(static_cast<size_t>(p.batch) * len * out_row, 0x1234);
  const std::vector<EdgeListView> views = Views(p);
  const RowLayout in_layout{int64_t{len} * width, d, width};
  EdgeAttentionBf16Params params{qkv.data(),
                                 qkv.data() + int64_t{heads} * d,
                                 qkv.data() + 2 * int64_t{heads} * d,
                                 out.data(),
                                 views.data(),
                                 p.batch,
                                 heads,
                                 len,
                                 len,
                                 d,
                                 1.0f / std::sqrt(static_cast<float>(d)),
                                 in_layout,
                                 in_layout,
                                 in_layout,
                                 RowLayout{int64_t{len} * out_row, d + 8, out_row}};
  EdgeAttentionCpuBf16(params, 2);
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < len; ++i) {
        const uint16_t* row = out.data() + (int64_t{b} * len + i) * out_row + int64_t{h} * (d + 8);
        for (int c = 0; c < d; ++c) {
          ASSERT_EQ(Bf16ToFloat(row[c]),
                    contiguous[((static_cast<size_t>(b) * heads + h) * len + i) * d + c])
              << b << " " << h << " " << i << " " << c;
        }
        for (int c = d; c < d + 8; ++c) ASSERT_EQ(row[c], 0x1234) << "spare column written";
      }
    }
  }
}

TEST(EdgeAttentionBf16Test, AvailableOnlyForWholeVectorsOfPairs) {
  for (int head_dim : {0, 8, 16, 40, 48, 160}) EXPECT_FALSE(EdgeAttentionBf16Available(head_dim));
}

}  // namespace
}  // namespace docsparse
