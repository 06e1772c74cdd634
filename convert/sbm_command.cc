// `docsparse-convert sbm`: flags -> corpus chunks -> CalibrateSbm, with a
// progress line (step, loss, density) on stderr, and optionally the fidelity
// table on held-out text.
#include <ATen/Parallel.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "convert/commands.h"
#include "convert/flag_parser.h"
#include "convert/sbm_calibration.h"
#include "convert/sbm_corpus.h"
#include "convert/sbm_fidelity.h"
#include "model/text/tokenizer_loader.h"

namespace docsparse::convert {
namespace {

constexpr char kUsage[] =
    "docsparse-convert sbm --input DIR --output DIR --corpus FILES [flags]\n\n"
    "Attaches SBM attention (Cho et al., NeurIPS 2022) to an encoder checkpoint (BERT,\n"
    "RoBERTa, DistilBERT, dense or LSG-converted) and calibrates it: the model is frozen and\n"
    "each layer's SBM parameters (a shared MLP and k cluster embeddings per head) learn to\n"
    "reproduce the layer's dense attention output with sampled masks (straight-through\n"
    "estimator, edge exploration delta, density penalty lambda), on text the machine has.\n"
    "Writes OUTPUT/sbm.safetensors; a new OUTPUT also gets the checkpoint's files (linked).\n"
    "Resumable: rerun with the same flags to continue after an interruption, or with more\n"
    "--steps to train further. FILES: comma-separated files or folders (walked).";

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> parts;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    parts.emplace_back(part);
  }
  return parts;
}

// Rewrites one stderr line on a terminal; to a log, prints every `every`
// steps (0: every 10%).
class ProgressLine {
 public:
  ProgressLine(bool quiet, int64_t every)
      : quiet_(quiet), every_(every), tty_(::isatty(STDERR_FILENO) == 1 && every == 0) {}

  void operator()(const SbmCalibrationProgress& p) {
    if (quiet_) return;
    const int decile = p.steps > 0 ? static_cast<int>(10 * p.step / p.steps) : 10;
    const bool done = p.step == p.steps;
    const bool due = every_ > 0 ? p.step % every_ == 0 : decile != last_decile_;
    if (!tty_ && !done && !due) return;
    last_decile_ = decile;
    const int width = 24;
    const int filled = p.steps > 0 ? static_cast<int>(width * p.step / p.steps) : width;
    std::fprintf(stderr,
                 "%scalibrating [%s%s] step %lld/%lld  loss %.4f  distill %.4f  "
                 "density %.3f  %.0fs%s",
                 tty_ ? "\r" : "", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), static_cast<long long>(p.step),
                 static_cast<long long>(p.steps), p.loss, p.distill, p.density, p.seconds,
                 tty_ && !done ? "" : "\n");
    std::fflush(stderr);
  }

 private:
  bool quiet_;
  int64_t every_;
  bool tty_;
  int last_decile_ = -1;
};

}  // namespace

int RunSbmCommand(int argc, char** argv) {
  std::string input, output, corpus, held_out, densities = "0.01,0.02,0.05,0.1,0.2,0";
  int64_t clusters = 16, steps = 120, batch = 4, chunk_tokens = 128, seed = 1,
          checkpoint_every = 25, threads = 0, corpus_max_kb = 2048, windows = 24, log_every = 0,
          eval_seeds = 2;
  std::string lambda = "3", delta = "0.01", learning_rate = "0.01", mass_weight = "1",
              logit_decay = "0.01", train_densities = "0";
  bool resume = true, eval_only = false, quiet = false;

  FlagParser flags(kUsage);
  flags.AddString("input", &input, "encoder model folder (config.json, weights, tokenizer)",
                  /*required=*/true);
  flags.AddString("output", &output, "folder for sbm.safetensors (may equal --input)",
                  /*required=*/true);
  flags.AddString("corpus", &corpus, "calibration text: comma-separated files or folders");
  flags.AddInt("clusters", &clusters, "SBM clusters k per head");
  flags.AddString("lambda", &lambda, "density penalty weight");
  flags.AddString("delta", &delta, "random edge exploration added to edge probabilities");
  flags.AddString("logit-decay", &logit_decay,
                  "penalty on squared membership logits (keeps sigmoids trainable)");
  flags.AddString("mass-weight", &mass_weight,
                  "weight of the expected dense attention mass the edges capture");
  flags.AddString("train-densities", &train_densities,
                  "MIN,MAX: each step trains at a density drawn log-uniformly in between "
                  "(beta solved for it); 0 trains at beta = 0");
  flags.AddInt("steps", &steps, "optimisation steps (total, counting resumed ones)");
  flags.AddInt("batch", &batch, "chunks per step");
  flags.AddString("learning-rate", &learning_rate, "Adam learning rate");
  flags.AddInt("chunk-tokens", &chunk_tokens, "tokens per training chunk, special tokens included");
  flags.AddInt("corpus-max-kb", &corpus_max_kb, "read at most this much calibration text");
  flags.AddInt("seed", &seed, "initial parameters, batches and masks");
  flags.AddInt("checkpoint-every", &checkpoint_every, "steps between resumable checkpoints");
  flags.AddBool("resume", &resume, "continue from OUTPUT's checkpoint when there is one");
  flags.AddString("held-out", &held_out,
                  "text not in --corpus: print the fidelity table (cosine to dense) after");
  flags.AddString("eval-densities", &densities, "density targets of the table (0: beta = 0)");
  flags.AddInt("eval-windows", &windows, "held-out windows (512 tokens) to measure");
  flags.AddInt("eval-seeds", &eval_seeds, "sampling seeds per held-out window");
  flags.AddBool("eval-only", &eval_only, "only measure OUTPUT's sbm.safetensors on --held-out");
  flags.AddInt("threads", &threads, "LibTorch threads (0: all cores)");
  flags.AddBool("quiet", &quiet, "no progress line");
  flags.AddInt("log-every", &log_every,
               "a progress line every N steps (0: one line on a terminal)");

  const absl::Status parsed = flags.Parse(argc, argv);
  if (flags.help_requested()) {
    std::fputs(flags.Help().c_str(), stdout);
    return 0;
  }
  auto fail = [](int code, const std::string& message) {
    std::fprintf(stderr, "docsparse-convert sbm: %s\n", message.c_str());
    return code;
  };
  if (!parsed.ok()) return fail(2, std::string(parsed.message()));
  SbmCalibrationOptions options;
  if (!absl::SimpleAtod(lambda, &options.lambda) || !absl::SimpleAtod(delta, &options.delta) ||
      !absl::SimpleAtod(learning_rate, &options.learning_rate) ||
      !absl::SimpleAtod(mass_weight, &options.mass_weight) ||
      !absl::SimpleAtod(logit_decay, &options.logit_decay)) {
    return fail(2,
                "--lambda, --delta, --mass-weight, --logit-decay and --learning-rate must be "
                "numbers");
  }
  {
    const std::vector<std::string> range = SplitList(train_densities);
    if (range.size() == 1 && range[0] == "0") {
      options.train_density_min = options.train_density_max = 0;
    } else if (range.size() != 2 || !absl::SimpleAtod(range[0], &options.train_density_min) ||
               !absl::SimpleAtod(range[1], &options.train_density_max)) {
      return fail(2, "--train-densities: expected MIN,MAX or 0");
    }
  }
  std::vector<double> targets;
  for (const std::string& d : SplitList(densities)) {
    double value = 0;
    if (!absl::SimpleAtod(d, &value) || value < 0 || value > 1) {
      return fail(2, absl::StrCat("--eval-densities: \"", d, "\" is not in [0, 1]"));
    }
    targets.push_back(value);
  }
  if (eval_only && held_out.empty()) return fail(2, "--eval-only needs --held-out");
  if (!eval_only && corpus.empty()) return fail(2, "--corpus is required");
  at::set_num_threads(threads > 0 ? static_cast<int>(threads)
                                  : static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN))));

  if (!eval_only) {
    options.input_dir = input;
    options.output_dir = output;
    options.clusters = static_cast<int>(clusters);
    options.steps = steps;
    options.batch = static_cast<int>(batch);
    options.seed = static_cast<uint64_t>(seed);
    options.checkpoint_every = checkpoint_every;
    options.resume = resume;

    absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizer(input);
    if (!tokenizer.ok()) return fail(1, std::string(tokenizer.status().message()));
    CorpusOptions corpus_options;
    corpus_options.paths = SplitList(corpus);
    corpus_options.max_bytes = corpus_max_kb * 1024;
    corpus_options.chunk_tokens = static_cast<int>(chunk_tokens);
    absl::StatusOr<TokenChunks> chunks = LoadTokenChunks(**tokenizer, corpus_options);
    if (!chunks.ok()) return fail(1, std::string(chunks.status().message()));
    if (!quiet) {
      std::fprintf(stderr,
                   "docsparse-convert sbm: %zu chunks of %lld tokens from %zu files (%.1f KB; "
                   "%d skipped as not text)\n",
                   chunks->chunks.size(), static_cast<long long>(chunk_tokens),
                   chunks->files.size(), chunks->bytes / 1024.0, chunks->skipped);
    }
    const std::map<std::string, std::string> corpus_metadata = {
        {"corpus", corpus.size() > 200 ? corpus.substr(0, 200) + "..." : corpus},
        {"corpus_files", std::to_string(chunks->files.size())},
        {"corpus_bytes", std::to_string(chunks->bytes)},
        {"corpus_chunks", std::to_string(chunks->chunks.size())}};
    ProgressLine line(quiet, log_every);
    absl::StatusOr<SbmCalibrationResult> result =
        CalibrateSbm(options, chunks->chunks, corpus_metadata,
                     [&line](const SbmCalibrationProgress& p) { line(p); });
    if (!result.ok()) return fail(1, std::string(result.status().message()));
    const std::string resumed =
        result->first_step > 0 ? absl::StrCat(", resumed at ", result->first_step) : "";
    std::printf(
        "docsparse-convert sbm: wrote %s (k = %d, %lld steps%s, distill %.4f, density %.3f) in "
        "%.1fs\n",
        result->sbm_path.c_str(), options.clusters, static_cast<long long>(result->steps),
        resumed.c_str(), result->distill, result->density, result->seconds);
  }

  if (!held_out.empty()) {
    SbmFidelityOptions fidelity;
    fidelity.model_dir = output;
    fidelity.held_out = SplitList(held_out);
    fidelity.densities = targets;
    fidelity.max_windows = static_cast<int>(windows);
    fidelity.seeds = static_cast<int>(eval_seeds);
    fidelity.uncalibrated_seed = static_cast<uint64_t>(seed);
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<SbmFidelityReport> report = MeasureSbmFidelity(fidelity);
    if (!report.ok()) return fail(1, std::string(report.status().message()));
    std::printf("%s", FormatSbmFidelity(*report).c_str());
    std::printf("(measured in %.1fs)\n",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return 0;
}

}  // namespace docsparse::convert
