// The torch-facing CUDA block-sparse attention against the CPU executor, on
// LibTorch CUDA tensors: fp32 within 1e-5 relative, bf16 within bf16
// rounding, strided views read in place, and refused inputs named. Built only
// with a CUDA LibTorch (scripts/build --cuda); the GPU tests skip without a
// device.
#include "model/attention/block_sparse_attention_device.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cmath>
#include <vector>

#include "kernels/block_sparse_attention.h"
#include "tests/common/block_sparse_problem.h"

namespace docsparse {
namespace {

using test::MakeProblem;
using test::Problem;

#define SKIP_WITHOUT_GPU() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device"

at::Tensor Tensor(const std::vector<float>& values, const Problem& p, int len) {
  return at::from_blob(const_cast<float*>(values.data()), {p.batch, p.heads, len, p.head_dim},
                       at::kFloat)
      .clone();
}

BlockSparsePlanView View(const Problem& p) {
  return {p.blocks(), p.block_starts.data(), p.offsets.data(), p.spans.data()};
}

std::vector<float> Cpu(const Problem& p) {
  std::vector<float> out(p.q.size(), 0.0f);
  const AttentionParams params{p.q.data(), p.k.data(),
                               p.v.data(), out.data(),
                               p.batch,    p.heads,
                               p.q_len,    p.k_len,
                               p.head_dim, 1.0f / std::sqrt(static_cast<float>(p.head_dim))};
  BlockSparseAttentionCpu(params, View(p), 2);
  return out;
}

TEST(BlockSparseAttentionDeviceTest, Fp32AndBf16MatchTheCpuExecutor) {
  SKIP_WITHOUT_GPU();
  const Problem p = MakeProblem(2, 3, 300, 300, 64, 128, /*dense=*/false, 4, 70);
  const at::Tensor want = Tensor(Cpu(p), p, p.q_len);
  const float scale = 1.0f / 8.0f;
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const auto on_gpu = [&](const std::vector<float>& x, int len) {
      return Tensor(x, p, len).to(at::kCUDA).to(dtype);
    };
    auto out = BlockSparseAttentionOnDevice(on_gpu(p.q, p.q_len), on_gpu(p.k, p.k_len),
                                            on_gpu(p.v, p.k_len), View(p), scale);
    ASSERT_TRUE(out.ok()) << out.status();
    const double error = (out->to(at::kCPU).to(at::kFloat) - want).abs().max().item<double>();
    EXPECT_LE(error, dtype == at::kFloat ? 1e-5 : 3e-2) << dtype;
  }
}

TEST(BlockSparseAttentionDeviceTest, ViewsOfAFusedProjectionAreReadInPlace) {
  SKIP_WITHOUT_GPU();
  const Problem p = MakeProblem(2, 4, 200, 200, 32, 64, /*dense=*/false, 5, 50);
  // [batch, seq, 3, heads, d] -> three [batch, heads, seq, d] views.
  const at::Tensor fused =
      at::stack({Tensor(p.q, p, p.q_len), Tensor(p.k, p, p.k_len), Tensor(p.v, p, p.k_len)}, 2)
          .permute({0, 3, 2, 1, 4})
          .contiguous()
          .to(at::kCUDA);
  const at::Tensor q = fused.select(2, 0).permute({0, 2, 1, 3});
  const at::Tensor k = fused.select(2, 1).permute({0, 2, 1, 3});
  const at::Tensor v = fused.select(2, 2).permute({0, 2, 1, 3});
  ASSERT_FALSE(q.is_contiguous());
  auto out = BlockSparseAttentionOnDevice(q, k, v, View(p), 1.0f / std::sqrt(32.0f));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_LE((out->to(at::kCPU) - Tensor(Cpu(p), p, p.q_len)).abs().max().item<double>(), 1e-5);
}

TEST(BlockSparseAttentionDeviceTest, HostTensorsAndMixedDtypesAreRefusedByName) {
  const Problem p = MakeProblem(1, 1, 16, 16, 32, 8, /*dense=*/true, 6);
  const at::Tensor cpu = Tensor(p.q, p, p.q_len);
  auto out = BlockSparseAttentionOnDevice(cpu, cpu, cpu, View(p), 1.0f);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("q is not on a CUDA device"), std::string::npos)
      << out.status();
  if (!torch::cuda::is_available()) return;
  const at::Tensor gpu = cpu.to(at::kCUDA);
  out = BlockSparseAttentionOnDevice(gpu, gpu.to(at::kHalf), gpu, View(p), 1.0f);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("k has another dtype"), std::string::npos) << out.status();
}

}  // namespace
}  // namespace docsparse
