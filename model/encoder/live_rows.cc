#include "model/encoder/live_rows.h"

#include <numeric>
#include <utility>

namespace docsparse {
namespace {

template <typename T>
void KeepEntries(const std::vector<int64_t>& keep, std::vector<T>* values) {
  if (values->empty()) return;  // "defaults" / "not counted" stays so
  std::vector<T> kept;
  kept.reserve(keep.size());
  for (int64_t index : keep) kept.push_back((*values)[static_cast<size_t>(index)]);
  *values = std::move(kept);
}

}  // namespace

LiveRows::LiveRows(std::vector<ItemAttentionOptions> options, std::vector<CostAccount*> costs,
                   std::vector<int64_t> positions)
    : options(std::move(options)),
      costs(std::move(costs)),
      positions(std::move(positions)),
      batch_rows_(this->positions.size()) {
  std::iota(batch_rows_.begin(), batch_rows_.end(), 0);
}

std::vector<int64_t> LiveRows::Kept(const std::function<bool(size_t)>& abandoned) const {
  std::vector<int64_t> keep;
  for (size_t i = 0; i < batch_rows_.size(); ++i) {
    if (!abandoned(static_cast<size_t>(batch_rows_[i]))) keep.push_back(static_cast<int64_t>(i));
  }
  return keep;
}

at::Tensor LiveRows::Keep(const std::vector<int64_t>& keep, const at::Tensor& x) {
  KeepEntries(keep, &options);
  KeepEntries(keep, &costs);
  KeepEntries(keep, &positions);
  KeepEntries(keep, &batch_rows_);
  return x.index_select(0, at::tensor(keep, at::kLong).to(x.device()));
}

at::Tensor LiveRows::Scatter(const at::Tensor& x, int64_t batch_rows) const {
  if (static_cast<int64_t>(batch_rows_.size()) == batch_rows) return x;
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes[0] = batch_rows;
  at::Tensor full = at::zeros(sizes, x.options());
  full.index_copy_(0, at::tensor(batch_rows_, at::kLong).to(x.device()), x);
  return full;
}

}  // namespace docsparse
