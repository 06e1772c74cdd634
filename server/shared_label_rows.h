// The zero-shot label embeddings one request's documents share. A KServe
// ModelInfer call classifies up to 64 documents against one label set: the
// first document's job embeds the labels the cache misses (once, not once
// per document) and publishes the request's label rows here; every
// document's completion scores against them, at once or, if its job ran
// first, when they are published. A single Classify is the one-document case.
#ifndef DOCSPARSE_SERVER_SHARED_LABEL_ROWS_H_
#define DOCSPARSE_SERVER_SHARED_LABEL_ROWS_H_

#include <ATen/ATen.h>

#include <functional>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"

namespace docsparse {

// Thread-safe. Callbacks run on the thread that publishes (or, when already
// published, on the caller's), outside the lock.
class SharedLabelRows {
 public:
  using Waiter = std::function<void(const absl::StatusOr<at::Tensor>& rows)>;

  // Calls `waiter` with the rows ([labels, h], L2-normalised) or the error
  // that kept them from being computed, once either is published.
  void WhenReady(Waiter waiter) ABSL_LOCKS_EXCLUDED(mu_);
  // Publishes the rows, or the error (the embedding job failed, or was
  // abandoned), to every waiter, now and later. Only the first call counts.
  void Publish(absl::StatusOr<at::Tensor> rows) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  Mutex mu_;
  std::optional<absl::StatusOr<at::Tensor>> rows_ ABSL_GUARDED_BY(mu_);
  std::vector<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_SHARED_LABEL_ROWS_H_
