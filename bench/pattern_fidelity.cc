#include "bench/pattern_fidelity.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/held_out_text.h"
#include "kernels/cpu_features.h"
#include "model/attention/planner_registry.h"
#include "model/checkpoint/hf_config.h"
#include "model/encoder/encoder.h"
#include "model/encoder/pooling.h"
#include "model/text/tokenizer_loader.h"

ABSL_FLAG(std::string, fid_model, "models/minilm-lsg", "fidelity: the model folder");
ABSL_FLAG(std::vector<std::string>, fid_tokens, std::vector<std::string>({"4096", "16384"}),
          "fidelity: document lengths in tokens, special tokens included");
ABSL_FLAG(std::vector<std::string>, fid_caps, std::vector<std::string>({"0.05", "0.02"}),
          "fidelity: max_density caps, besides each planner's native knobs");
ABSL_FLAG(std::string, fid_precision, "fp32", "fidelity: fp32, bf16 or auto");
ABSL_FLAG(std::vector<std::string>, fid_text, std::vector<std::string>(),
          "fidelity: held-out text files (default: every file in /usr/share/common-licenses)");
ABSL_FLAG(int, fid_repeats, 1,
          "fidelity: forwards per line; the median time is printed (after one warm-up when > 1)");
ABSL_FLAG(std::vector<std::string>, fid_planners, std::vector<std::string>(),
          "fidelity: the planners to run besides dense (default: every one the model serves)");
ABSL_FLAG(std::vector<std::string>, fid_union, std::vector<std::string>(),
          "fidelity: the union's parts (default: longformer and sbm where the model has "
          "sbm.safetensors, else longformer and lsh)");
ABSL_FLAG(std::vector<std::string>, fid_knobs, std::vector<std::string>(),
          "fidelity: starting knobs, name=value, for every planner that has the knob (a union's "
          "as part.knob); caps fit from them");
ABSL_FLAG(bool, fid_native, true, "fidelity: also run each planner at its native knobs");
ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(bool, json);

namespace docsparse::bench {
namespace {

struct Run {
  at::Tensor embedding;  // [hidden], unit norm
  double density = 0;
  double attention_gflops = 0;
  double ms = 0;
};

absl::StatusOr<Run> Embed(const Encoder& encoder, const std::vector<int32_t>& ids,
                          const ItemAttentionOptions& options) {
  EncoderBatch batch;
  batch.sequences.push_back(ids);
  batch.attention_options.push_back(options);
  const int repeats = std::max(1, absl::GetFlag(FLAGS_fid_repeats));
  std::vector<double> times;
  absl::StatusOr<EncoderOutput> out;
  CostAccount cost(encoder.shape());
  for (int i = 0; i < (repeats > 1 ? repeats + 1 : 1); ++i) {
    cost = CostAccount(encoder.shape());
    const auto start = std::chrono::steady_clock::now();
    out = encoder.Forward(batch, &cost);
    if (!out.ok()) return out.status();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (repeats == 1 || i > 0) times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  Run run;
  run.ms = times[times.size() / 2];
  run.embedding = L2Normalize(Pool(out->hidden, out->lengths, PoolingMode::kMean))[0];
  run.density = cost.MeanDensity();
  run.attention_gflops = cost.AttentionFlops() / 1e9;
  return run;
}

std::string KnobText(const AttentionKnobValues& knobs) {
  std::vector<std::string> parts;
  for (const auto& [name, value] : knobs) parts.push_back(absl::StrFormat("%s=%g", name, value));
  return absl::StrJoin(parts, " ");
}

}  // namespace

int RunFidelityBench() {
  at::set_num_threads(std::max(1, absl::GetFlag(FLAGS_threads)));
  c10::InferenceMode inference_mode;
  const std::string dir = absl::GetFlag(FLAGS_fid_model);
  absl::StatusOr<EncoderConfig> config = LoadEncoderConfig(dir + "/config.json");
  const std::optional<Precision> precision = ParsePrecision(absl::GetFlag(FLAGS_fid_precision));
  if (!config.ok() || !precision.has_value()) {
    std::fprintf(stderr, "%s\n",
                 config.ok() ? "bad --fid_precision" : config.status().ToString().c_str());
    return 2;
  }
  PlannerSource source = PlannerSourceOf(*config);
  source.model_dir = dir;
  for (const std::string& part : absl::GetFlag(FLAGS_fid_union)) {
    const std::optional<AttentionKind> kind = AttentionKindNamed(part);
    if (!kind.has_value()) {
      std::fprintf(stderr, "bad --fid_union %s\n", part.c_str());
      return 2;
    }
    source.union_parts.push_back(*kind);
  }
  AttentionKnobValues start_knobs;
  for (const std::string& knob : absl::GetFlag(FLAGS_fid_knobs)) {
    const std::vector<std::string> parts = absl::StrSplit(knob, '=');
    if (parts.size() != 2 || !absl::SimpleAtod(parts[1], &start_knobs[parts[0]])) {
      std::fprintf(stderr, "bad --fid_knobs %s\n", knob.c_str());
      return 2;
    }
  }
  // As the server serves the folder: its checkpoint's own attention.
  const NativeAttention checkpoint = NativeAttentionOf(*config);
  source.configured_knobs = checkpoint.knobs;
  absl::StatusOr<std::unique_ptr<ModelPlanners>> planners =
      ModelPlanners::Make(checkpoint.kind, source);
  if (!planners.ok()) {
    std::fprintf(stderr, "%s\n", planners.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<Encoder>> encoder =
      Encoder::Create(dir, *config, (*planners)->MakeMechanism(), *precision);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizer(dir);
  if (!encoder.ok() || !tokenizer.ok()) {
    std::fprintf(stderr, "%s\n",
                 (!encoder.ok() ? encoder.status() : tokenizer.status()).ToString().c_str());
    return 1;
  }
  const std::vector<int32_t> text_ids =
      (*tokenizer)->Encode(HeldOutText(absl::GetFlag(FLAGS_fid_text)));
  std::fprintf(stderr, "fidelity: %s, %zu held-out tokens, isa %s, %d threads\n", dir.c_str(),
               text_ids.size(), std::string(IsaName(HostCpuFeatures())).c_str(),
               at::get_num_threads());
  const AttentionKind native = (*planners)->native().kind();
  for (const std::string& tokens_text : absl::GetFlag(FLAGS_fid_tokens)) {
    int64_t tokens = 0;
    if (!absl::SimpleAtoi(tokens_text, &tokens) || tokens < 3 ||
        tokens > (*encoder)->max_sequence_length() ||
        static_cast<size_t>(tokens) > text_ids.size()) {
      std::fprintf(stderr, "bad --fid_tokens %s\n", tokens_text.c_str());
      return 2;
    }
    const std::vector<int32_t> ids = (*tokenizer)->Frame(text_ids, static_cast<size_t>(tokens));
    ItemAttentionOptions dense;
    if (native != AttentionKind::kDense) dense.kind = AttentionKind::kDense;
    absl::StatusOr<Run> reference = Embed(**encoder, ids, dense);
    if (!reference.ok()) {
      std::fprintf(stderr, "dense: %s\n", reference.status().ToString().c_str());
      return 1;
    }
    std::printf("| %lld | dense | – | %s | 1.0000 | %.1f | %.0f | 1.0000 |\n",
                static_cast<long long>(tokens), "", reference->attention_gflops, reference->ms);
    std::fflush(stdout);
    const std::vector<std::string> chosen = absl::GetFlag(FLAGS_fid_planners);
    for (AttentionKind kind : (*planners)->kinds()) {
      if (kind == AttentionKind::kDense) continue;
      const std::string name(AttentionKindName(kind));
      if (!chosen.empty() && std::find(chosen.begin(), chosen.end(), name) == chosen.end()) {
        continue;
      }
      const AttentionPlanner& planner = *(*planners)->Find(kind);
      std::vector<std::string> caps;
      if (absl::GetFlag(FLAGS_fid_native)) caps.push_back("native");
      for (const std::string& cap : absl::GetFlag(FLAGS_fid_caps)) caps.push_back(cap);
      for (const std::string& cap_text : caps) {
        AttentionCap cap;
        double cap_value = 0;
        if (cap_text != "native") {
          if (!absl::SimpleAtod(cap_text, &cap_value)) return 2;
          cap.max_density = cap_value;
        }
        // As the server plans a request (server/request_validation.cc).
        AttentionKnobValues start;
        const std::map<std::string, KnobRange> ranges = planner.Knobs();
        for (const auto& [knob, value] : start_knobs) {
          if (ranges.count(knob) > 0) start[knob] = value;
        }
        const BudgetFit fit =
            planner.FitBudget(cap, StartingKnobs(planner, start), {tokens}, source.shape);
        ItemAttentionOptions options;
        if (kind != native) options.kind = kind;
        options.knobs = fit.knobs;
        options.seed = 1;
        absl::StatusOr<Run> run = Embed(**encoder, ids, options);
        if (!run.ok()) {
          std::fprintf(stderr, "%s: %s\n", std::string(planner.name()).c_str(),
                       run.status().ToString().c_str());
          return 1;
        }
        const double cosine = (run->embedding * reference->embedding).sum().item<double>();
        if (absl::GetFlag(FLAGS_json)) {
          std::printf(
              "{\"tokens\": %lld, \"planner\": \"%s\", \"cap\": \"%s\", \"fits\": %s, "
              "\"knobs\": \"%s\", \"density\": %.5f, \"attention_gflops\": %.2f, "
              "\"forward_ms\": %.1f, \"cosine\": %.4f}\n",
              static_cast<long long>(tokens), std::string(planner.name()).c_str(), cap_text.c_str(),
              fit.fits ? "true" : "false", KnobText(fit.knobs).c_str(), run->density,
              run->attention_gflops, run->ms, cosine);
        } else {
          std::printf("| %lld | %s | %s%s | %s | %.4f | %.1f | %.0f | %.4f |\n",
                      static_cast<long long>(tokens), std::string(planner.name()).c_str(),
                      cap_text.c_str(), fit.fits ? "" : " (floor)", KnobText(fit.knobs).c_str(),
                      run->density, run->attention_gflops, run->ms, cosine);
        }
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace docsparse::bench
