// The CUDA edge executor against the CPU executor (fp32) and against exact
// attention with a naive same-precision bound (bf16, fp16): random CSR edges
// of uneven degree (empty rows, rows of hundreds of keys), rows shorter than
// q_len (padding), head sizes of both the vectorised and the generic kernel.
#include "kernels/edge_attention_cuda.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/edge_attention.h"
#include "tests/cuda/attention_reference.h"
#include "tests/cuda/device_buffer.h"

namespace docsparse {
namespace {

using test::DeviceBuffer;
using test::MaxAbsError;

struct EdgeProblem {
  int batch, heads, q_len, k_len, head_dim;
  std::vector<float> q, k, v;
  // Per (item·head): CSR over its `rows[bh]` first queries.
  std::vector<std::vector<int64_t>> offsets;
  std::vector<std::vector<int32_t>> keys;
  std::vector<int32_t> rows;
  // Per (item·head), one per edge, or empty: each edge's logit bias.
  std::vector<std::vector<float>> bias;
  int batch_heads() const { return batch * heads; }
};

// Degrees from 0 to max_degree (some rows empty, some dense), distinct keys per
// row in random order; the last item's rows stop short of q_len (padding).
EdgeProblem MakeEdgeProblem(int batch, int heads, int q_len, int k_len, int head_dim,
                            int max_degree, uint32_t seed) {
  EdgeProblem p{batch, heads, q_len, k_len, head_dim, {}, {}, {}, {}, {}, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  const auto fill = [&](std::vector<float>* x, int len) {
    x->resize(static_cast<size_t>(batch) * heads * len * head_dim);
    for (float& value : *x) value = normal(rng);
  };
  fill(&p.q, q_len);
  fill(&p.k, k_len);
  fill(&p.v, k_len);
  std::vector<int32_t> all(k_len);
  std::iota(all.begin(), all.end(), 0);
  for (int bh = 0; bh < p.batch_heads(); ++bh) {
    const int rows = bh >= (batch - 1) * heads ? q_len - q_len / 3 : q_len;
    std::vector<int64_t> offsets{0};
    std::vector<int32_t> keys;
    for (int i = 0; i < rows; ++i) {
      const int degree = static_cast<int>(rng() % (max_degree + 1));
      std::shuffle(all.begin(), all.end(), rng);
      keys.insert(keys.end(), all.begin(), all.begin() + std::min(degree, k_len));
      offsets.push_back(static_cast<int64_t>(keys.size()));
    }
    p.offsets.push_back(offsets);
    p.keys.push_back(keys);
    p.rows.push_back(rows);
  }
  return p;
}

// Gives every edge a logit bias in [0, 3), as SBM's log inverse inclusion
// probabilities are (non-negative, larger for rarer edges).
void AddLogitBias(EdgeProblem* p, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(0.0f, 3.0f);
  p->bias.clear();
  for (const std::vector<int32_t>& keys : p->keys) {
    std::vector<float> bias(keys.size());
    for (float& b : bias) b = uniform(rng);
    p->bias.push_back(bias);
  }
}

const float* BiasOf(const EdgeProblem& p, int bh) {
  return p.bias.empty() ? nullptr : p.bias[bh].data();
}

float Scale(const EdgeProblem& p) { return 1.0f / std::sqrt(static_cast<float>(p.head_dim)); }

std::vector<float> RunCuda(const EdgeProblem& p, CudaElementType type,
                           CudaKernelPath path = CudaKernelPath::kAuto) {
  DeviceBuffer<uint8_t> q(test::Encode(type, p.q));
  DeviceBuffer<uint8_t> k(test::Encode(type, p.k));
  DeviceBuffer<uint8_t> v(test::Encode(type, p.v));
  DeviceBuffer<uint8_t> out(test::Encode(type, std::vector<float>(p.q.size(), -7.0f)));
  std::vector<std::unique_ptr<DeviceBuffer<int64_t>>> offsets;
  std::vector<std::unique_ptr<DeviceBuffer<int32_t>>> keys;
  std::vector<std::unique_ptr<DeviceBuffer<float>>> bias;
  std::vector<EdgeListView> views;
  for (int bh = 0; bh < p.batch_heads(); ++bh) {
    offsets.push_back(std::make_unique<DeviceBuffer<int64_t>>(p.offsets[bh]));
    keys.push_back(std::make_unique<DeviceBuffer<int32_t>>(p.keys[bh]));
    const float* device_bias = nullptr;
    if (!p.bias.empty()) {
      bias.push_back(std::make_unique<DeviceBuffer<float>>(p.bias[bh]));
      device_bias = bias.back()->get();
    }
    views.push_back(
        EdgeListView{offsets.back()->get(), keys.back()->get(), p.rows[bh], device_bias});
  }
  DeviceBuffer<EdgeListView> device_views(views);
  const CudaAttentionParams params{q.get(), k.get(), v.get(), out.get(),  type,     p.batch,
                                   p.heads, p.q_len, p.k_len, p.head_dim, Scale(p), path};
  EXPECT_EQ(EdgeAttentionCuda(params, device_views.get(), nullptr), cudaSuccess);
  return test::Decode(type, out.Download());
}

std::vector<float> RunCpu(const EdgeProblem& p) {
  std::vector<float> out(p.q.size());
  std::vector<EdgeListView> views;
  for (int bh = 0; bh < p.batch_heads(); ++bh) {
    views.push_back(
        EdgeListView{p.offsets[bh].data(), p.keys[bh].data(), p.rows[bh], BiasOf(p, bh)});
  }
  const EdgeAttentionParams params{p.q.data(),   p.k.data(), p.v.data(), out.data(),
                                   views.data(), p.batch,    p.heads,    p.q_len,
                                   p.k_len,      p.head_dim, Scale(p)};
  EdgeAttentionCpu(params, 2);
  return out;
}

test::KeysOf EdgeKeys(const EdgeProblem& p) {
  return [&p](int bh, int query) {
    std::vector<int> keys;
    if (query >= p.rows[bh]) return keys;
    for (int64_t e = p.offsets[bh][query]; e < p.offsets[bh][query + 1]; ++e) {
      keys.push_back(p.keys[bh][e]);
    }
    return keys;
  };
}

void ExpectRelativelyClose(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::fabs(got[i] - want[i]), 1e-5 * std::max(1.0f, std::fabs(want[i])))
        << "element " << i;
  }
}

TEST(EdgeAttentionCudaTest, Fp32MatchesCpuExecutorOnEveryKernel) {
  DOCSPARSE_SKIP_WITHOUT_GPU();
  for (int head_dim : {32, 64, 128, 1, 48, 100}) {
    for (CudaKernelPath path : {CudaKernelPath::kAuto, CudaKernelPath::kSimt}) {
      SCOPED_TRACE("head_dim " + std::to_string(head_dim) + " path " +
                   std::to_string(static_cast<int>(path)));
      const EdgeProblem p = MakeEdgeProblem(2, 3, 45, 300, head_dim, 260, head_dim);
      ExpectRelativelyClose(RunCuda(p, CudaElementType::kFloat32, path), RunCpu(p));
    }
  }
}

// SBM's edges carry their log inverse inclusion probabilities: the kernels
// add them to the scores as the CPU executor does.
TEST(EdgeAttentionCudaTest, Fp32LogitBiasMatchesCpuExecutorOnEveryKernel) {
  DOCSPARSE_SKIP_WITHOUT_GPU();
  for (int head_dim : {32, 64, 48}) {
    for (CudaKernelPath path : {CudaKernelPath::kAuto, CudaKernelPath::kSimt}) {
      SCOPED_TRACE("head_dim " + std::to_string(head_dim) + " path " +
                   std::to_string(static_cast<int>(path)));
      EdgeProblem p = MakeEdgeProblem(2, 3, 45, 300, head_dim, 260, 7 + head_dim);
      const std::vector<float> unbiased = RunCpu(p);
      AddLogitBias(&p, head_dim);
      const std::vector<float> want = RunCpu(p);
      ASSERT_GT(MaxAbsError(want, unbiased), 1e-2) << "the bias must change the result";
      ExpectRelativelyClose(RunCuda(p, CudaElementType::kFloat32, path), want);
    }
  }
}

TEST(EdgeAttentionCudaTest, HalfPrecisionWithinTwiceTheNaiveError) {
  DOCSPARSE_SKIP_WITHOUT_GPU();
  for (CudaElementType type : {CudaElementType::kBFloat16, CudaElementType::kFloat16}) {
    for (int head_dim : {32, 64, 128, 48}) {
      SCOPED_TRACE("type " + std::to_string(static_cast<int>(type)) + " head_dim " +
                   std::to_string(head_dim));
      EdgeProblem p = MakeEdgeProblem(2, 2, 61, 200, head_dim, 150, head_dim + 7);
      p.q = test::RoundAll(type, p.q);
      p.k = test::RoundAll(type, p.k);
      p.v = test::RoundAll(type, p.v);
      const test::AttentionShape shape{p.batch_heads(), p.q_len, p.k_len, p.head_dim};
      const std::vector<float> exact = test::AttentionOverKeys(shape, p.q, p.k, p.v, EdgeKeys(p));
      const double naive_error = MaxAbsError(
          test::AttentionOverKeys(shape, p.q, p.k, p.v, EdgeKeys(p), test::NaiveRounding(type)),
          exact);
      EXPECT_GT(naive_error, 0.0);
      EXPECT_LE(MaxAbsError(RunCuda(p, type), exact), 2 * naive_error);
    }
  }
}

TEST(EdgeAttentionCudaTest, EmptyRowsAndPaddingGiveZeros) {
  DOCSPARSE_SKIP_WITHOUT_GPU();
  EdgeProblem p = MakeEdgeProblem(1, 1, 8, 16, 64, 4, 2);
  p.rows = {5};
  p.offsets = {{0, 3, 3, 5, 5, 6}};
  p.keys = {{1, 7, 2, 0, 15, 9}};
  for (CudaElementType type : {CudaElementType::kFloat32, CudaElementType::kBFloat16}) {
    const std::vector<float> out = RunCuda(p, type);
    for (int query : {1, 3, 5, 6, 7}) {
      for (int d = 0; d < 64; ++d) EXPECT_EQ(out[query * 64 + d], 0.0f) << query;
    }
    EXPECT_NE(out[0], 0.0f);
  }
}

TEST(EdgeAttentionCudaTest, NonContiguousLayoutsAreRefused) {
  CudaAttentionParams params{nullptr, nullptr, nullptr, nullptr, CudaElementType::kFloat32, 1, 1,
                             4,       4,       64,      1.0f};
  params.q_layout = RowLayout{1, 1, 1};
  EXPECT_EQ(EdgeAttentionCuda(params, nullptr, nullptr), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace docsparse
