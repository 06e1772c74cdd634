// `docsparse-convert sbm` without the command line: attaches SBM parameters
// (model/attention/sbm_parameters.h) to an encoder checkpoint (dense or LSG-converted)
// and calibrates them. The encoder is frozen; for each training batch it runs
// densely, recording every layer's q, k, v and attention output, and each
// layer's SBM parameters learn to reproduce that output with sampled masks
// (convert/sbm_student.h: straight-through estimator, exploration δ, density
// penalty λ, plus the expected captured attention mass and a logit decay that
// make a few-minute calibration work). Only the SBM parameters train (Adam);
// every layer trains at once on the teacher's inputs to that layer.
//
// Resumable: every `checkpoint_every` steps the parameters, Adam's state and
// the step go to `sbm-calibration.pt` / `sbm-calibration.json` in the output
// folder (atomically); a later run with the same settings continues from
// there, and gives exactly what an uninterrupted run gives (batches and masks
// are functions of the seed and the step). Asking for more steps than before
// continues training.
#ifndef DOCSPARSE_CONVERT_SBM_CALIBRATION_H_
#define DOCSPARSE_CONVERT_SBM_CALIBRATION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace docsparse::convert {

struct SbmCalibrationOptions {
  std::string input_dir;   // config.json + weights of a BERT/RoBERTa/DistilBERT (or LSG) encoder
  std::string output_dir;  // gets sbm.safetensors (and the checkpoint's files, linked, if new)
  int clusters = 16;       // k per head
  double lambda = 3;       // density penalty
  // Weight of the expected captured attention mass (convert/sbm_student.h):
  // the low-variance signal that makes calibration converge in minutes.
  double mass_weight = 1;
  // Penalty on the mean squared membership logit (sbm_student.h).
  double logit_decay = 1e-2;
  double delta = 0.01;  // random edge exploration (the paper's δ)
  // Each step trains at one density, drawn log-uniformly from this range
  // (β solved for it, as budgets do at serving time), so the parameters rank
  // edges well at every density they may be served at. Both 0: train at
  // β = 0, the natural density λ settles on.
  double train_density_min = 0;
  double train_density_max = 0;
  int64_t steps = 120;
  int batch = 4;                // chunks per step
  double learning_rate = 1e-2;  // Adam
  uint64_t seed = 1;            // initial parameters, batches, masks
  int64_t checkpoint_every = 25;
  bool resume = true;  // continue from a checkpoint in output_dir when there is one
};

struct SbmCalibrationProgress {
  int64_t step = 0;  // steps done
  int64_t steps = 0;
  double loss = 0;     // distill + λ·density − mass_weight·mass, mean over layers
  double distill = 0;  // normalised squared error of the attention outputs
  double density = 0;  // sampled masks, mean over layers and heads
  double mass = 0;     // expected dense attention mass captured per query
  double seconds = 0;  // since this run started
};

struct SbmCalibrationResult {
  std::string sbm_path;
  int64_t first_step = 0;  // > 0 when resumed
  int64_t steps = 0;
  double distill = 0;  // last step's
  double density = 0;
  double mass = 0;
  double seconds = 0;
};

// Calibrates on `chunks` (framed token ids, all the same length) and writes
// output_dir/sbm.safetensors, whose __metadata__ records the settings, the
// corpus (`corpus_metadata`) and the final loss and density. Errors name the
// flag or file; FAILED_PRECONDITION when a checkpoint in output_dir was made
// with other settings (delete it, or pass the same flags).
absl::StatusOr<SbmCalibrationResult> CalibrateSbm(
    const SbmCalibrationOptions& options, const std::vector<std::vector<int32_t>>& chunks,
    const std::map<std::string, std::string>& corpus_metadata,
    const std::function<void(const SbmCalibrationProgress&)>& progress = nullptr);

}  // namespace docsparse::convert

#endif  // DOCSPARSE_CONVERT_SBM_CALIBRATION_H_
