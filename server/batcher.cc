#include "server/batcher.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "model/attention/compute_device.h"

namespace docsparse {

Batcher::Batcher(std::unique_ptr<BatchRunner> runner, BatchLimits limits, size_t max_queue,
                 BatcherHooks hooks, ComputeThreads* compute)
    : runner_(std::move(runner)),
      limits_(limits),
      max_queue_(max_queue),
      hooks_(std::move(hooks)),
      compute_(compute) {
  const int threads = compute_ == nullptr ? 1 : compute_->size();
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

Batcher::~Batcher() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
    wake_.SignalAll();
  }
  for (std::thread& thread : threads_) thread.join();
}

bool Batcher::Submit(std::unique_ptr<EncodeJob> job) {
  size_t depth = 0;
  {
    MutexLock lock(&mu_);
    if (stopping_ || queue_.size() >= max_queue_) {
      if (hooks_.on_drop) hooks_.on_drop(DropReason::kQueueFull);
      return false;
    }
    queue_.push_back(std::move(job));
    depth = queue_.size();
    wake_.Signal();
  }
  if (hooks_.on_queue_depth) hooks_.on_queue_depth(depth);
  return true;
}

void Batcher::Loop() {
  while (true) {
    std::vector<std::unique_ptr<EncodeJob>> batch;
    std::vector<std::pair<std::unique_ptr<EncodeJob>, DropReason>> dropped;
    size_t depth = 0;
    {
      MutexLock lock(&mu_);
      BatchDecision decision;
      while (true) {
        if (queue_.empty()) {
          if (stopping_) return;
          wake_.Wait(&mu_);
          continue;
        }
        std::vector<PendingRequest> snapshot;
        snapshot.reserve(queue_.size());
        for (const auto& job : queue_) {
          snapshot.push_back(job->pending);
          snapshot.back().cancelled = job->is_cancelled && job->is_cancelled();
        }
        decision = FormBatch(snapshot, BatchClock::now(), limits_);
        // Draining: no point waiting for company.
        if (decision.take.empty() && stopping_ && decision.drop_expired.empty() &&
            decision.drop_cancelled.empty()) {
          BatchLimits now_limits = limits_;
          now_limits.max_queue_delay = BatchClock::duration::zero();
          decision = FormBatch(snapshot, BatchClock::now(), now_limits);
        }
        if (!decision.take.empty() || !decision.drop_expired.empty() ||
            !decision.drop_cancelled.empty()) {
          break;
        }
        // Until the leader's delay is up, or a new request may fill the batch.
        wake_.WaitWithTimeout(&mu_, absl::FromChrono(decision.wait));
      }
      std::vector<bool> removed(queue_.size(), false);
      for (size_t index : decision.take) {
        batch.push_back(std::move(queue_[index]));
        removed[index] = true;
      }
      for (size_t index : decision.drop_expired) {
        dropped.emplace_back(std::move(queue_[index]), DropReason::kDeadline);
        removed[index] = true;
      }
      for (size_t index : decision.drop_cancelled) {
        dropped.emplace_back(std::move(queue_[index]), DropReason::kCancelled);
        removed[index] = true;
      }
      std::deque<std::unique_ptr<EncodeJob>> kept;
      for (size_t i = 0; i < queue_.size(); ++i) {
        if (!removed[i]) kept.push_back(std::move(queue_[i]));
      }
      queue_.swap(kept);
      depth = queue_.size();
    }
    if (hooks_.on_queue_depth) hooks_.on_queue_depth(depth);
    for (auto& [job, reason] : dropped) {
      if (hooks_.on_drop) hooks_.on_drop(reason);
      job->done(*job, AbandonedStatus(reason, "while queued"));
    }
    if (batch.empty()) continue;
    if (hooks_.on_batch) hooks_.on_batch(static_cast<int>(batch.size()));
    if (compute_ == nullptr) {
      runner_->Run(std::move(batch));
    } else {
      compute_->Run([this, &batch] { runner_->Run(std::move(batch)); });
    }
  }
}

absl::Status AbandonedStatus(DropReason reason, const char* stage) {
  return reason == DropReason::kDeadline
             ? absl::DeadlineExceededError(absl::StrCat("deadline passed ", stage))
             : absl::CancelledError(absl::StrCat("client cancelled ", stage));
}

void EncoderBatchRunner::Run(std::vector<std::unique_ptr<EncodeJob>> batch) {
  std::vector<std::vector<int32_t>> sequences;
  std::vector<CostAccount*> costs;
  std::vector<ItemAttentionOptions> attention;
  std::vector<size_t> owner;  // the job of each sequence
  for (size_t j = 0; j < batch.size(); ++j) {
    for (const auto& sequence : batch[j]->sequences) {
      sequences.push_back(sequence);
      costs.push_back(&batch[j]->cost);
      attention.push_back(batch[j]->attention);
      owner.push_back(j);
    }
  }
  // Once abandoned, a job stays so: remember why, and ask only the others.
  std::vector<std::optional<DropReason>> abandoned(batch.size());
  const auto sequence_abandoned = [&](size_t sequence) {
    std::optional<DropReason>& reason = abandoned[owner[sequence]];
    if (!reason.has_value()) reason = batch[owner[sequence]]->Abandoned(BatchClock::now());
    return reason.has_value();
  };
  EncodeResult shared;
  shared.batch_size = static_cast<int>(batch.size());
  shared.started = BatchClock::now();
  DeviceStopwatch device_time(encoder_.encoder().device());
  absl::StatusOr<PooledSequences> pooled =
      encoder_.EncodeSequences(sequences, costs, attention, sequence_abandoned);
  shared.device_seconds = device_time.Stop();
  shared.finished = BatchClock::now();
  if (shared.device_seconds.has_value() && on_device_seconds_) {
    on_device_seconds_(*shared.device_seconds);
  }
  int64_t row = 0;
  for (size_t j = 0; j < batch.size(); ++j) {
    EncodeJob* job = batch[j].get();
    const int64_t rows = static_cast<int64_t>(job->sequences.size());
    if (abandoned[j].has_value()) {
      row += rows;
      if (on_stopped_) on_stopped_(*abandoned[j]);
      job->done(*job, AbandonedStatus(*abandoned[j], "while computing"));
      continue;
    }
    if (!pooled.ok()) {
      job->done(*job, pooled.status());
      continue;
    }
    EncodeResult result = shared;
    result.pooled.mean = pooled->mean.slice(0, row, row + rows);
    result.pooled.first = pooled->first.slice(0, row, row + rows);
    row += rows;
    job->done(*job, std::move(result));
  }
}

}  // namespace docsparse
