// A DecoderStepper that passes everything to another and watches it for the
// cost report and the metrics: how long each step took, which request each
// row belongs to (following Reorder as beams are chosen and finished
// requests leave), each request's share of the decoder FLOPs, and when each
// request's first token was chosen. Before each step it also lets batches
// waiting for a compute thread run when none is free (compute_threads.h).
#ifndef DOCSPARSE_SERVER_METERED_DECODER_STEPPER_H_
#define DOCSPARSE_SERVER_METERED_DECODER_STEPPER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "model/seq2seq/decoder_stepper.h"
#include "server/batch_former.h"

namespace docsparse {

// Not thread-safe (a stepper is driven by one thread). Borrows `inner`.
class MeteredDecoderStepper final : public DecoderStepper {
 public:
  // `owners[r]` is the request (0 .. requests-1) row r of `inner` decodes
  // for; `on_step` (may be empty) gets each Step's wall time in seconds.
  // The FLOPs `inner` spent before its first step (projecting each
  // request's encoder output for cross-attention) are split in proportion to
  // `setup_weights` (per request, e.g. its encoder rows; empty: evenly).
  MeteredDecoderStepper(DecoderStepper& inner, std::vector<int> owners, int requests,
                        std::function<void(double seconds)> on_step,
                        const std::vector<double>& setup_weights = {});

  int64_t rows() const override { return inner_.rows(); }
  absl::StatusOr<at::Tensor> Step(const at::Tensor& tokens) override;
  absl::Status Reorder(const at::Tensor& source) override;
  double flops() const override { return inner_.flops(); }

  // `request`'s share of flops(): its part of the setup, plus each step's
  // FLOPs split evenly over the rows it ran (the rows of one step do the
  // same work: one token each over caches of the same length).
  double request_flops(int request) const { return request_flops_[request]; }
  // When the first step that ran a row of `request` returned.
  std::optional<BatchClock::time_point> first_step(int request) const {
    return first_step_[request];
  }

 private:
  DecoderStepper& inner_;
  std::vector<int> owners_;  // [rows()]
  std::function<void(double)> on_step_;
  std::vector<double> request_flops_;
  std::vector<std::optional<BatchClock::time_point>> first_step_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_METERED_DECODER_STEPPER_H_
