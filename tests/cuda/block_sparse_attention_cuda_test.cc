// The CUDA block-sparse executor against the CPU executor (fp32) and against
// exact attention with a naive same-precision bound (bf16, fp16), on the
// plans the CPU tests use: random disjoint spans, odd shapes, query blocks
// longer than a thread block's tile, blocks without spans, queries outside
// every block (padding), and interleaved row layouts.
#include "kernels/block_sparse_attention_cuda.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/block_sparse_attention.h"
#include "tests/common/block_sparse_problem.h"
#include "tests/cuda/attention_reference.h"
#include "tests/cuda/device_buffer.h"

namespace docsparse {
namespace {

using test::AttentionShape;
using test::DeviceBuffer;
using test::MakeProblem;
using test::MaxAbsError;
using test::Problem;

constexpr float kUntouched = -7.0f;

float Scale(const Problem& p) { return 1.0f / std::sqrt(static_cast<float>(p.head_dim)); }

int MaxBlockRows(const Problem& p) {
  int rows = 0;
  for (int i = 0; i + 1 < static_cast<int>(p.block_starts.size()); ++i) {
    rows = std::max(rows, p.block_starts[i + 1] - p.block_starts[i]);
  }
  return rows;
}

// Runs the CUDA kernel on `p` (its tensors encoded in `type`) and returns the
// output decoded to fp32; rows the kernel leaves alone read kUntouched.
std::vector<float> RunCuda(const Problem& p, CudaElementType type,
                           CudaKernelPath path = CudaKernelPath::kAuto) {
  DeviceBuffer<uint8_t> q(test::Encode(type, p.q));
  DeviceBuffer<uint8_t> k(test::Encode(type, p.k));
  DeviceBuffer<uint8_t> v(test::Encode(type, p.v));
  DeviceBuffer<uint8_t> out(test::Encode(type, std::vector<float>(p.q.size(), kUntouched)));
  DeviceBuffer<int32_t> starts(p.block_starts);
  DeviceBuffer<int32_t> offsets(p.offsets);
  DeviceBuffer<KeySpan> spans(p.spans);
  CudaAttentionParams params{q.get(), k.get(), v.get(), out.get(),  type,     p.batch,
                             p.heads, p.q_len, p.k_len, p.head_dim, Scale(p), path};
  const BlockSparsePlanView plan{p.blocks(), starts.get(), offsets.get(), spans.get()};
  EXPECT_EQ(BlockSparseAttentionCuda(params, plan, MaxBlockRows(p), nullptr), cudaSuccess);
  return test::Decode(type, out.Download());
}

std::vector<float> RunCpu(const Problem& p) {
  std::vector<float> out(p.q.size(), kUntouched);
  const AttentionParams params{p.q.data(), p.k.data(), p.v.data(), out.data(), p.batch,
                               p.heads,    p.q_len,    p.k_len,    p.head_dim, Scale(p)};
  const BlockSparsePlanView plan{p.blocks(), p.block_starts.data(), p.offsets.data(),
                                 p.spans.data()};
  BlockSparseAttentionCpu(params, plan, 2);
  return out;
}

// |got - want| <= 1e-5 · max(1, |want|) everywhere.
void ExpectRelativelyClose(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::fabs(got[i] - want[i]), 1e-5 * std::max(1.0f, std::fabs(want[i])))
        << "element " << i;
  }
}

test::KeysOf SpanKeys(const Problem& p) {
  return [&p](int bh, int query) { return test::QueryKeys(p, bh, query); };
}

// Rounds the problem's tensors to `type`, runs the kernel, and checks its
// error against exact attention is at most twice the naive attention's.
void ExpectWithinNaiveBound(Problem p, CudaElementType type, CudaKernelPath path) {
  p.q = test::RoundAll(type, p.q);
  p.k = test::RoundAll(type, p.k);
  p.v = test::RoundAll(type, p.v);
  const AttentionShape shape{p.batch * p.heads, p.q_len, p.k_len, p.head_dim};
  const std::vector<float> exact = test::AttentionOverKeys(shape, p.q, p.k, p.v, SpanKeys(p));
  const std::vector<float> naive =
      test::AttentionOverKeys(shape, p.q, p.k, p.v, SpanKeys(p), test::NaiveRounding(type));
  const double kernel_error = MaxAbsError(RunCuda(p, type, path), exact);
  const double naive_error = MaxAbsError(naive, exact);
  EXPECT_LE(kernel_error, 2 * naive_error) << "naive " << naive_error;
  EXPECT_GT(naive_error, 0.0);
}

TEST(BlockSparseAttentionCudaTest, Fp32DenseSpanMatchesCpuExecutor) {
  DOCSPARSE_SKIP_WITHOUT_GPU();
  const Problem p = MakeProblem(2, 3, 37, 37, 16, 8, /*dense=*/true, 1);
  ExpectRelativelyClose(RunCuda(p, CudaElementType::kFloat32), RunCpu(p));
}

TEST(BlockSparseAttentionCudaTest, Fp32RandomSpansOddShapesMatchCpuExecutor) {
  DOCSPARSE_SKIP_WITHOUT_GPU();
  for (int head_dim : {1, 16, 33, 64, 100, 128}) {
    SCOPED_TRACE("head_dim " + std::to_string(head_dim));
    const Problem p = MakeProblem(2, 3, 53, 71, head_dim, 7, /*dense=*/false, head_dim);
    ExpectRelativelyClose(RunCuda(p, CudaElementType::kFloat32), RunCpu(p));
  }
}

TEST(BlockSparseAttentionCudaTest, Fp32LongBlocksAndSpansAcrossManyTilesMatchCpuExecutor) {
  DOCSPARSE_SKIP_WITHOUT_GPU();
  // Blocks of 150 queries (three thread blocks each) over spans up to 90 keys.
  const Problem p = MakeProblem(1, 2, 331, 517, 64, 150, /*dense=*/false, 5, /*max_span=*/90);
  ExpectRelativelyClose(RunCuda(p, CudaElementType::kFloat32), RunCpu(p));
  const Problem dense = MakeProblem(1, 2, 200, 700, 32, 128, /*dense=*/true, 6);
  ExpectRelativelyClose(RunCuda(dense, CudaElementType::kFloat32), RunCpu(dense));
}

TEST(BlockSparseAttentionCudaTest, HalfPrecisionTensorCoresWithinTwiceTheNaiveError) {
  DOCSPARSE_SKIP_WITHOUT_GPU();
  for (CudaElementType type : {CudaElementType::kBFloat16, CudaElementType::kFloat16}) {
    for (int head_dim : {32, 64, 128}) {
      SCOPED_TRACE("type " + std::to_string(static_cast<int>(type)) + " head_dim " +
                   std::to_string(head_dim));
      ExpectWithinNaiveBound(MakeProblem(2, 3, 203, 300, head_dim, 64, false, head_dim, 70), type,
                             CudaKernelPath::kAuto);
      ExpectWithinNaiveBound(MakeProblem(1, 2, 150, 150, head_dim, 100, true, head_dim + 1), type,
                             CudaKernelPath::kAuto);
    }
  }
}

TEST(BlockSparseAttentionCudaTest, HalfPrecisionSimtWithinTwiceTheNaiveError) {
  DOCSPARSE_SKIP_WITHOUT_GPU();
  for (CudaElementType type : {CudaElementType::kBFloat16, CudaElementType::kFloat16}) {
    // 48 has no tensor-core kernel, so kAuto falls back to SIMT as well.
    ExpectWithinNaiveBound(MakeProblem(2, 2, 97, 130, 48, 32, false, 9, 20), type,
                           CudaKernelPath::kAuto);
    ExpectWithinNaiveBound(MakeProblem(2, 2, 97, 130, 64, 32, false, 10, 20), type,
                           CudaKernelPath::kSimt);
  }
}

TEST(BlockSparseAttentionCudaTest, BlocksWithoutSpansGiveZerosAndPaddingIsUntouched) {
  DOCSPARSE_SKIP_WITHOUT_GPU();
  for (CudaElementType type : {CudaElementType::kFloat32, CudaElementType::kBFloat16}) {
    Problem p = MakeProblem(1, 2, 40, 40, 64, 16, /*dense=*/true, 3);
    // Block 1 of head 0 has no span; queries 32..39 lie outside every block.
    p.block_starts = {0, 16, 32};
    p.offsets = {0, 1, 1, 2, 3};
    p.spans = {{0, 40}, {0, 40}, {5, 3}};
    const std::vector<float> out = RunCuda(p, type);
    for (int query = 0; query < 40; ++query) {
      for (int head = 0; head < 2; ++head) {
        const float x = out[(head * 40 + query) * 64];
        if (query >= 32) {
          EXPECT_EQ(x, kUntouched) << "padding query " << query;
        } else if (head == 0 && query >= 16) {
          EXPECT_EQ(x, 0.0f) << "query without keys " << query;
        } else {
          EXPECT_NE(x, kUntouched);
        }
      }
    }
  }
}

TEST(BlockSparseAttentionCudaTest, InterleavedLayoutsGiveTheSameBits) {
  DOCSPARSE_SKIP_WITHOUT_GPU();
  // q, k and v read in place from one [batch, seq, 3, heads, d] projection,
  // the context written into [batch, seq, heads, d].
  const Problem p = MakeProblem(2, 3, 70, 70, 64, 32, /*dense=*/false, 11, 30);
  for (CudaElementType type : {CudaElementType::kFloat32, CudaElementType::kBFloat16}) {
    const int d = p.head_dim, heads = p.heads, seq = p.q_len;
    std::vector<float> packed(static_cast<size_t>(p.batch) * seq * 3 * heads * d);
    for (int b = 0; b < p.batch; ++b) {
      for (int h = 0; h < heads; ++h) {
        for (int i = 0; i < seq; ++i) {
          for (int x = 0; x < d; ++x) {
            const size_t from = ((static_cast<size_t>(b) * heads + h) * seq + i) * d + x;
            const size_t to = ((static_cast<size_t>(b) * seq + i) * 3 * heads + h) * d + x;
            packed[to] = p.q[from];
            packed[to + heads * d] = p.k[from];
            packed[to + 2 * heads * d] = p.v[from];
          }
        }
      }
    }
    const int width = CudaElementBytes(type);
    DeviceBuffer<uint8_t> projection(test::Encode(type, packed));
    DeviceBuffer<uint8_t> out(test::Encode(type, std::vector<float>(p.q.size(), kUntouched)));
    DeviceBuffer<int32_t> starts(p.block_starts);
    DeviceBuffer<int32_t> offsets(p.offsets);
    DeviceBuffer<KeySpan> spans(p.spans);
    const RowLayout in{int64_t{seq} * 3 * heads * d, d, int64_t{3} * heads * d};
    const RowLayout context{int64_t{seq} * heads * d, d, int64_t{heads} * d};
    CudaAttentionParams params{projection.get(),
                               projection.get() + heads * d * width,
                               projection.get() + 2 * heads * d * width,
                               out.get(),
                               type,
                               p.batch,
                               heads,
                               seq,
                               seq,
                               d,
                               Scale(p)};
    params.q_layout = params.k_layout = params.v_layout = in;
    params.out_layout = context;
    const BlockSparsePlanView plan{p.blocks(), starts.get(), offsets.get(), spans.get()};
    ASSERT_EQ(BlockSparseAttentionCuda(params, plan, MaxBlockRows(p), nullptr), cudaSuccess);
    const std::vector<float> interleaved = test::Decode(type, out.Download());
    const std::vector<float> contiguous = RunCuda(p, type);
    for (int b = 0; b < p.batch; ++b) {
      for (int h = 0; h < heads; ++h) {
        for (int i = 0; i < seq; ++i) {
          for (int x = 0; x < d; ++x) {
            ASSERT_EQ(interleaved[((static_cast<size_t>(b) * seq + i) * heads + h) * d + x],
                      contiguous[((static_cast<size_t>(b) * heads + h) * seq + i) * d + x]);
          }
        }
      }
    }
  }
}

TEST(BlockSparseAttentionCudaTest, ShapesTheKernelsDoNotTakeAreRefused) {
  // No device needed: the checks come before any launch.
  CudaAttentionParams params{nullptr, nullptr, nullptr, nullptr, CudaElementType::kFloat32, 1, 1,
                             4,       4,       129,     1.0f};
  const int32_t starts[] = {0, 4};
  const int32_t offsets[] = {0, 0};
  const BlockSparsePlanView plan{1, starts, offsets, nullptr};
  EXPECT_EQ(BlockSparseAttentionCuda(params, plan, 4, nullptr), cudaErrorInvalidValue);
  params.head_dim = 0;
  EXPECT_EQ(BlockSparseAttentionCuda(params, plan, 4, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace docsparse
