#include "server/metered_decoder_stepper.h"

#include <c10/core/InferenceMode.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/compute_threads.h"

namespace docsparse {

MeteredDecoderStepper::MeteredDecoderStepper(DecoderStepper& inner, std::vector<int> owners,
                                             int requests,
                                             std::function<void(double seconds)> on_step,
                                             const std::vector<double>& setup_weights)
    : inner_(inner),
      owners_(std::move(owners)),
      on_step_(std::move(on_step)),
      request_flops_(static_cast<size_t>(requests), 0.0),
      first_step_(static_cast<size_t>(requests)) {
  if (requests <= 0) return;
  std::vector<double> weights = setup_weights;
  if (weights.size() != static_cast<size_t>(requests)) weights.assign(request_flops_.size(), 1.0);
  double total = 0;
  for (const double weight : weights) total += weight;
  if (!(total > 0)) return;
  for (size_t i = 0; i < weights.size(); ++i) {
    request_flops_[i] = inner_.flops() * weights[i] / total;
  }
}

absl::StatusOr<at::Tensor> MeteredDecoderStepper::Step(const at::Tensor& tokens) {
  // Before each step, batches that queued on the compute threads meanwhile
  // run, unless another compute thread is free to take them
  // (server/compute_threads.h): a summary decoding for seconds does not hold
  // them until it ends. Not counted as this step's time.
  ComputeThreads::RunWaitingTasks();
  const double flops_before = inner_.flops();
  const auto start = BatchClock::now();
  absl::StatusOr<at::Tensor> logits = inner_.Step(tokens);
  const auto end = BatchClock::now();
  if (on_step_) on_step_(std::chrono::duration<double>(end - start).count());
  if (!logits.ok() || owners_.empty()) return logits;
  const double share = (inner_.flops() - flops_before) / static_cast<double>(owners_.size());
  for (const int owner : owners_) {
    request_flops_[owner] += share;
    if (!first_step_[owner].has_value()) first_step_[owner] = end;
  }
  return logits;
}

absl::Status MeteredDecoderStepper::Reorder(const at::Tensor& source) {
  std::vector<int> owners;
  {
    c10::InferenceMode inference_mode;
    const at::Tensor rows = source.to(at::kLong).contiguous();
    const int64_t* data = rows.data_ptr<int64_t>();
    owners.reserve(static_cast<size_t>(rows.numel()));
    for (int64_t r = 0; r < rows.numel(); ++r) {
      if (data[r] < 0 || data[r] >= static_cast<int64_t>(owners_.size())) {
        return absl::InvalidArgumentError(
            absl::StrCat("Reorder: source row ", data[r], " is outside [0, ", owners_.size(), ")"));
      }
      owners.push_back(owners_[static_cast<size_t>(data[r])]);
    }
  }
  absl::Status status = inner_.Reorder(source);
  if (status.ok()) owners_ = std::move(owners);
  return status;
}

}  // namespace docsparse
