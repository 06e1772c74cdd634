// One Batcher per served model, with its limits from docsparse.json and its
// metrics hooks; routes each job to its model's batcher.
#ifndef DOCSPARSE_SERVER_MODEL_BATCHERS_H_
#define DOCSPARSE_SERVER_MODEL_BATCHERS_H_

#include <map>
#include <memory>
#include <string>

#include "server/batcher.h"
#include "server/metrics.h"
#include "server/model_registry.h"

namespace docsparse {

// A model's batch limits: its docsparse.json "batching", with
// `max_batch_size_override` > 0 in place of its max_batch_size, and the
// device's defaults for the caps it leaves unset; on the CPU, where a batch
// computes on `threads_per_batch` = 1 thread under load,
// kCpuOneThreadMaxBatchTokens.
BatchLimits LimitsOf(const BatchingConfig& config, bool gpu, int max_batch_size_override,
                     int threads_per_batch);

class ModelBatchers {
 public:
  // Borrows the registry and metrics. `max_batch_size_override` > 0 replaces
  // every model's batching.max_batch_size (e.g. 1 to measure without
  // batching); `max_queue` caps each model's queue. Batches of every model
  // run on `compute` when given (the server's compute threads), each on
  // `threads_per_batch` threads under load (its instance's share).
  ModelBatchers(const ModelRegistry& registry, Metrics& metrics, int max_batch_size_override,
                size_t max_queue, ComputeThreads* compute = nullptr, int threads_per_batch = 0);
  // Finishes every accepted job.
  ~ModelBatchers() = default;

  // Queues the job on its model's batcher (job->pending.key.model); false when
  // that queue is full (the job is discarded without `done`).
  bool Submit(std::unique_ptr<EncodeJob> job);

 private:
  std::map<std::string, std::unique_ptr<Batcher>> batchers_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_MODEL_BATCHERS_H_
