// docsparse-bench: micro-benchmarks that print figures (never timed tests).
// `docsparse-bench seq2seq` is bench/seq2seq_bench.h, `docsparse-bench encoder`
// bench/encoder_bench.h, `docsparse-bench generate` bench/generate_bench.h,
// `docsparse-bench metrics` bench/metrics_bench.h, `docsparse-bench lsg_plan`
// bench/lsg_plan_bench.h, `docsparse-bench sbm_tiles` bench/sbm_tiles_bench.h,
// `docsparse-bench edges` bench/edge_executor_bench.h.
//
//   docsparse-bench attention --impl dense,lsg --seq 1024,4096,16384
//       [--heads 12] [--dim 64] [--density D,...] [--repeats 5] [--threads 2]
//       [--seed 1] [--attn_precision fp32|bf16] [--json]
//
// --attn_precision bf16 gives the mechanism bf16 q, k and v and a bf16
// model's precision (its bf16 executors where the CPU has them).
//
// One line per (impl, seq, density) case: impl, seq, heads, dim, ms (median
// of the repeats, after one warm-up), cpu_ms (median CPU time of all
// threads: robust to other load on the machine), gflops (computed attention FLOPs /
// time: 4·dim per computed query-key pair plus planner overhead), density
// (computed pairs / seq² over all heads), edges, peak_rss_mb (the case's
// process peak) and baseline_rss_mb (the same process before q, k, v
// existed). Each case runs in a fresh child process so peaks are its own.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/attention_impls.h"
#include "bench/edge_executor_bench.h"
#include "bench/encoder_bench.h"
#include "bench/generate_bench.h"
#include "bench/lsg_plan_bench.h"
#include "bench/metrics_bench.h"
#include "bench/pattern_fidelity.h"
#include "bench/peak_bench.h"
#include "bench/sbm_tiles_bench.h"
#include "bench/seq2seq_bench.h"
#include "common/cpu_runtime.h"
#include "kernels/cpu_features.h"
#include "model/checkpoint/huge_page_allocator.h"

ABSL_FLAG(std::vector<std::string>, impl, std::vector<std::string>({"dense", "lsg"}),
          "implementations to run");
ABSL_FLAG(std::vector<std::string>, seq, std::vector<std::string>({"1024", "4096", "16384"}),
          "sequence lengths");
ABSL_FLAG(int, heads, 12, "attention heads");
ABSL_FLAG(int, dim, 64, "head dimension");
ABSL_FLAG(std::vector<std::string>, density, std::vector<std::string>({"0"}),
          "target densities for implementations with a budget (0 = native)");
ABSL_FLAG(int, repeats, 5, "timed repeats per case (median reported)");
ABSL_FLAG(int, threads, 2, "threads (LibTorch and our executors)");
ABSL_FLAG(uint64_t, seed, 1, "seed of q, k, v and of sampling planners");
ABSL_FLAG(std::string, attn_precision, "fp32",
          "attention: fp32, or bf16 (bf16 operands, a bf16 model's executors)");
ABSL_FLAG(bool, json, false, "one JSON object per line instead of a table row");
ABSL_FLAG(bool, single_case, false, "internal: run exactly one case in this process");

namespace docsparse::bench {
namespace {

double RssMb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;  // kilobytes on Linux
}

// CPU time of all this process's threads. On a shared machine (builds
// running beside the bench) wall time measures the neighbours too; CPU time
// is what the case itself spent.
double ProcessCpuMs() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1e3 +
         (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e3;
}

int RunOneCase(const std::string& impl, const AttentionCase& c) {
  const AttentionFactory* factory = FindAttentionImpl(impl);
  if (factory == nullptr) {
    std::fprintf(stderr, "unknown --impl %s (known: %s)\n", impl.c_str(),
                 absl::StrJoin(AttentionImplNames(), ", ").c_str());
    return 2;
  }
  absl::StatusOr<PreparedAttention> prepared = (*factory)(c);
  if (!prepared.ok()) {
    std::fprintf(stderr, "%s: %s\n", impl.c_str(), prepared.status().ToString().c_str());
    return 1;
  }
  c10::InferenceMode inference_mode;
  at::set_num_threads(c.threads);
  const double baseline = RssMb();
  const int64_t rows = prepared->extra_positions + c.seq;
  at::manual_seed(c.seed);
  const bool bf16 = absl::GetFlag(FLAGS_attn_precision) == "bf16";
  const at::ScalarType type = bf16 ? at::kBFloat16 : at::kFloat;
  AttentionInputs inputs{at::randn({1, c.heads, rows, c.head_dim}).to(type),
                         at::randn({1, c.heads, rows, c.head_dim}).to(type),
                         at::randn({1, c.heads, rows, c.head_dim}).to(type),
                         {rows},
                         0,
                         {prepared->options},
                         bf16 ? Precision::kBf16 : Precision::kFp32};
  std::vector<ItemAttentionCost> costs;
  std::vector<double> times, cpu_times;
  const int repeats = absl::GetFlag(FLAGS_repeats);
  for (int i = 0; i <= repeats; ++i) {
    const double cpu_start = ProcessCpuMs();
    const auto start = std::chrono::steady_clock::now();
    prepared->mechanism->Forward(inputs, &costs);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (i > 0) {  // the first run warms caches and pools
      times.push_back(ms);
      cpu_times.push_back(ProcessCpuMs() - cpu_start);
    }
  }
  std::sort(times.begin(), times.end());
  std::sort(cpu_times.begin(), cpu_times.end());
  const double median = times[times.size() / 2];
  const double cpu_median = cpu_times[cpu_times.size() / 2];
  int64_t edges = 0;
  for (int64_t e : costs[0].head_edges) edges += e;
  const double flops = 4.0 * c.head_dim * static_cast<double>(edges) + costs[0].planner_flops;
  const double density = static_cast<double>(edges) / (static_cast<double>(rows) * rows * c.heads);
  const std::string isa(IsaName(HostCpuFeatures()));
  if (absl::GetFlag(FLAGS_json)) {
    std::printf(
        "{\"impl\": \"%s\", \"precision\": \"%s\", \"seq\": %lld, \"heads\": %d, \"dim\": %d, "
        "\"target_density\": %g, "
        "\"ms\": %.3f, \"cpu_ms\": %.3f, \"gflops\": %.3f, \"density\": %.6f, \"edges\": %lld, "
        "\"peak_rss_mb\": %.1f, \"baseline_rss_mb\": %.1f, \"threads\": %d, \"isa\": \"%s\"}\n",
        impl.c_str(), bf16 ? "bf16" : "fp32", static_cast<long long>(c.seq), c.heads, c.head_dim,
        c.density, median, cpu_median, flops / (median * 1e6), density,
        static_cast<long long>(edges), RssMb(), baseline, c.threads, isa.c_str());
  } else {
    std::printf(
        "%-8s %s seq %6lld  target %-6g  %10.2f ms (cpu %.2f ms)  %8.2f GFLOP/s  density %.4f  "
        "peak %8.1f MB (baseline %.1f)  isa %s\n",
        impl.c_str(), bf16 ? "bf16" : "fp32", static_cast<long long>(c.seq), c.density, median,
        cpu_median, flops / (median * 1e6), density, RssMb(), baseline, isa.c_str());
  }
  std::fflush(stdout);
  return 0;
}

// Re-runs this binary with --single_case for one case and waits for it.
int RunInChild(char* self, const std::string& impl, int64_t seq, const std::string& density) {
  std::vector<std::string> args = {self,
                                   "attention",
                                   "--single_case",
                                   "--impl=" + impl,
                                   absl::StrFormat("--seq=%d", seq),
                                   "--density=" + density,
                                   absl::StrFormat("--heads=%d", absl::GetFlag(FLAGS_heads)),
                                   absl::StrFormat("--dim=%d", absl::GetFlag(FLAGS_dim)),
                                   absl::StrFormat("--repeats=%d", absl::GetFlag(FLAGS_repeats)),
                                   absl::StrFormat("--threads=%d", absl::GetFlag(FLAGS_threads)),
                                   absl::StrFormat("--seed=%d", absl::GetFlag(FLAGS_seed)),
                                   "--attn_precision=" + absl::GetFlag(FLAGS_attn_precision),
                                   absl::GetFlag(FLAGS_json) ? "--json" : "--nojson"};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
  std::fprintf(stderr, "case --impl=%s --seq=%lld --density=%s failed (%s %d)\n", impl.c_str(),
               static_cast<long long>(seq), density.c_str(), WIFEXITED(status) ? "exit" : "signal",
               WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
  return 1;
}

}  // namespace
}  // namespace docsparse::bench

int main(int argc, char** argv) {
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  docsparse::KeepFreedMemoryForReuse();  // every mode, as the server does
  docsparse::UseHugePagesForLargeCpuTensors();
  if (rest.size() == 2 && std::string(rest[1]) == "seq2seq") {
    return docsparse::bench::RunSeq2SeqBench();
  }
  if (rest.size() == 2 && std::string(rest[1]) == "encoder") {
    return docsparse::bench::RunEncoderBench();
  }
  if (rest.size() == 2 && std::string(rest[1]) == "generate") {
    return docsparse::bench::RunGenerateBench();
  }
  if (rest.size() == 2 && std::string(rest[1]) == "fidelity") {
    return docsparse::bench::RunFidelityBench();
  }
  if (rest.size() == 2 && std::string(rest[1]) == "metrics") {
    return docsparse::bench::RunMetricsBench();
  }
  if (rest.size() == 2 && std::string(rest[1]) == "peak") {
    return docsparse::bench::RunPeakBench();
  }
  if (rest.size() == 2 && std::string(rest[1]) == "lsg_plan") {
    return docsparse::bench::RunLsgPlanBench();
  }
  if (rest.size() == 2 && std::string(rest[1]) == "edges") {
    return docsparse::bench::RunEdgeExecutorBench();
  }
  if (rest.size() == 2 && std::string(rest[1]) == "sbm_tiles") {
    return docsparse::bench::RunSbmTilesBench();
  }
  if (rest.size() != 2 || std::string(rest[1]) != "attention") {
    std::fprintf(stderr,
                 "usage: docsparse-bench attention [--impl dense,lsg] [--seq 1024,...] "
                 "[--heads 12] [--dim 64] [--density D,...] [--repeats 5] [--threads 2] "
                 "[--attn_precision fp32|bf16] [--json]\n"
                 "       docsparse-bench seq2seq [--s2s_tokens 4096,16384] [--s2s_rows 4] "
                 "[--s2s_steps 32] [--s2s_precision fp32,bf16,int8,auto] [--repeats 5] "
                 "[--threads 2] [--json]\n"
                 "       docsparse-bench encoder [--enc_model models/minilm-lsg] "
                 "[--enc_tokens 512,4096,16384] [--enc_precision fp32,bf16] "
                 "[--enc_attention checkpoint|sbm] [--enc_density D] [--repeats 5] "
                 "[--threads 2] [--json]\n"
                 "       docsparse-bench generate --gen_model DIR [--gen_src_tokens 512] "
                 "[--gen_new_tokens 64] [--gen_beams 1,4] [--gen_batches 1,4] [--repeats 5] "
                 "[--threads 2] [--json]\n"
                 "       docsparse-bench fidelity [--fid_model models/minilm-lsg] "
                 "[--fid_tokens 4096,16384] [--fid_caps 0.05,0.02] [--fid_precision fp32] "
                 "[--threads 2] [--json]\n"
                 "       docsparse-bench metrics [--metrics_requests 200000] [--metrics_threads 2] "
                 "[--metrics_repeats 5]\n"
                 "       docsparse-bench peak [--peak_rows 4096] [--peak_precision fp32,bf16,int8] "
                 "[--repeats 5] [--threads 2] [--json]\n"
                 "       docsparse-bench lsg_plan [--seq 4096,16384] [--heads 12] [--repeats 5] "
                 "[--json]\n"
                 "       docsparse-bench edges [--seq 1024,4096,16384] [--heads 12] [--dim 64] "
                 "[--density 0.05,0.2] [--repeats 5] [--threads 2] [--seed 1] [--json]\n"
                 "       docsparse-bench sbm_tiles [--tiles_model models/minilm-sbm] "
                 "[--seq 1024,4096,16384] [--density 0.01,0.05] [--tiles 16x64,64x64,128x64] "
                 "[--seed 1] [--threads 2] [--json]\n");
    return 2;
  }
  using docsparse::bench::AttentionCase;
  const std::string attention_precision = absl::GetFlag(FLAGS_attn_precision);
  if (attention_precision != "fp32" && attention_precision != "bf16") {
    std::fprintf(stderr, "bad --attn_precision %s (fp32 or bf16)\n", attention_precision.c_str());
    return 2;
  }
  int status = 0;
  for (const std::string& impl : absl::GetFlag(FLAGS_impl)) {
    for (const std::string& seq_text : absl::GetFlag(FLAGS_seq)) {
      for (const std::string& density_text : absl::GetFlag(FLAGS_density)) {
        int64_t seq = 0;
        double density = 0;
        if (!absl::SimpleAtoi(seq_text, &seq) || seq < 1 ||
            !absl::SimpleAtod(density_text, &density) || density < 0 || density > 1) {
          std::fprintf(stderr, "bad --seq %s or --density %s\n", seq_text.c_str(),
                       density_text.c_str());
          return 2;
        }
        if (absl::GetFlag(FLAGS_single_case)) {
          AttentionCase c{seq,     absl::GetFlag(FLAGS_heads), absl::GetFlag(FLAGS_dim),
                          density, absl::GetFlag(FLAGS_seed),  absl::GetFlag(FLAGS_threads)};
          return docsparse::bench::RunOneCase(impl, c);
        }
        status |= docsparse::bench::RunInChild(argv[0], impl, seq, density_text);
      }
    }
  }
  return status;
}
