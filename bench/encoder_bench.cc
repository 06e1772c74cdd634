#include "bench/encoder_bench.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "bench/median_ms.h"
#include "common/cpu_runtime.h"
#include "kernels/cpu_features.h"
#include "model/attention/lsg_attention.h"
#include "model/attention/planner_registry.h"
#include "model/attention/sbm_attention.h"
#include "model/attention/sbm_parameters.h"
#include "model/checkpoint/hf_config.h"
#include "model/encoder/encoder.h"
#include "model/encoder/linear.h"
#include "model/encoder/linear_precision.h"

ABSL_FLAG(std::string, enc_model, "models/minilm-lsg", "encoder: the model folder");
ABSL_FLAG(std::vector<std::string>, enc_tokens, std::vector<std::string>({"512", "4096", "16384"}),
          "encoder: document lengths, special tokens included");
ABSL_FLAG(std::string, enc_attention, "checkpoint",
          "encoder: the checkpoint's own attention (dense, or LSG for an LSG checkpoint), or sbm "
          "(the model folder's sbm.safetensors)");
ABSL_FLAG(double, enc_density, 0,
          "encoder: with --enc_attention sbm, the target density (0: the calibrated model's own)");
ABSL_FLAG(std::vector<std::string>, enc_precision, std::vector<std::string>({"fp32", "bf16"}),
          "encoder: precisions (fp32, bf16, int8, auto)");

ABSL_DECLARE_FLAG(int, repeats);
ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(bool, json);

namespace docsparse::bench {
namespace {

struct Breakdown {
  double forward_ms = 0;
  double linear_ms = 0;  // all layers
  double attention_ms = 0;
  double model_flops = 0;
  double linear_flops = 0;
  double attention_flops = 0;
};

// The linear products of all layers at `rows` rows, timed alone in `precision`.
double LinearMs(const EncoderShape& shape, int64_t rows, Precision precision, int repeats) {
  const int64_t h = shape.hidden;
  const int64_t inner = shape.intermediate;
  struct Product {
    int64_t in, out;
  };
  const Product products[] = {{h, 3 * h}, {h, h}, {h, inner}, {inner, h}};
  double ms = 0;
  for (const Product& p : products) {
    const at::Tensor x = at::randn({1, rows, p.in}).to(ActivationType(precision));
    const Linear linear(at::randn({p.out, p.in}) * 0.05, at::zeros({p.out}), precision);
    ms += MedianMs(repeats, [&] { linear(x); });
  }
  return ms * shape.num_layers;
}

// The attention options of every document: a fixed seed, and with
// --enc_attention sbm its --enc_density target.
ItemAttentionOptions Options() {
  ItemAttentionOptions options;
  options.seed = 1;
  const double density = absl::GetFlag(FLAGS_enc_density);
  if (density > 0) options.knobs[kSbmTargetDensityKnob] = density;
  return options;
}

// The mechanism --enc_attention names for the model in `dir`.
absl::StatusOr<std::unique_ptr<AttentionMechanism>> MakeAttention(const std::string& dir,
                                                                  const EncoderConfig& config) {
  const std::string kind = absl::GetFlag(FLAGS_enc_attention);
  if (kind == "checkpoint") return MakeCheckpointAttention(config.lsg);
  if (kind != "sbm") {
    return absl::InvalidArgumentError("--enc_attention " + kind + ": checkpoint or sbm");
  }
  absl::StatusOr<std::shared_ptr<const SbmParameters>> parameters =
      SbmParameters::LoadFromModelDir(dir, EncoderShapeOf(config));
  if (!parameters.ok()) return parameters.status();
  return MakeSbmAttention(*parameters);
}

int RunCase(const Encoder& encoder, int64_t tokens, Precision precision, int repeats) {
  const EncoderShape shape = encoder.shape();
  EncoderBatch batch;
  std::vector<int32_t> ids(static_cast<size_t>(tokens));
  for (int64_t i = 0; i < tokens; ++i) ids[i] = static_cast<int32_t>(1000 + (i * 7919) % 20000);
  batch.sequences.push_back(ids);
  batch.attention_options.push_back(Options());

  Breakdown b;
  CostAccount cost(shape);
  absl::StatusOr<EncoderOutput> probe = encoder.Forward(batch, &cost);
  if (!probe.ok()) {
    std::fprintf(stderr, "encoder forward: %s\n", probe.status().ToString().c_str());
    return 1;
  }
  b.model_flops = cost.TotalFlops();
  b.linear_flops = cost.LinearFlops();
  b.attention_flops = cost.AttentionFlops();
  b.forward_ms = MedianMs(repeats, [&] { (void)encoder.Forward(batch, nullptr); });
  // The rows the layers really run: LSG adds global tokens and pads to a block.
  const int64_t rows =
      static_cast<int64_t>(std::llround(b.linear_flops / EncoderLinearFlops(1, shape)));
  b.linear_ms = LinearMs(shape, rows, encoder.precision(), repeats);

  const int64_t heads = shape.num_heads;
  const auto activations = [&] {
    return at::randn({1, heads, rows, shape.head_dim}).to(ActivationType(encoder.precision()));
  };
  const Precision attention_precision =
      ActivationType(encoder.precision()) == at::kBFloat16 ? Precision::kBf16 : Precision::kFp32;
  AttentionInputs inputs{activations(), activations(),      activations(), {rows}, 0,
                         {Options()},   attention_precision};
  std::vector<ItemAttentionCost> item_costs;
  b.attention_ms = shape.num_layers *
                   MedianMs(repeats, [&] { encoder.attention().Forward(inputs, &item_costs); });
  const double other_ms = std::max(0.0, b.forward_ms - b.linear_ms - b.attention_ms);
  const std::string isa(IsaName(HostCpuFeatures()));
  const std::string precision_name(PrecisionName(encoder.precision()));
  const auto gflops = [](double flops, double ms) { return ms > 0 ? flops / ms / 1e6 : 0.0; };
  if (absl::GetFlag(FLAGS_json)) {
    std::printf(
        "{\"bench\":\"encoder\",\"model\":\"%s\",\"tokens\":%lld,\"rows\":%lld,"
        "\"precision\":\"%s\",\"requested\":\"%s\",\"isa\":\"%s\",\"threads\":%d,"
        "\"forward_ms\":%.2f,\"docs_per_s\":%.3f,\"model_gflops\":%.1f,"
        "\"linear_ms\":%.2f,\"linear_gflops\":%.1f,\"attention_ms\":%.2f,"
        "\"attention_gflops\":%.1f,\"other_ms\":%.2f}\n",
        absl::GetFlag(FLAGS_enc_model).c_str(), static_cast<long long>(tokens),
        static_cast<long long>(rows), precision_name.c_str(),
        std::string(PrecisionName(precision)).c_str(), isa.c_str(), at::get_num_threads(),
        b.forward_ms, 1000.0 / b.forward_ms, gflops(b.model_flops, b.forward_ms), b.linear_ms,
        gflops(b.linear_flops, b.linear_ms), b.attention_ms,
        gflops(b.attention_flops, b.attention_ms), other_ms);
  } else {
    std::printf(
        "%-22s %6lld tok  %-4s on %-11s  forward %9.2f ms  %7.2f docs/s  %6.1f GFLOP/s | "
        "linear %8.2f ms %6.1f GFLOP/s | attention %8.2f ms %6.1f GFLOP/s | other %7.2f ms\n",
        absl::GetFlag(FLAGS_enc_model).c_str(), static_cast<long long>(tokens),
        precision_name.c_str(), isa.c_str(), b.forward_ms, 1000.0 / b.forward_ms,
        gflops(b.model_flops, b.forward_ms), b.linear_ms, gflops(b.linear_flops, b.linear_ms),
        b.attention_ms, gflops(b.attention_flops, b.attention_ms), other_ms);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int RunEncoderBench() {
  at::set_num_threads(std::max(1, absl::GetFlag(FLAGS_threads)));
  std::fprintf(stderr, "BLAS %s\n", BlasDescription().c_str());
  c10::InferenceMode inference_mode;
  const std::string dir = absl::GetFlag(FLAGS_enc_model);
  absl::StatusOr<EncoderConfig> config = LoadEncoderConfig(dir + "/config.json");
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    return 1;
  }
  int status = 0;
  for (const std::string& precision_text : absl::GetFlag(FLAGS_enc_precision)) {
    const std::optional<Precision> precision = ParsePrecision(precision_text);
    if (!precision.has_value()) {
      std::fprintf(stderr, "bad --enc_precision %s (fp32, bf16, auto)\n", precision_text.c_str());
      return 2;
    }
    absl::StatusOr<std::unique_ptr<AttentionMechanism>> attention = MakeAttention(dir, *config);
    if (!attention.ok()) {
      std::fprintf(stderr, "%s\n", attention.status().ToString().c_str());
      return 2;
    }
    absl::StatusOr<std::unique_ptr<Encoder>> encoder =
        Encoder::Create(dir, *config, std::move(*attention), *precision);
    if (!encoder.ok()) {
      std::fprintf(stderr, "%s\n", encoder.status().ToString().c_str());
      return 1;
    }
    for (const std::string& tokens_text : absl::GetFlag(FLAGS_enc_tokens)) {
      int64_t tokens = 0;
      if (!absl::SimpleAtoi(tokens_text, &tokens) || tokens < 2 ||
          tokens > (*encoder)->max_sequence_length()) {
        std::fprintf(stderr, "bad --enc_tokens %s (2 to %lld for %s)\n", tokens_text.c_str(),
                     static_cast<long long>((*encoder)->max_sequence_length()), dir.c_str());
        return 2;
      }
      status |= RunCase(**encoder, tokens, *precision, absl::GetFlag(FLAGS_repeats));
    }
  }
  return status;
}

}  // namespace docsparse::bench
