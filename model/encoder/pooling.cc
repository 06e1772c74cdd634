#include "model/encoder/pooling.h"

namespace docsparse {

at::Tensor Pool(const at::Tensor& hidden, const std::vector<int64_t>& lengths, PoolingMode mode) {
  if (mode == PoolingMode::kCls) return hidden.select(1, 0);
  const int64_t seq = hidden.size(1);
  at::Tensor counts = at::tensor(lengths, at::kLong);
  at::Tensor mask = at::arange(seq, at::kLong).unsqueeze(0).lt(counts.unsqueeze(1));
  at::Tensor summed = (hidden * mask.unsqueeze(-1).to(hidden.scalar_type())).sum(1);
  return summed / counts.to(hidden.scalar_type()).clamp_min(1e-9).unsqueeze(1);
}

at::Tensor L2Normalize(const at::Tensor& rows) {
  return rows / rows.norm(2, -1, /*keepdim=*/true).clamp_min(1e-12);
}

}  // namespace docsparse
