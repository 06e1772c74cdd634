// Runs an attention mechanism on q, k and v wherever they are (host or CUDA
// device) and returns the context on the host in fp32, for comparing the
// device path with the CPU one.
#ifndef DOCSPARSE_TESTS_CUDA_TORCH_FORWARD_ON_HOST_H_
#define DOCSPARSE_TESTS_CUDA_TORCH_FORWARD_ON_HOST_H_

#include <ATen/ATen.h>

#include <vector>

#include "model/attention/attention.h"

namespace docsparse::test {

inline at::Tensor ForwardOnHost(const AttentionMechanism& mechanism, const at::Tensor& q,
                                const at::Tensor& k, const at::Tensor& v,
                                const std::vector<int64_t>& lengths) {
  AttentionInputs in;
  in.query = q;
  in.key = k;
  in.value = v;
  in.lengths = lengths;
  std::vector<ItemAttentionCost> costs;
  return mechanism.Forward(in, &costs).to(at::kCPU).to(at::kFloat);
}

}  // namespace docsparse::test

#endif  // DOCSPARSE_TESTS_CUDA_TORCH_FORWARD_ON_HOST_H_
