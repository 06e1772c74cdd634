#include "server/model_batchers.h"

#include <chrono>

#include "server/summarizer_batch_runner.h"

namespace docsparse {

BatchLimits LimitsOf(const BatchingConfig& config, bool gpu, int max_batch_size_override,
                     int threads_per_batch) {
  BatchLimits limits;
  limits.max_batch_size =
      max_batch_size_override > 0 ? max_batch_size_override : config.max_batch_size;
  limits.max_queue_delay = std::chrono::milliseconds(config.max_queue_delay_ms);
  const int64_t cpu_tokens = threads_per_batch == 1 ? BatchingConfig::kCpuOneThreadMaxBatchTokens
                                                    : BatchingConfig::kCpuMaxBatchTokens;
  limits.max_batch_tokens =
      config.max_batch_tokens.value_or(gpu ? BatchingConfig::kGpuMaxBatchTokens : cpu_tokens);
  limits.max_batch_attention_flops = config.max_batch_attention_gflops.value_or(
                                         gpu ? BatchingConfig::kGpuMaxBatchAttentionGflops
                                             : BatchingConfig::kCpuMaxBatchAttentionGflops) *
                                     1e9;
  return limits;
}

ModelBatchers::ModelBatchers(const ModelRegistry& registry, Metrics& metrics,
                             int max_batch_size_override, size_t max_queue, ComputeThreads* compute,
                             int threads_per_batch) {
  for (const ServedModel* model : registry.models()) {
    const BatchingConfig& config = model->serving.batching;
    const BatchLimits limits =
        LimitsOf(config, !model->device().is_cpu(), max_batch_size_override, threads_per_batch);
    ModelMetrics* handle = metrics.Find(model->name);
    BatcherHooks hooks;
    if (handle != nullptr) {
      hooks.on_batch = [handle](int size) { handle->ObserveBatch(size); };
      hooks.on_queue_depth = [handle](size_t depth) {
        handle->SetQueueDepth(static_cast<int64_t>(depth));
      };
      hooks.on_drop = [handle](DropReason reason) { handle->CountDropped(reason); };
    }
    std::unique_ptr<BatchRunner> runner;
    if (model->abstractive()) {
      SummarizerHooks summarizer;
      if (handle != nullptr) {
        summarizer.on_decode_step = [handle](double seconds) {
          handle->ObserveDecodeStep(seconds);
        };
        summarizer.on_generation_stopped = [handle](GenerationStop stop) {
          handle->CountGenerationStopped(stop);
        };
        summarizer.on_device_seconds = [handle](double seconds) {
          handle->ObserveDeviceSeconds(seconds);
        };
      }
      runner = std::make_unique<SummarizerBatchRunner>(*model->seq2seq, std::move(summarizer));
    } else {
      std::function<void(DropReason)> on_stopped;
      std::function<void(double)> on_device_seconds;
      if (handle != nullptr) {
        on_stopped = [handle](DropReason reason) { handle->CountStopped(reason); };
        on_device_seconds = [handle](double seconds) { handle->ObserveDeviceSeconds(seconds); };
      }
      runner = std::make_unique<EncoderBatchRunner>(*model->text, std::move(on_stopped),
                                                    std::move(on_device_seconds));
    }
    batchers_.emplace(model->name,
                      std::make_unique<Batcher>(std::move(runner), limits,
                                                std::min<size_t>(max_queue, config.max_queue_size),
                                                std::move(hooks), compute));
  }
}

bool ModelBatchers::Submit(std::unique_ptr<EncodeJob> job) {
  auto it = batchers_.find(job->pending.key.model);
  return it != batchers_.end() && it->second->Submit(std::move(job));
}

}  // namespace docsparse
