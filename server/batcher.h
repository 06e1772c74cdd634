// The dynamic batcher of one model: a bounded queue of encode jobs and one
// thread that asks FormBatch what to run and hands the chosen jobs to the
// model's BatchRunner: for encoders, their sequences run through the encoder
// together and each job gets its rows; for summarizers, the encoder runs
// them together and their summaries are generated together. Jobs whose
// client left or whose deadline passed are answered without compute. In the
// server the batches themselves run on the compute threads
// (compute_threads.h), one batch a model instance: a batcher has a thread
// per instance, each forming a batch and waiting while it computes, so that
// a model's next batch forms while its last one runs.
#ifndef DOCSPARSE_SERVER_BATCHER_H_
#define DOCSPARSE_SERVER_BATCHER_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "model/attention/attention.h"
#include "model/attention/cost_model.h"
#include "model/encoder/text_encoder.h"
#include "server/batch_former.h"
#include "server/compute_threads.h"
#include "server/drop_reason.h"
#include "server/generation_job.h"
#include "server/request_price.h"

namespace docsparse {

// What a job gets back from its batch.
struct EncodeResult {
  PooledSequences pooled;  // the job's sequences, in its order
  int batch_size = 0;      // requests in the batch
  BatchClock::time_point started;
  BatchClock::time_point finished;
  // A GPU model's: the batch's time on the device (DeviceStopwatch); unset on
  // the CPU.
  std::optional<double> device_seconds;
};

// One request's encoder work.
struct EncodeJob {
  explicit EncodeJob(const EncoderShape& shape) : cost(shape) {}

  PendingRequest pending;                       // key, arrival, deadline and priced cost
  std::vector<std::vector<int32_t>> sequences;  // framed
  // What the request's budget chose, for every one of its sequences.
  ItemAttentionOptions attention;
  // Whether the client has gone; polled while the job waits and between the
  // layers and forward batches of its computation.
  std::function<bool()> is_cancelled;
  // What the job was priced at before it was queued (admission).
  RequestPrice price;
  // Accumulates the cost of this job's sequences.
  CostAccount cost;
  // Abstractive summaries only: what to generate from the encoder's output,
  // and what was generated; null for encoder tasks.
  std::unique_ptr<GenerationJob> generation;
  // Called once, on the thread that ran the batch (or on the batcher thread
  // for a job dropped before compute): the result, or DEADLINE_EXCEEDED /
  // CANCELLED when its deadline passed or its client left (before compute,
  // or while computing: it then stopped between layers or decoding steps),
  // or the model's error.
  std::function<void(EncodeJob& job, absl::StatusOr<EncodeResult> result)> done;

  // Why nobody waits for this job any more at `now`, if so: its deadline
  // passed, or its client left (DeadlineMet says which wins).
  std::optional<DropReason> Abandoned(BatchClock::time_point now) const {
    const bool cancelled = is_cancelled && is_cancelled();
    if (DeadlineMet(pending.deadline, cancelled, now)) return DropReason::kDeadline;
    if (cancelled) return DropReason::kCancelled;
    return std::nullopt;
  }
};

// The status a job abandoned for `reason` is answered with; `stage` says
// when ("while queued", "while computing", ...).
absl::Status AbandonedStatus(DropReason reason, const char* stage);

// Computes one formed batch and answers each of its jobs (calls `done` once
// per job). As many batches at once as the batcher has threads (one per
// compute thread), so Run must be safe to call concurrently.
class BatchRunner {
 public:
  virtual ~BatchRunner() = default;
  virtual void Run(std::vector<std::unique_ptr<EncodeJob>> batch) = 0;
};

// Encoder tasks: every job's sequences through TextEncoder::EncodeSequences
// together; each job gets its rows of the pooled output. A job nobody waits
// for any more stops computing between layers (its sequences leave the
// batch) and is answered DEADLINE_EXCEEDED or CANCELLED.
class EncoderBatchRunner final : public BatchRunner {
 public:
  // Borrows `encoder`, which must outlive the runner. `on_stopped` (may be
  // empty) hears of each job stopped during its computation,
  // `on_device_seconds` (may be empty) of each batch's time on a GPU.
  explicit EncoderBatchRunner(const TextEncoder& encoder,
                              std::function<void(DropReason reason)> on_stopped = nullptr,
                              std::function<void(double seconds)> on_device_seconds = nullptr)
      : encoder_(encoder),
        on_stopped_(std::move(on_stopped)),
        on_device_seconds_(std::move(on_device_seconds)) {}
  void Run(std::vector<std::unique_ptr<EncodeJob>> batch) override;

 private:
  const TextEncoder& encoder_;
  const std::function<void(DropReason)> on_stopped_;
  const std::function<void(double)> on_device_seconds_;
};

// Callbacks for metrics; any may be empty.
struct BatcherHooks {
  std::function<void(int batch_size)> on_batch;
  std::function<void(size_t depth)> on_queue_depth;
  std::function<void(DropReason reason)> on_drop;
};

class Batcher {
 public:
  // Batches run on `compute` (server/compute_threads.h) when given, up to
  // one per compute thread at once; else on the batcher's own thread, one at
  // a time.
  Batcher(std::unique_ptr<BatchRunner> runner, BatchLimits limits, size_t max_queue,
          BatcherHooks hooks, ComputeThreads* compute = nullptr);
  // An encoder model's batcher. Borrows `encoder`, which must outlive it.
  Batcher(const TextEncoder& encoder, BatchLimits limits, size_t max_queue, BatcherHooks hooks)
      : Batcher(std::make_unique<EncoderBatchRunner>(encoder), limits, max_queue,
                std::move(hooks)) {}
  // Runs every job already accepted, then joins the threads.
  ~Batcher();

  // Queues the job; false (the job is dropped without `done`) when the queue
  // is full or the batcher is stopping.
  bool Submit(std::unique_ptr<EncodeJob> job) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  const std::unique_ptr<BatchRunner> runner_;
  const BatchLimits limits_;
  const size_t max_queue_;
  const BatcherHooks hooks_;
  ComputeThreads* const compute_;
  mutable Mutex mu_;
  CondVar wake_;  // a job arrived, or stopping
  std::deque<std::unique_ptr<EncodeJob>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_BATCHER_H_
