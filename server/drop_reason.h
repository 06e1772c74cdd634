// Why a request was answered without running the model. Shared by the
// batcher, which drops requests, and the metrics, which count them
// (docsparse_dropped_requests_total{reason}).
#ifndef DOCSPARSE_SERVER_DROP_REASON_H_
#define DOCSPARSE_SERVER_DROP_REASON_H_

namespace docsparse {

// kDeadline: its deadline passed while queued; kCancelled: its client left
// while it was queued; kQueueFull: refused at arrival (RESOURCE_EXHAUSTED).
enum class DropReason { kDeadline, kCancelled, kQueueFull };

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_DROP_REASON_H_
