// How closely an SBM model's embeddings follow its dense model's, against
// density, for the calibrated sbm.safetensors and for uncalibrated
// parameters (the reference initialisation with the same k): on held-out
// text, the mean cosine similarity between mean-pooled, normalised
// embeddings of the same windows, with β solved per layer for each density
// target (as a request's max_density budget would).
#ifndef DOCSPARSE_CONVERT_SBM_FIDELITY_H_
#define DOCSPARSE_CONVERT_SBM_FIDELITY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace docsparse::convert {

struct SbmFidelityOptions {
  std::string model_dir;              // checkpoint + sbm.safetensors (calibrated)
  std::vector<std::string> held_out;  // files or folders of text not used to calibrate
  // Density targets; 0 means β = 0 (each parameter set's natural density).
  std::vector<double> densities = {0.01, 0.02, 0.05, 0.1, 0.2, 0};
  int window_tokens = 512;  // framed window length (at most the model's)
  int windows_per_file = 2;
  int max_windows = 24;
  int seeds = 2;  // sampling seeds averaged per window
  uint64_t uncalibrated_seed = 1;
};

struct SbmFidelityRow {
  double target = 0;  // 0: β = 0
  double uncalibrated_density = 0, uncalibrated_cosine = 0;
  double calibrated_density = 0, calibrated_cosine = 0;
  double calibrated_cosine_min = 0;  // worst window
  // The calibrated parameters with the inclusion correction, as served
  // (model/attention/sbm_attention.h).
  double corrected_density = 0, corrected_cosine = 0;
  double corrected_cosine_min = 0;  // worst window
};

struct SbmFidelityReport {
  std::vector<SbmFidelityRow> rows;
  int windows = 0;
  int64_t tokens = 0;  // real tokens over the windows
  std::vector<std::string> files;
};

absl::StatusOr<SbmFidelityReport> MeasureSbmFidelity(const SbmFidelityOptions& options);

// The report as a Markdown table (docs/BENCHMARKS.md).
std::string FormatSbmFidelity(const SbmFidelityReport& report);

}  // namespace docsparse::convert

#endif  // DOCSPARSE_CONVERT_SBM_FIDELITY_H_
