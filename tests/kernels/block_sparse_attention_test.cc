#include "kernels/block_sparse_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/aligned_vector.h"
#include "kernels/bf16.h"
#include "kernels/bf16_attention_executor.h"
#include "kernels/block_sparse_attention_amx.h"
#include "kernels/block_sparse_attention_avx512_bf16.h"
#include "kernels/cpu_features.h"
#include "tests/common/block_sparse_problem.h"

namespace docsparse {
namespace {

using test::MakeProblem;
using test::MakeSlidingProblem;
using test::Problem;
using test::Reference;

std::vector<float> RunKernel(const Problem& p, int threads, KernelIsa isa = KernelIsa::kAuto) {
  std::vector<float> out(p.q.size(), -1.0f);
  AttentionParams params{p.q.data(), p.k.data(),
                         p.v.data(), out.data(),
                         p.batch,    p.heads,
                         p.q_len,    p.k_len,
                         p.head_dim, 1.0f / std::sqrt(static_cast<float>(p.head_dim)),
                         isa};
  BlockSparsePlanView plan{p.blocks(), p.block_starts.data(), p.offsets.data(), p.spans.data(),
                           p.slides.empty() ? nullptr : p.slides.data()};
  BlockSparseAttentionCpu(params, plan, threads);
  return out;
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(got[i] - want[i])));
  }
  EXPECT_LE(worst, 1e-5);
}

// The fp32 executor reading keys from segments (LSG's global, derived and
// token buffers, rows apart by more than head_dim, NaN between them where the
// contiguous copy has keys no span reaches) gives the contiguous keys' bits,
// on every tile path. Spans are random pieces of each segment, longer than
// a key tile in the largest; one item's span runs across two adjacent
// segments, which splits its tiles differently (held to the reference).
TEST(BlockSparseAttentionTest, Fp32KeySegmentsGiveTheContiguousKeysBits) {
  const int k_len = 1100;
  struct Range {
    int begin, count;
  };
  const Range ranges[] = {{0, 1}, {32, 300}, {332, 700}};  // the last two adjacent
  Problem p = MakeProblem(1, 3, 90, k_len, 32, 30, /*dense=*/true, 19);
  p.spans.clear();
  p.offsets = {0};
  std::mt19937 rng(7);
  for (int item = 0; item < p.heads * p.blocks(); ++item) {
    if (item == 1) {
      p.spans.push_back({100, 600});  // across the second and third segments
    } else {
      for (const Range& r : ranges) {
        const int begin = r.begin + static_cast<int>(rng() % 3 == 0 ? 0 : rng() % r.count);
        const int end = rng() % 3 == 0
                            ? r.begin + r.count
                            : begin + 1 + static_cast<int>(rng() % (r.begin + r.count - begin));
        p.spans.push_back({begin, end - begin});
      }
    }
    p.offsets.push_back(static_cast<int32_t>(p.spans.size()));
  }
  const int d = p.head_dim, stride = d + 16;
  std::vector<std::vector<float>> keys, values;
  std::vector<Fp32KeySegment> segments;
  for (const Range& r : ranges) {
    std::vector<float> k(static_cast<size_t>(p.heads) * r.count * stride, std::nanf(""));
    std::vector<float> v = k;
    for (int h = 0; h < p.heads; ++h) {
      for (int row = 0; row < r.count; ++row) {
        const size_t from = (static_cast<size_t>(h) * k_len + r.begin + row) * d;
        const size_t to = (static_cast<size_t>(h) * r.count + row) * stride;
        std::copy_n(p.k.begin() + from, d, k.begin() + to);
        std::copy_n(p.v.begin() + from, d, v.begin() + to);
      }
    }
    keys.push_back(std::move(k));
    values.push_back(std::move(v));
    const RowLayout layout{int64_t{p.heads} * r.count * stride, int64_t{r.count} * stride, stride};
    segments.push_back(
        {r.begin, r.count, keys.back().data(), values.back().data(), layout, layout});
  }
  BlockSparsePlanView plan{p.blocks(), p.block_starts.data(), p.offsets.data(), p.spans.data()};
  const std::vector<float> reference = Reference(p);
  for (const KernelIsa isa : {KernelIsa::kAuto, KernelIsa::kAvx2, KernelIsa::kPortable}) {
    const std::vector<float> contiguous = RunKernel(p, 2, isa);
    std::vector<float> out(p.q.size(), -1.0f);
    AttentionParams params{p.q.data(), nullptr, nullptr, out.data(), p.batch,
                           p.heads,    p.q_len, p.k_len, d,          1.0f / std::sqrt(float(d)),
                           isa};
    params.key_segments = segments.data();
    params.num_key_segments = static_cast<int32_t>(segments.size());
    BlockSparseAttentionCpu(params, plan, 2);
    const size_t item_floats = static_cast<size_t>(p.block_size) * d;
    for (size_t i = 0; i < out.size(); ++i) {
      const bool across = i >= item_floats && i < 2 * item_floats;  // item 1: head 0, block 1
      if (across) {
        ASSERT_NEAR(out[i], reference[i], 1e-5) << "isa " << static_cast<int>(isa) << " at " << i;
      } else {
        ASSERT_EQ(out[i], contiguous[i]) << "isa " << static_cast<int>(isa) << " at " << i;
      }
    }
  }
}

TEST(BlockSparseAttentionTest, DenseSpanMatchesReference) {
  const Problem p = MakeProblem(2, 3, 37, 37, 16, 8, /*dense=*/true, 1);
  ExpectClose(RunKernel(p, 1), Reference(p));
}

TEST(BlockSparseAttentionTest, RandomSpansOddShapesMatchReference) {
  for (uint32_t seed = 0; seed < 6; ++seed) {
    const Problem p = MakeProblem(1 + seed % 3, 2, 29 + seed, 41 + 3 * seed, 7 + seed, 5,
                                  /*dense=*/false, seed + 10);
    ExpectClose(RunKernel(p, 2), Reference(p));
  }
}

TEST(BlockSparseAttentionTest, SimdAndPortablePathsAgreeOnLongSpans) {
  // Head sizes of the tiny fixtures (8), MiniLM (32), 40 (AVX2's tail of 8
  // columns after 16-column blocks), 48 (AVX-512's tail of 16 columns), base
  // models (64); spans longer than one 256-key tile, with 16-key tails;
  // blocks not a multiple of 4 rows. kAuto is AVX-512 on CPUs with it
  // (head_dim a multiple of 16), kAvx2 forces AVX2.
  for (int head_dim : {8, 32, 40, 48, 64}) {
    const Problem p = MakeProblem(2, 2, 70, 700, head_dim, 13, /*dense=*/false, head_dim, 300);
    const std::vector<float> want = Reference(p);
    for (KernelIsa isa : {KernelIsa::kPortable, KernelIsa::kAvx2, KernelIsa::kAuto}) {
      ExpectClose(RunKernel(p, 2, isa), want);
    }
  }
}

TEST(BlockSparseAttentionTest, DenseOverManyTilesMatchesReference) {
  const Problem p = MakeProblem(1, 2, 33, 1100, 16, 33, /*dense=*/true, 4);
  ExpectClose(RunKernel(p, 2), Reference(p));
}

TEST(BlockSparseAttentionTest, BlockWithoutSpansGivesZeros) {
  Problem p = MakeProblem(1, 1, 8, 8, 4, 4, /*dense=*/true, 3);
  p.spans = {{0, 8}};
  p.offsets = {0, 0, 1};  // first block empty
  const std::vector<float> out = RunKernel(p, 1);
  for (int i = 0; i < 4 * 4; ++i) EXPECT_EQ(out[i], 0.0f);
  ExpectClose(out, Reference(p));
}

// Sliding spans (Longformer's window, kernels/block_sparse_plan.h): every
// path against the reference that applies the slide key by key; windows
// wider than a key tile, blocks of odd sizes, and bands that leave some
// rows of a block no key in a whole tile (their scores masked, later
// rescaled away).
TEST(BlockSparseAttentionTest, SlidingSpansMatchReferenceOnEveryPath) {
  for (int head_dim : {16, 32}) {
    for (int block_size : {1, 13, 64}) {
      const Problem p =
          MakeSlidingProblem(2, 2, 150, 700, head_dim, block_size, 31 * block_size + head_dim, 600);
      for (KernelIsa isa : {KernelIsa::kAuto, KernelIsa::kAvx2, KernelIsa::kPortable}) {
        SCOPED_TRACE(::testing::Message() << "head_dim " << head_dim << " block " << block_size
                                          << " isa " << static_cast<int>(isa));
        ExpectClose(RunKernel(p, 2, isa), Reference(p));
      }
    }
  }
}

// An executor that does not take sliding spans (AMX) gets such blocks one
// query at a time with fixed spans: exactly the keys the slide gives.
TEST(BlockSparseAttentionTest, ExecutorsWithoutSlidesGetEachQuerysOwnKeys) {
  const Problem p = MakeSlidingProblem(1, 2, 70, 300, 16, 13, 5, 200);
  BlockSparsePlanView plan{p.blocks(), p.block_starts.data(), p.offsets.data(), p.spans.data(),
                           p.slides.data()};
  std::vector<std::vector<int>> seen(2 * 70);
  std::vector<int> calls(2 * 70, 0);
  ForEachQueryBlock</*kTakesSlides=*/false>(plan, 2, 1, [&]() {
    return [&](int64_t batch_head, int32_t first, int32_t last, const KeySpan* spans,
               const KeySlide* slides, int32_t num_spans) {
      ASSERT_EQ(last, first + 1);
      ASSERT_EQ(slides, nullptr);
      const size_t at = static_cast<size_t>(batch_head) * 70 + first;
      ++calls[at];
      for (int32_t s = 0; s < num_spans; ++s) {
        for (int32_t j = 0; j < spans[s].length; ++j) seen[at].push_back(spans[s].begin + j);
      }
    };
  });
  for (int bh = 0; bh < 2; ++bh) {
    for (int q = 0; q < 70; ++q) {
      EXPECT_EQ(calls[bh * 70 + q], 1);
      EXPECT_EQ(seen[bh * 70 + q], test::QueryKeys(p, bh, q)) << bh << " " << q;
    }
  }
}

// A query's output does not depend on how many rows its block has (a
// request alone or padded into a batch): blocks of 40 rows (the AVX-512
// path's groups of 32 and 16 lanes), 17 and 1 give the same bits, on every
// path.
TEST(BlockSparseAttentionTest, BlockSizeDoesNotChangeARowsBits) {
  for (KernelIsa isa : {KernelIsa::kAuto, KernelIsa::kAvx2, KernelIsa::kPortable}) {
    const std::vector<float> whole = RunKernel(MakeProblem(1, 2, 40, 300, 32, 40, true, 9), 1, isa);
    EXPECT_EQ(RunKernel(MakeProblem(1, 2, 40, 300, 32, 17, true, 9), 1, isa), whole);
    EXPECT_EQ(RunKernel(MakeProblem(1, 2, 40, 300, 32, 1, true, 9), 1, isa), whole);
  }
}

TEST(BlockSparseAttentionTest, ThreadCountDoesNotChangeBits) {
  const Problem p = MakeProblem(2, 4, 50, 61, 12, 7, /*dense=*/false, 5);
  EXPECT_EQ(RunKernel(p, 1), RunKernel(p, 4));
}

// q, k and v interleaved as the encoder's projection writes them, [batch,
// seq, 3, heads, head_dim], and the output as [batch, seq, heads, head_dim]
// rows `out_pad` values longer than a head's: element (b, h, i, d) of each
// operand and where it lies.
template <typename T>
struct Interleaved {
  std::vector<T> qkv;
  RowLayout q, k, v, out;
  int64_t out_size;
};

template <typename T>
Interleaved<T> Interleave(const Problem& p, const std::vector<T>& q, const std::vector<T>& k,
                          const std::vector<T>& v, int out_pad) {
  const int64_t width = int64_t{p.heads} * p.head_dim;
  Interleaved<T> x;
  x.qkv.resize(static_cast<size_t>(p.batch) * p.q_len * 3 * width);
  for (int which = 0; which < 3; ++which) {
    const std::vector<T>& from = which == 0 ? q : which == 1 ? k : v;
    RowLayout& layout = which == 0 ? x.q : which == 1 ? x.k : x.v;
    layout = RowLayout{int64_t{p.q_len} * 3 * width, p.head_dim, 3 * width};
    for (int b = 0; b < p.batch; ++b) {
      for (int h = 0; h < p.heads; ++h) {
        for (int i = 0; i < p.q_len; ++i) {
          for (int d = 0; d < p.head_dim; ++d) {
            x.qkv[which * width + b * layout.batch_stride + h * layout.head_stride +
                  i * layout.row_stride + d] =
                from[((static_cast<size_t>(b) * p.heads + h) * p.q_len + i) * p.head_dim + d];
          }
        }
      }
    }
  }
  const int64_t out_row = width + out_pad;
  x.out = RowLayout{int64_t{p.q_len} * out_row, p.head_dim, out_row};
  x.out_size = int64_t{p.batch} * p.q_len * out_row;
  return x;
}

// The output of a run with x's layouts, gathered back into [batch, heads,
// q_len, head_dim].
template <typename T, typename Out>
std::vector<float> Gather(const Problem& p, const Interleaved<T>& x, const std::vector<Out>& out,
                          float (*to_float)(Out)) {
  std::vector<float> result;
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.heads; ++h) {
      for (int i = 0; i < p.q_len; ++i) {
        for (int d = 0; d < p.head_dim; ++d) {
          result.push_back(to_float(
              out[b * x.out.batch_stride + h * x.out.head_stride + i * x.out.row_stride + d]));
        }
      }
    }
  }
  return result;
}

float Identity(float value) { return value; }

TEST(BlockSparseAttentionTest, InterleavedLayoutsGiveTheSameBits) {
  for (KernelIsa isa : {KernelIsa::kPortable, KernelIsa::kAvx2, KernelIsa::kAuto}) {
    const Problem p = MakeProblem(2, 3, 45, 45, 16, 8, /*dense=*/false, 11, 9);
    const Interleaved<float> x = Interleave(p, p.q, p.k, p.v, /*out_pad=*/5);
    const int64_t width = int64_t{p.heads} * p.head_dim;
    std::vector<float> out(static_cast<size_t>(x.out_size), -7.0f);
    AttentionParams params{x.qkv.data(),
                           x.qkv.data() + width,
                           x.qkv.data() + 2 * width,
                           out.data(),
                           p.batch,
                           p.heads,
                           p.q_len,
                           p.k_len,
                           p.head_dim,
                           1.0f / std::sqrt(static_cast<float>(p.head_dim)),
                           isa,
                           x.q,
                           x.k,
                           x.v,
                           x.out};
    BlockSparsePlanView plan{p.blocks(), p.block_starts.data(), p.offsets.data(), p.spans.data()};
    BlockSparseAttentionCpu(params, plan, 2);
    EXPECT_EQ(Gather(p, x, out, Identity), RunKernel(p, 2, isa));
    // The padding between output rows is not written.
    for (int64_t row = 0; row < int64_t{p.batch} * p.q_len; ++row) {
      EXPECT_EQ(out[row * x.out.row_stride + width], -7.0f);
    }
  }
}

// The AMX executor (bf16 products, fp32 softmax) against the double
// reference on the same bf16-rounded inputs: what is left is the rounding of
// the probabilities to bf16 (relative 2^-9 each), so outputs, convex
// combinations of values of magnitude <= ~4, are within ~0.01; a wrong key,
// pair order or tile would be off by tenths.
// Rounds *value to a bf16 value in place; returns its bits.
uint16_t RoundToBf16(float* value) {
  const uint16_t bits = FloatToBf16(*value);
  *value = Bf16ToFloat(bits);
  return bits;
}

struct Bf16Problem {
  Problem problem;  // q, k, v rounded to bf16 values
  std::vector<uint16_t> q, k, v;
};

Bf16Problem ToBf16(Problem p) {
  Bf16Problem out{std::move(p), {}, {}, {}};
  for (auto [values, bits] : {std::pair{&out.problem.q, &out.q}, std::pair{&out.problem.k, &out.k},
                              std::pair{&out.problem.v, &out.v}}) {
    for (float& value : *values) bits->push_back(RoundToBf16(&value));
  }
  return out;
}

// Runs one of the bf16 executors (AMX, AVX512-BF16) on contiguous operands.
std::vector<float> RunBf16(Bf16AttentionExecutor executor, const Bf16Problem& b, int threads) {
  const Problem& p = b.problem;
  std::vector<float> out(p.q.size(), -1.0f);
  Bf16AttentionParams params{b.q.data(), b.k.data(),
                             b.v.data(), out.data(),
                             p.batch,    p.heads,
                             p.q_len,    p.k_len,
                             p.head_dim, 1.0f / std::sqrt(static_cast<float>(p.head_dim))};
  BlockSparsePlanView plan{p.blocks(), p.block_starts.data(), p.offsets.data(), p.spans.data(),
                           p.slides.empty() ? nullptr : p.slides.data()};
  executor(params, plan, threads);
  return out;
}

std::vector<float> RunAmx(const Bf16Problem& b, int threads) {
  return RunBf16(&BlockSparseAttentionAmx, b, threads);
}

// A bf16 executor reading q, k and v from an interleaved [.., 3, heads, d]
// projection and writing a padded context gives the contiguous run's values,
// in fp32 and, rounded, in bf16.
void ExpectInterleavedLayoutsAndBf16OutputAgree(Bf16AttentionExecutor executor) {
  const Bf16Problem b = ToBf16(MakeProblem(2, 3, 70, 70, 32, 16, /*dense=*/false, 12, 40));
  const Problem& p = b.problem;
  const Interleaved<uint16_t> x = Interleave(p, b.q, b.k, b.v, /*out_pad=*/16);
  const int64_t width = int64_t{p.heads} * p.head_dim;
  const std::vector<float> contiguous = RunBf16(executor, b, 2);
  BlockSparsePlanView plan{p.blocks(), p.block_starts.data(), p.offsets.data(), p.spans.data()};
  Bf16AttentionParams params{x.qkv.data(),
                             x.qkv.data() + width,
                             x.qkv.data() + 2 * width,
                             nullptr,
                             p.batch,
                             p.heads,
                             p.q_len,
                             p.k_len,
                             p.head_dim,
                             1.0f / std::sqrt(static_cast<float>(p.head_dim)),
                             x.q,
                             x.k,
                             x.v,
                             x.out};
  std::vector<float> out(static_cast<size_t>(x.out_size), -7.0f);
  params.out = out.data();
  executor(params, plan, 2);
  EXPECT_EQ(Gather(p, x, out, Identity), contiguous);

  std::vector<uint16_t> out_bf16(static_cast<size_t>(x.out_size), 0);
  params.out = nullptr;
  params.out_bf16 = out_bf16.data();
  executor(params, plan, 2);
  std::vector<float> rounded = contiguous;
  for (float& value : rounded) RoundToBf16(&value);
  EXPECT_EQ(Gather(p, x, out_bf16, Bf16ToFloat), rounded);
}

void ExpectWithinBf16(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  double worst = 0, total = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double error = std::fabs(static_cast<double>(got[i]) - want[i]);
    worst = std::max(worst, error);
    total += error;
  }
  EXPECT_LE(worst, 1e-2);
  EXPECT_LE(total / static_cast<double>(got.size()), 1e-3);
}

// Keys and values that no span reaches hold NaN (as a key sequence's gaps
// or unused rows may): spans begin and end at odd and even keys inside the
// executors' chunks of 16 and 32 keys, next to NaN keys, and the output must
// still match the reference, which reads only the spans.
void ExpectKeysOutsideEverySpanIgnored(Bf16AttentionExecutor executor) {
  Bf16Problem b = ToBf16(MakeProblem(1, 2, 48, 300, 32, 16, /*dense=*/true, 23));
  Problem& p = b.problem;
  // Per block of 16 queries (3 a head), spans starting at keys 3 (odd), 40
  // (even, mid-chunk), 17, 101 (odd) and ending at odd and even keys.
  const std::vector<std::vector<KeySpan>> block_spans = {
      {{3, 20}}, {{40, 35}, {96, 2}}, {{17, 1}, {101, 150}}};
  p.spans.clear();
  p.offsets = {0};
  std::vector<uint8_t> reached(p.k_len, 0);
  for (int head = 0; head < p.heads; ++head) {
    for (const std::vector<KeySpan>& spans : block_spans) {
      for (const KeySpan& span : spans) {
        p.spans.push_back(span);
        std::fill_n(reached.begin() + span.begin, span.length, 1);
      }
      p.offsets.push_back(static_cast<int32_t>(p.spans.size()));
    }
  }
  for (int head = 0; head < p.heads; ++head) {
    for (int key = 0; key < p.k_len; ++key) {
      if (reached[key]) continue;
      const size_t row = (static_cast<size_t>(head) * p.k_len + key) * p.head_dim;
      std::fill_n(b.k.begin() + row, p.head_dim, uint16_t{0x7fc0});
      std::fill_n(b.v.begin() + row, p.head_dim, uint16_t{0x7fc0});
    }
  }
  ExpectWithinBf16(RunBf16(executor, b, 2), Reference(p));
}

// A bf16 executor reading the keys as three segments of their own buffers
// (rows padded to head_dim + 16, gaps between segments no span reaches)
// gives the bits of the same plan over one contiguous key sequence: LSG's
// [global ; derived ; tokens] read where they lie. Segments begin on the
// 32-key grid (the AMX executor's chunks), except the last when
// `unaligned_last`, which may change the summation order, so it is held to
// the reference instead.
void ExpectKeySegmentsAgree(Bf16AttentionExecutor executor, int head_dim, bool unaligned_last) {
  const int k_len = 420;
  struct Range {
    int begin, count;
  };
  const Range ranges[] = {
      {0, 3}, {32, 130}, {unaligned_last ? 205 : 192, 228 - (unaligned_last ? 13 : 0)}};
  Bf16Problem b = ToBf16(MakeProblem(1, 3, 90, k_len, head_dim, 30, /*dense=*/true, 17));
  Problem& p = b.problem;
  p.spans.clear();
  p.offsets = {0};
  std::mt19937 rng(5);
  for (int item = 0; item < p.heads * p.blocks(); ++item) {
    for (const Range& r : ranges) {  // a random piece of each segment, some whole
      const int begin = r.begin + static_cast<int>(rng() % 3 == 0 ? 0 : rng() % (r.count / 2));
      const int end = rng() % 3 == 0
                          ? r.begin + r.count
                          : begin + 1 + static_cast<int>(rng() % (r.begin + r.count - begin));
      p.spans.push_back({begin, end - begin});
    }
    p.offsets.push_back(static_cast<int32_t>(p.spans.size()));
  }
  const int stride = head_dim + 16;
  std::vector<std::vector<uint16_t>> keys, values;
  std::vector<KeySegment> segments;
  for (const Range& r : ranges) {
    std::vector<uint16_t> k(static_cast<size_t>(p.heads) * r.count * stride, 0x7fc0);
    std::vector<uint16_t> v = k;
    for (int h = 0; h < p.heads; ++h) {
      for (int row = 0; row < r.count; ++row) {
        const size_t from = (static_cast<size_t>(h) * k_len + r.begin + row) * head_dim;
        const size_t to = (static_cast<size_t>(h) * r.count + row) * stride;
        std::copy_n(b.k.begin() + from, head_dim, k.begin() + to);
        std::copy_n(b.v.begin() + from, head_dim, v.begin() + to);
      }
    }
    keys.push_back(std::move(k));
    values.push_back(std::move(v));
    const RowLayout layout{int64_t{p.heads} * r.count * stride, int64_t{r.count} * stride, stride};
    segments.push_back(
        {r.begin, r.count, keys.back().data(), values.back().data(), layout, layout});
  }
  // The gaps of the contiguous keys hold NaN too: no span reads them.
  for (int h = 0; h < p.heads; ++h) {
    for (int key = 0; key < k_len; ++key) {
      bool inside = false;
      for (const Range& r : ranges) inside |= key >= r.begin && key < r.begin + r.count;
      if (inside) continue;
      std::fill_n(b.k.begin() + (static_cast<size_t>(h) * k_len + key) * head_dim, head_dim,
                  0x7fc0);
      std::fill_n(b.v.begin() + (static_cast<size_t>(h) * k_len + key) * head_dim, head_dim,
                  0x7fc0);
    }
  }
  const std::vector<float> contiguous = RunBf16(executor, b, 2);
  std::vector<float> out(p.q.size(), -1.0f);
  Bf16AttentionParams params{
      b.q.data(), nullptr, nullptr, out.data(), p.batch,
      p.heads,    p.q_len, p.k_len, p.head_dim, 1.0f / std::sqrt(static_cast<float>(p.head_dim))};
  params.key_segments = segments.data();
  params.num_key_segments = static_cast<int32_t>(segments.size());
  BlockSparsePlanView plan{p.blocks(), p.block_starts.data(), p.offsets.data(), p.spans.data()};
  executor(params, plan, 2);
  if (unaligned_last) {
    ExpectWithinBf16(out, Reference(p));
  } else {
    EXPECT_EQ(out, contiguous);
  }
}

#define SKIP_WITHOUT_AMX(head_dim)                                                       \
  if (!AmxBlockSparseAttentionAvailable(head_dim))                                       \
  GTEST_SKIP() << "no AMX-BF16 (or no tile state from the OS) on this CPU, or head_dim " \
               << (head_dim) << " is not a multiple of 32 up to 128"

TEST(BlockSparseAttentionAmxTest, RandomSpansAcrossKeyTilesMatchReference) {
  // MiniLM (32), base models (64), 96 and 128; spans longer than the 768-key
  // tile and blocks whose keys fill several tiles; blocks of 13 and 70 rows
  // (not multiples of 16).
  for (int head_dim : {32, 64, 96, 128}) {
    SKIP_WITHOUT_AMX(head_dim);
    for (int block_size : {13, 70}) {
      const Bf16Problem b = ToBf16(
          MakeProblem(2, 2, 140, 2600, head_dim, block_size, /*dense=*/false, head_dim, 900));
      ExpectWithinBf16(RunAmx(b, 2), Reference(b.problem));
    }
  }
}

TEST(BlockSparseAttentionAmxTest, SlidingSpansRowByRowMatchReference) {
  SKIP_WITHOUT_AMX(32);
  for (int block_size : {1, 13, 64}) {
    const Bf16Problem b =
        ToBf16(MakeSlidingProblem(2, 2, 150, 700, 32, block_size, 7 * block_size, 600));
    ExpectWithinBf16(RunAmx(b, 2), Reference(b.problem));
  }
}

TEST(BlockSparseAttentionAmxTest, ShortSpansShareATileAndDenseSpansMatchReference) {
  SKIP_WITHOUT_AMX(32);
  // Spans of 1-5 keys (LSG's global and sparse keys) packed into one tile.
  const Bf16Problem sparse = ToBf16(MakeProblem(1, 3, 64, 900, 32, 16, /*dense=*/false, 7));
  ExpectWithinBf16(RunAmx(sparse, 2), Reference(sparse.problem));
  const Bf16Problem dense = ToBf16(MakeProblem(1, 2, 33, 1100, 64, 33, /*dense=*/true, 8));
  ExpectWithinBf16(RunAmx(dense, 2), Reference(dense.problem));
}

// Keys past the first 100 scaled by 3 (some rows' scores then exceed their
// first chunk's maximum by 2^30, some not) and by 8 (every row, many times
// over), in one key tile and across several: executors that keep each row's
// first-chunk maximum as its shift until a later chunk outgrows it by 2^30
// (AMX at d = 32, AVX512-BF16) must rescale what the row has so far.
void ExpectLaterKeysFarAboveTheFirstChunksMatchReference(Bf16AttentionExecutor executor) {
  for (const float factor : {3.0f, 8.0f}) {
    for (const int k_len : {300, 2000}) {
      Problem p = MakeProblem(1, 2, 40, k_len, 32, 20, /*dense=*/true, 11);
      for (int head = 0; head < 2; ++head) {
        for (int key = 100; key < k_len; ++key) {
          for (int i = 0; i < 32; ++i)
            p.k[(static_cast<size_t>(head) * k_len + key) * 32 + i] *= factor;
        }
      }
      const Bf16Problem b = ToBf16(std::move(p));
      SCOPED_TRACE(::testing::Message() << "factor " << factor << ", k_len " << k_len);
      ExpectWithinBf16(RunBf16(executor, b, 2), Reference(b.problem));
    }
  }
}

TEST(BlockSparseAttentionAmxTest, LaterKeysFarAboveTheFirstChunksMatchReference) {
  SKIP_WITHOUT_AMX(32);
  ExpectLaterKeysFarAboveTheFirstChunksMatchReference(&BlockSparseAttentionAmx);
}

TEST(BlockSparseAttentionAmxTest, PrepackedChunksAndKeysPackedPerBlockMixMatchReference) {
  SKIP_WITHOUT_AMX(32);
  // d = 32 reads a span's whole aligned 32-key chunks where the prepass
  // packed them and packs the rest per block. Per (head, first block): 900
  // keys in 3-key spans off the grid (more than one 768-key packing, so two
  // steps), an aligned span of 10 chunks, one with an unaligned head and
  // tail around 8 chunks, and one through k's last, partial chunk. The
  // second block is dense over all 2,600 keys.
  Bf16Problem b = ToBf16(MakeProblem(1, 2, 40, 2600, 32, 20, /*dense=*/true, 13));
  Problem& p = b.problem;
  p.spans.clear();
  p.offsets = {0};
  for (int head = 0; head < 2; ++head) {
    for (int i = 0; i < 300; ++i) p.spans.push_back({6 * i + 1, 3});
    p.spans.push_back({1824, 320});
    p.spans.push_back({2150, 300});
    p.spans.push_back({2580, 20});
    p.offsets.push_back(static_cast<int32_t>(p.spans.size()));
    p.spans.push_back({0, 2600});
    p.offsets.push_back(static_cast<int32_t>(p.spans.size()));
  }
  ExpectWithinBf16(RunAmx(b, 2), Reference(p));
}

TEST(BlockSparseAttentionAmxTest, KeySegmentsGiveTheContiguousKeysBits) {
  for (int head_dim : {32, 64}) {  // read in place, and assembled first
    SKIP_WITHOUT_AMX(head_dim);
    ExpectKeySegmentsAgree(&BlockSparseAttentionAmx, head_dim, /*unaligned_last=*/false);
    ExpectKeySegmentsAgree(&BlockSparseAttentionAmx, head_dim, /*unaligned_last=*/true);
  }
}

TEST(BlockSparseAttentionAmxTest, KeysOutsideEverySpanAreIgnoredEvenIfNaN) {
  SKIP_WITHOUT_AMX(32);
  ExpectKeysOutsideEverySpanIgnored(&BlockSparseAttentionAmx);
}

TEST(BlockSparseAttentionAmxTest, BlockWithoutSpansGivesZeros) {
  SKIP_WITHOUT_AMX(32);
  Bf16Problem b = ToBf16(MakeProblem(1, 1, 40, 40, 32, 20, /*dense=*/true, 3));
  b.problem.spans = {{0, 40}};
  b.problem.offsets = {0, 0, 1};  // first block empty
  const std::vector<float> out = RunAmx(b, 1);
  for (int i = 0; i < 20 * 32; ++i) EXPECT_EQ(out[i], 0.0f);
  ExpectWithinBf16(out, Reference(b.problem));
  // An empty block after a full one on the same thread: nothing of the
  // full block's sums and outputs may leak into it.
  b.problem.offsets = {0, 1, 1};  // second block empty
  const std::vector<float> second = RunAmx(b, 1);
  for (int i = 20 * 32; i < 40 * 32; ++i) EXPECT_EQ(second[i], 0.0f);
  ExpectWithinBf16(second, Reference(b.problem));
}

TEST(BlockSparseAttentionAmxTest, ThreadCountDoesNotChangeBits) {
  for (int head_dim : {32, 64}) {  // the register path and the general one
    SKIP_WITHOUT_AMX(head_dim);
    const Bf16Problem b = ToBf16(MakeProblem(2, 4, 50, 1610, head_dim, 17, /*dense=*/false, 5, 80));
    EXPECT_EQ(RunAmx(b, 1), RunAmx(b, 3));
  }
}

TEST(BlockSparseAttentionAmxTest, InterleavedLayoutsAndBf16OutputGiveTheSameValues) {
  SKIP_WITHOUT_AMX(32);
  ExpectInterleavedLayoutsAndBf16OutputAgree(&BlockSparseAttentionAmx);
}

// stream_out writes the same bf16 bits with non-temporal stores where rows
// are aligned lines, and falls back to plain stores where they are not (an
// output one element off alignment).
TEST(BlockSparseAttentionAmxTest, StreamedBf16OutputIsTheSameBits) {
  for (int head_dim : {32, 64}) {
    SKIP_WITHOUT_AMX(head_dim);
    const Bf16Problem b = ToBf16(MakeProblem(2, 3, 150, 400, head_dim, 16, /*dense=*/false, 7, 90));
    const Problem& p = b.problem;
    BlockSparsePlanView plan{p.blocks(), p.block_starts.data(), p.offsets.data(), p.spans.data()};
    for (const size_t offset : {size_t{0}, size_t{1}}) {
      std::vector<std::vector<uint16_t>> outs;
      for (const bool stream : {false, true}) {
        CacheLineVector<uint16_t> out(p.q.size() + offset, 0xffff);
        Bf16AttentionParams params{b.q.data(), b.k.data(),
                                   b.v.data(), nullptr,
                                   p.batch,    p.heads,
                                   p.q_len,    p.k_len,
                                   p.head_dim, 1.0f / std::sqrt(static_cast<float>(p.head_dim))};
        params.out_bf16 = out.data() + offset;
        params.stream_out = stream;
        BlockSparseAttentionAmx(params, plan, 2);
        outs.emplace_back(out.begin() + offset, out.end());
      }
      EXPECT_EQ(outs[0], outs[1]) << "head_dim " << head_dim << ", offset " << offset;
      EXPECT_NE(std::count(outs[0].begin(), outs[0].end(), uint16_t{0xffff}),
                static_cast<std::ptrdiff_t>(outs[0].size()));
    }
  }
}

TEST(BlockSparseAttentionAmxTest, HeadSizesTheTilesCannotHoldAreNotAvailable) {
  EXPECT_FALSE(AmxBlockSparseAttentionAvailable(16));
  EXPECT_FALSE(AmxBlockSparseAttentionAvailable(48));
  EXPECT_FALSE(AmxBlockSparseAttentionAvailable(160));
}

// The AVX512-BF16 executor (CPUs with BF16 dot products but no AMX): the
// same parameters and the same tolerance as the AMX executor.
std::vector<float> RunAvx512Bf16(const Bf16Problem& b, int threads) {
  return RunBf16(&BlockSparseAttentionAvx512Bf16, b, threads);
}

#define SKIP_WITHOUT_AVX512_BF16(head_dim)                                 \
  if (!Avx512Bf16BlockSparseAttentionAvailable(head_dim))                  \
  GTEST_SKIP() << "no AVX512-BF16 on this CPU, or head_dim " << (head_dim) \
               << " is not a multiple of 16"

TEST(BlockSparseAttentionAvx512Bf16Test, RandomSpansAcrossKeyTilesMatchReference) {
  // Head sizes 16 to 128; spans longer than the 256-key tile, odd tile
  // lengths (a key pair with one key), blocks of 13 and 70 rows.
  for (int head_dim : {16, 32, 64, 96, 128}) {
    SKIP_WITHOUT_AVX512_BF16(head_dim);
    for (int block_size : {13, 70}) {
      const Bf16Problem b = ToBf16(
          MakeProblem(2, 2, 140, 1301, head_dim, block_size, /*dense=*/false, head_dim, 600));
      ExpectWithinBf16(RunAvx512Bf16(b, 2), Reference(b.problem));
    }
  }
}

TEST(BlockSparseAttentionAvx512Bf16Test, ShortAndDenseSpansMatchReference) {
  SKIP_WITHOUT_AVX512_BF16(32);
  const Bf16Problem sparse = ToBf16(MakeProblem(1, 3, 64, 900, 32, 16, /*dense=*/false, 7));
  ExpectWithinBf16(RunAvx512Bf16(sparse, 2), Reference(sparse.problem));
  const Bf16Problem dense = ToBf16(MakeProblem(1, 2, 33, 1100, 64, 33, /*dense=*/true, 8));
  ExpectWithinBf16(RunAvx512Bf16(dense, 2), Reference(dense.problem));
}

TEST(BlockSparseAttentionAvx512Bf16Test, SlidingSpansMatchReference) {
  SKIP_WITHOUT_AVX512_BF16(32);
  for (int block_size : {1, 13, 64}) {
    const Bf16Problem b =
        ToBf16(MakeSlidingProblem(2, 2, 150, 700, 32, block_size, 7 * block_size, 600));
    ExpectWithinBf16(RunAvx512Bf16(b, 2), Reference(b.problem));
  }
}

TEST(BlockSparseAttentionAvx512Bf16Test, LaterKeysFarAboveTheFirstChunksMatchReference) {
  SKIP_WITHOUT_AVX512_BF16(32);
  ExpectLaterKeysFarAboveTheFirstChunksMatchReference(&BlockSparseAttentionAvx512Bf16);
}

TEST(BlockSparseAttentionAvx512Bf16Test, BlockWithoutSpansGivesZerosAndThreadsDoNotChangeBits) {
  SKIP_WITHOUT_AVX512_BF16(32);
  Bf16Problem b = ToBf16(MakeProblem(1, 1, 40, 40, 32, 20, /*dense=*/true, 3));
  b.problem.spans = {{0, 40}};
  b.problem.offsets = {0, 0, 1};  // first block empty
  const std::vector<float> out = RunAvx512Bf16(b, 1);
  for (int i = 0; i < 20 * 32; ++i) EXPECT_EQ(out[i], 0.0f);
  ExpectWithinBf16(out, Reference(b.problem));
  const Bf16Problem many = ToBf16(MakeProblem(2, 4, 50, 610, 64, 17, /*dense=*/false, 5, 80));
  EXPECT_EQ(RunAvx512Bf16(many, 1), RunAvx512Bf16(many, 3));
}

TEST(BlockSparseAttentionAvx512Bf16Test, InterleavedLayoutsAndBf16OutputGiveTheSameValues) {
  SKIP_WITHOUT_AVX512_BF16(32);
  ExpectInterleavedLayoutsAndBf16OutputAgree(&BlockSparseAttentionAvx512Bf16);
}

TEST(BlockSparseAttentionAvx512Bf16Test, KeySegmentsGiveTheContiguousKeysBits) {
  SKIP_WITHOUT_AVX512_BF16(32);
  ExpectKeySegmentsAgree(&BlockSparseAttentionAvx512Bf16, 32, /*unaligned_last=*/false);
}

TEST(BlockSparseAttentionAvx512Bf16Test, KeysOutsideEverySpanAreIgnoredEvenIfNaN) {
  SKIP_WITHOUT_AVX512_BF16(32);
  ExpectKeysOutsideEverySpanIgnored(&BlockSparseAttentionAvx512Bf16);
}

TEST(BlockSparseAttentionAvx512Bf16Test, HeadSizesOtherThanMultiplesOf16AreNotAvailable) {
  EXPECT_FALSE(Avx512Bf16BlockSparseAttentionAvailable(8));
  EXPECT_FALSE(Avx512Bf16BlockSparseAttentionAvailable(40));
}

}  // namespace
}  // namespace docsparse
