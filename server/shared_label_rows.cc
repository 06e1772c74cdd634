#include "server/shared_label_rows.h"

#include <utility>

namespace docsparse {

void SharedLabelRows::WhenReady(Waiter waiter) {
  std::optional<absl::StatusOr<at::Tensor>> rows;
  {
    MutexLock lock(&mu_);
    if (!rows_.has_value()) {
      waiters_.push_back(std::move(waiter));
      return;
    }
    rows = rows_;
  }
  waiter(*rows);
}

void SharedLabelRows::Publish(absl::StatusOr<at::Tensor> rows) {
  std::vector<Waiter> waiters;
  {
    MutexLock lock(&mu_);
    if (rows_.has_value()) return;
    rows_ = rows;
    waiters.swap(waiters_);
  }
  for (const Waiter& waiter : waiters) waiter(rows);
}

}  // namespace docsparse
