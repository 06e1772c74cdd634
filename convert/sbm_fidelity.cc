#include "convert/sbm_fidelity.h"

#include <c10/core/InferenceMode.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "convert/model_files.h"
#include "convert/sbm_corpus.h"
#include "model/attention/sbm_attention.h"
#include "model/attention/sbm_parameters.h"
#include "model/checkpoint/hf_config.h"
#include "model/encoder/encoder.h"
#include "model/text/tokenizer_loader.h"
#include "model/text/unicode_text.h"

namespace docsparse::convert {
namespace {

// Framed windows of the held-out files: up to windows_per_file from each,
// in file order, at most max_windows.
absl::StatusOr<std::vector<std::vector<int32_t>>> HeldOutWindows(const Tokenizer& tokenizer,
                                                                 const SbmFidelityOptions& options,
                                                                 SbmFidelityReport* report) {
  ASSIGN_OR_RETURN(std::vector<std::string> files, ListCorpusFiles(options.held_out));
  const size_t frame = tokenizer.FramePrefix().size() + tokenizer.FrameSuffix().size();
  const size_t piece = static_cast<size_t>(options.window_tokens) - frame;
  std::vector<std::vector<int32_t>> windows;
  for (const std::string& file : files) {
    if (static_cast<int>(windows.size()) >= options.max_windows) break;
    std::ifstream in(file, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string text = buffer.str();
    if (text.empty() || text.find('\0') != std::string::npos || !ValidateUtf8(text).ok()) {
      continue;
    }
    const std::vector<int32_t> ids = tokenizer.Encode(text);
    int taken = 0;
    for (size_t begin = 0; begin < ids.size() && taken < options.windows_per_file &&
                           static_cast<int>(windows.size()) < options.max_windows;
         begin += piece, ++taken) {
      const size_t end = std::min(ids.size(), begin + piece);
      if (end - begin < 32) break;  // too short to say much about attention
      windows.push_back(
          tokenizer.Frame(std::vector<int32_t>(ids.begin() + begin, ids.begin() + end),
                          static_cast<size_t>(options.window_tokens)));
      report->tokens += static_cast<int64_t>(windows.back().size());
    }
    if (taken > 0) report->files.push_back(file);
  }
  if (windows.empty()) return absl::InvalidArgumentError("--held-out: no usable text");
  return windows;
}

// Mean-pooled, L2-normalised embedding of each window: [windows, h].
at::Tensor Embeddings(const EncoderOutput& output) {
  const int64_t rows = output.hidden.size(0);
  std::vector<at::Tensor> pooled;
  for (int64_t r = 0; r < rows; ++r) {
    pooled.push_back(output.hidden[r].slice(0, 0, output.lengths[r]).mean(0));
  }
  const at::Tensor stacked = at::stack(pooled);
  return stacked / stacked.norm(2, 1, true).clamp_min(1e-12);
}

struct Measured {
  double density = 0;
  double cosine = 0;
  double worst = 1;
};

// One window at a time (windows differ in length; one at a time also keeps
// each plan independent of batching, as it is anyway).
absl::StatusOr<Measured> Measure(const Encoder& encoder,
                                 const std::vector<std::vector<int32_t>>& windows,
                                 const at::Tensor& dense, double target, int seeds,
                                 bool inclusion_correction = false) {
  Measured m;
  int runs = 0;
  for (size_t w = 0; w < windows.size(); ++w) {
    double window_cosine = 0;
    for (int seed = 0; seed < seeds; ++seed) {
      EncoderBatch batch;
      batch.sequences = {windows[w]};
      ItemAttentionOptions options;
      options.knobs[kSbmTargetDensityKnob] = target;
      options.knobs[kSbmInclusionCorrectionKnob] = inclusion_correction ? 1 : 0;
      options.seed = static_cast<uint64_t>(1000 * w + seed);
      batch.attention_options = {options};
      CostAccount cost(encoder.shape());
      ASSIGN_OR_RETURN(EncoderOutput output, encoder.Forward(batch, &cost));
      const double cosine = (Embeddings(output)[0] * dense[w]).sum().item<double>();
      m.density += cost.MeanDensity();
      m.cosine += cosine;
      window_cosine += cosine;
      ++runs;
    }
    m.worst = std::min(m.worst, window_cosine / seeds);
  }
  m.density /= runs;
  m.cosine /= runs;
  return m;
}

}  // namespace

absl::StatusOr<SbmFidelityReport> MeasureSbmFidelity(const SbmFidelityOptions& options) {
  ASSIGN_OR_RETURN(const EncoderConfig config,
                   LoadEncoderConfig(JoinPath(options.model_dir, "config.json")));
  ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, LoadTokenizer(options.model_dir));
  ASSIGN_OR_RETURN(std::unique_ptr<Encoder> dense,
                   Encoder::Create(options.model_dir, config, MakeDenseAttention()));
  ASSIGN_OR_RETURN(std::shared_ptr<const SbmParameters> calibrated,
                   SbmParameters::LoadFromModelDir(options.model_dir, dense->shape()));
  const std::shared_ptr<const SbmParameters> uncalibrated = SbmParameters::Random(
      calibrated->num_layers(), calibrated->num_heads(), calibrated->head_dim(),
      calibrated->num_clusters(), options.uncalibrated_seed);
  ASSIGN_OR_RETURN(std::unique_ptr<Encoder> sbm_calibrated,
                   Encoder::Create(options.model_dir, config, MakeSbmAttention(calibrated)));
  ASSIGN_OR_RETURN(std::unique_ptr<Encoder> sbm_uncalibrated,
                   Encoder::Create(options.model_dir, config, MakeSbmAttention(uncalibrated)));

  SbmFidelityReport report;
  SbmFidelityOptions clipped = options;
  clipped.window_tokens =
      static_cast<int>(std::min<int64_t>(options.window_tokens, dense->max_sequence_length()));
  ASSIGN_OR_RETURN(const std::vector<std::vector<int32_t>> windows,
                   HeldOutWindows(*tokenizer, clipped, &report));
  report.windows = static_cast<int>(windows.size());
  try {
    c10::InferenceMode inference_mode;
    std::vector<at::Tensor> reference;
    for (const std::vector<int32_t>& window : windows) {
      EncoderBatch batch;
      batch.sequences = {window};
      ASSIGN_OR_RETURN(EncoderOutput output, dense->Forward(batch, nullptr));
      reference.push_back(Embeddings(output)[0]);
    }
    const at::Tensor dense_embeddings = at::stack(reference);
    for (double target : options.densities) {
      SbmFidelityRow row;
      row.target = target;
      ASSIGN_OR_RETURN(const Measured u, Measure(*sbm_uncalibrated, windows, dense_embeddings,
                                                 target, options.seeds));
      ASSIGN_OR_RETURN(const Measured c,
                       Measure(*sbm_calibrated, windows, dense_embeddings, target, options.seeds));
      row.uncalibrated_density = u.density;
      row.uncalibrated_cosine = u.cosine;
      row.calibrated_density = c.density;
      row.calibrated_cosine = c.cosine;
      row.calibrated_cosine_min = c.worst;
      ASSIGN_OR_RETURN(const Measured corrected,
                       Measure(*sbm_calibrated, windows, dense_embeddings, target, options.seeds,
                               /*inclusion_correction=*/true));
      row.corrected_density = corrected.density;
      row.corrected_cosine = corrected.cosine;
      row.corrected_cosine_min = corrected.worst;
      report.rows.push_back(row);
    }
  } catch (const c10::Error& error) {
    return absl::InternalError(
        absl::StrCat("fidelity measurement failed: ", error.what_without_backtrace()));
  }
  return report;
}

std::string FormatSbmFidelity(const SbmFidelityReport& report) {
  std::string text = absl::StrFormat(
      "%d held-out windows (%d tokens) from %d files; cosine(SBM embedding, dense embedding), "
      "mean over windows and seeds\n\n"
      "| max_density | uncalibrated: density | uncalibrated: cosine | calibrated: density | "
      "calibrated: cosine | calibrated: worst window | corrected: density | corrected: cosine | "
      "corrected: worst window |\n"
      "|---|---|---|---|---|---|---|---|---|\n",
      report.windows, static_cast<int>(report.tokens), static_cast<int>(report.files.size()));
  for (const SbmFidelityRow& row : report.rows) {
    const std::string target =
        row.target > 0 ? absl::StrFormat("%.0f%%", 100 * row.target) : "none (β = 0)";
    absl::StrAppendFormat(
        &text, "| %s | %.2f%% | %.4f | %.2f%% | %.4f | %.4f | %.2f%% | %.4f | %.4f |\n", target,
        100 * row.uncalibrated_density, row.uncalibrated_cosine, 100 * row.calibrated_density,
        row.calibrated_cosine, row.calibrated_cosine_min, 100 * row.corrected_density,
        row.corrected_cosine, row.corrected_cosine_min);
  }
  return text;
}

}  // namespace docsparse::convert
