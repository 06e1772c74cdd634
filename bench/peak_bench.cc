#include "bench/peak_bench.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/median_ms.h"
#include "kernels/cpu_features.h"
#include "model/checkpoint/precision.h"
#include "model/encoder/linear.h"
#include "model/encoder/linear_precision.h"

// GCC 12 warns inside its own AVX-512 headers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

ABSL_FLAG(int64_t, peak_rows, 4096, "peak: rows of the large products");
ABSL_FLAG(std::vector<std::string>, peak_precision,
          std::vector<std::string>({"fp32", "bf16", "int8"}),
          "peak: precisions of the products (fp32, bf16, int8)");
ABSL_FLAG(std::vector<std::string>, peak_products,
          std::vector<std::string>({"384x1536", "1536x384"}),
          "peak: products as IN_FEATURESxOUT_FEATURES (MiniLM's feed-forward by default; "
          "BART-base's are 768x3072, 3072x768 and its LM head 768x50265)");

ABSL_DECLARE_FLAG(int, repeats);
ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(bool, json);

namespace docsparse::bench {
namespace {

// Independent accumulators: more than an FMA's latency times the FMA units
// (4 x 2 on the CPUs we run on), so that nothing but the units limits.
constexpr int kChains = 12;
constexpr int64_t kIterations = 50'000'000;

// Each returns a value computed from the accumulators so that the loop is not
// optimised away.
__attribute__((target("avx512f"))) float FmaLoopAvx512(int64_t iterations) {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(0.001f * i);
  const __m512 a = _mm512_set1_ps(0.999999f);
  const __m512 b = _mm512_set1_ps(1e-7f);
  for (int64_t t = 0; t < iterations; ++t) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
  }
  float sum = 0;
  for (int i = 0; i < kChains; ++i) sum += _mm512_reduce_add_ps(acc[i]);
  return sum;
}

__attribute__((target("avx2,fma"))) float FmaLoopAvx2(int64_t iterations) {
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(0.001f * i);
  const __m256 a = _mm256_set1_ps(0.999999f);
  const __m256 b = _mm256_set1_ps(1e-7f);
  for (int64_t t = 0; t < iterations; ++t) {
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
  }
  alignas(32) float lanes[8];
  float sum = 0;
  for (int i = 0; i < kChains; ++i) {
    _mm256_store_ps(lanes, acc[i]);
    for (float x : lanes) sum += x;
  }
  return sum;
}

// Keeps `value` alive for the optimiser: the FMA loops' results are
// otherwise unused.
inline void KeepAlive(float value) { asm volatile("" : : "g"(value) : "memory"); }

void Print(const char* what, const std::string& detail, double gflops) {
  if (absl::GetFlag(FLAGS_json)) {
    std::printf(
        "{\"bench\":\"peak\",\"what\":\"%s\",\"detail\":\"%s\",\"isa\":\"%s\",\"threads\":%d,"
        "\"gflops\":%.1f}\n",
        what, detail.c_str(), std::string(IsaName(HostCpuFeatures())).c_str(),
        at::get_num_threads(), gflops);
  } else {
    std::printf("%-7s %-48s %9.1f GFLOP/s  (isa %s, %d threads)\n", what, detail.c_str(), gflops,
                std::string(IsaName(HostCpuFeatures())).c_str(), at::get_num_threads());
  }
  std::fflush(stdout);
}

// The best of --repeats runs of the FMA loop on every thread at once.
void MeasureFma() {
  const CpuFeatures& cpu = HostCpuFeatures();
  if (!cpu.avx2_fma) {
    Print("fma", "no AVX2+FMA on this CPU", 0);
    return;
  }
  const bool avx512 = cpu.avx512f;
  const int lanes = avx512 ? 16 : 8;
  const int threads = at::get_num_threads();
  double best = 0;
  for (int r = 0; r < std::max(1, absl::GetFlag(FLAGS_repeats)); ++r) {
    const auto start = std::chrono::steady_clock::now();
    at::parallel_for(0, threads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        KeepAlive(avx512 ? FmaLoopAvx512(kIterations) : FmaLoopAvx2(kIterations));
      }
    });
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, threads * double{kIterations} * kChains * lanes * 2 / seconds / 1e9);
  }
  Print("fma", avx512 ? "fp32 AVX-512, registers only" : "fp32 AVX2, registers only", best);
}

// Both feed-forward products at --peak_rows rows in `precision`, each at
// the median of --repeats calls.
void MeasureLinear(Precision precision) {
  const int64_t rows = absl::GetFlag(FLAGS_peak_rows);
  struct Product {
    int64_t in, out;
  };
  std::vector<Product> products;
  for (const std::string& text : absl::GetFlag(FLAGS_peak_products)) {
    const std::vector<std::string> sides = absl::StrSplit(text, 'x');
    Product p{0, 0};
    if (sides.size() != 2 || !absl::SimpleAtoi(sides[0], &p.in) ||
        !absl::SimpleAtoi(sides[1], &p.out) || p.in <= 0 || p.out <= 0) {
      std::fprintf(stderr, "--peak_products: '%s' is not IN_FEATURESxOUT_FEATURES\n", text.c_str());
      std::exit(2);
    }
    products.push_back(p);
  }
  for (const Product& p : products) {
    const at::Tensor x = at::randn({rows, p.in}).to(ActivationType(precision));
    const Linear linear(at::randn({p.out, p.in}) * 0.05, at::zeros({p.out}), precision);
    const double ms = MedianMs(absl::GetFlag(FLAGS_repeats), [&] { linear(x); });
    const std::string detail = std::string(PrecisionName(precision)) + " " + std::to_string(rows) +
                               "x" + std::to_string(p.in) + "x" + std::to_string(p.out) + " " +
                               linear.implementation();
    Print("linear", detail, 2.0 * rows * p.in * p.out / ms / 1e6);
  }
}

}  // namespace

int RunPeakBench() {
  at::set_num_threads(std::max(1, absl::GetFlag(FLAGS_threads)));
  c10::InferenceMode inference_mode;
  MeasureFma();
  for (const std::string& name : absl::GetFlag(FLAGS_peak_precision)) {
    const std::optional<Precision> precision = ParsePrecision(name);
    if (!precision.has_value() || *precision == Precision::kAuto) {
      std::fprintf(stderr, "bad --peak_precision %s (fp32, bf16, int8)\n", name.c_str());
      return 2;
    }
    MeasureLinear(*precision);
  }
  return 0;
}

}  // namespace docsparse::bench
