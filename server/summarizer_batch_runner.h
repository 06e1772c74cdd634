// The BatchRunner of an encoder-decoder summarizer: the batch's documents
// run through the encoder together, then their summaries are generated
// together (model/seq2seq/generator.h): one decoder row per greedy request, its beams
// per beam-search request, every step over all rows still decoding; a
// request leaves the rows as soon as it is finished, its client cancelled or
// its deadline passed. Requests arriving meanwhile wait for the next batch.
#ifndef DOCSPARSE_SERVER_SUMMARIZER_BATCH_RUNNER_H_
#define DOCSPARSE_SERVER_SUMMARIZER_BATCH_RUNNER_H_

#include <functional>
#include <memory>
#include <vector>

#include "model/seq2seq/seq2seq_model.h"
#include "server/batcher.h"
#include "server/metrics.h"

namespace docsparse {

// Callbacks for metrics; any may be empty.
struct SummarizerHooks {
  std::function<void(double seconds)> on_decode_step;
  std::function<void(GenerationStop stop)> on_generation_stopped;
  // Each batch's time on a GPU (unset on the CPU: not called).
  std::function<void(double seconds)> on_device_seconds;
};

class SummarizerBatchRunner final : public BatchRunner {
 public:
  // Borrows `model`, which must outlive the runner.
  SummarizerBatchRunner(const Seq2SeqModel& model, SummarizerHooks hooks)
      : model_(model), hooks_(std::move(hooks)) {}

  // Every job must have `generation` set and exactly one sequence (else it
  // is answered INTERNAL: a bug in whoever made it). A job stopped while
  // decoding is answered CANCELLED or DEADLINE_EXCEEDED, counted in
  // on_generation_stopped and logged.
  void Run(std::vector<std::unique_ptr<EncodeJob>> batch) override;

 private:
  const Seq2SeqModel& model_;
  const SummarizerHooks hooks_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_SUMMARIZER_BATCH_RUNNER_H_
