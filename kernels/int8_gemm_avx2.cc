#include "kernels/int8_gemm_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cstring>

#define DOCSPARSE_AVX2 __attribute__((target("avx2,fma")))

namespace docsparse {

namespace {

constexpr int64_t kPanel = kInt8GemmPanel;
// Bytes of one group of four inputs in a panel.
constexpr int64_t kGroupBytes = 4 * kPanel;
// Rows a pass: 2·R = 8 int32 accumulators, two weight vectors, the
// broadcast row group, two products and the ones: 14 of the 16 registers.
constexpr int kRows = 4;
// A block of rows stays in L2 while the thread's panels pass over it (each
// panel, at most 24 KB for 1,536 inputs, stays in L1 across the block).
constexpr int64_t kBlockBytes = 192 * 1024;

// What the sums of one panel are scaled by as they are stored.
struct PanelEpilogue {
  alignas(32) int32_t compensation[kPanel];
  alignas(32) float scales[kPanel];
  alignas(32) float bias[kPanel];
  int64_t first_channel;
  int64_t valid;  // real channels in the panel
};

// Rows [first_row, first_row + R) against one panel: per group of four
// inputs, two weight loads and R broadcasts of four row bytes.
template <int R>
DOCSPARSE_AVX2 void PanelRows(const Int8GemmParams& p, const int8_t* panel, const PanelEpilogue& e,
                              int64_t first_row) {
  const int64_t in = p.weights->in_features;
  const int64_t groups = p.weights->input_groups();
  const uint8_t* x = p.x + first_row * in;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  if constexpr (R == 4) {
    // Written out: GCC's schedule of the loop below ran all eight VPMADDUBSW
    // first, kept eight products live and spilled an accumulator to the
    // stack each step (255 GFLOP/s on 2 Zen 3 cores against 350 written out).
    for (int64_t g = 0; g < groups; ++g) {
      const int8_t* w = panel + g * kGroupBytes;
      const uint8_t* x0 = x + 4 * g;
      __m256i w0, w1, a, t0, t1;
      // clang-format off
      __asm__(
          "vmovdqa (%[w]), %[w0]\n\t"
          "vmovdqa 32(%[w]), %[w1]\n\t"
#define DOCSPARSE_INT8_GEMM_ROW(x, c0, c1)      \
  "vpbroadcastd (" x "), %[a]\n\t"            \
  "vpmaddubsw %[w0], %[a], %[t0]\n\t"         \
  "vpmaddubsw %[w1], %[a], %[t1]\n\t"         \
  "vpmaddwd %[ones], %[t0], %[t0]\n\t"        \
  "vpmaddwd %[ones], %[t1], %[t1]\n\t"        \
  "vpaddd %[t0], %[" c0 "], %[" c0 "]\n\t"    \
  "vpaddd %[t1], %[" c1 "], %[" c1 "]\n\t"
          DOCSPARSE_INT8_GEMM_ROW("%[x0]", "c00", "c01")
          DOCSPARSE_INT8_GEMM_ROW("%[x0],%[in]", "c10", "c11")
          DOCSPARSE_INT8_GEMM_ROW("%[x0],%[in],2", "c20", "c21")
          DOCSPARSE_INT8_GEMM_ROW("%[x3]", "c30", "c31")
#undef DOCSPARSE_INT8_GEMM_ROW
          : [c00] "+x"(acc[0][0]), [c01] "+x"(acc[0][1]), [c10] "+x"(acc[1][0]),
            [c11] "+x"(acc[1][1]), [c20] "+x"(acc[2][0]), [c21] "+x"(acc[2][1]),
            [c30] "+x"(acc[3][0]), [c31] "+x"(acc[3][1]), [w0] "=&x"(w0), [w1] "=&x"(w1),
            [a] "=&x"(a), [t0] "=&x"(t0), [t1] "=&x"(t1)
          : [w] "r"(w), [x0] "r"(x0), [in] "r"(in), [x3] "r"(x0 + 3 * in), [ones] "x"(ones)
          : "memory");
      // clang-format on
    }
  } else {
    for (int64_t g = 0; g < groups; ++g) {
      const __m256i w0 =
          _mm256_load_si256(reinterpret_cast<const __m256i*>(panel + g * kGroupBytes));
      const __m256i w1 =
          _mm256_load_si256(reinterpret_cast<const __m256i*>(panel + g * kGroupBytes + 32));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        int32_t four;
        std::memcpy(&four, x + r * in + 4 * g, sizeof(four));
        const __m256i a = _mm256_set1_epi32(four);
        acc[r][0] =
            _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(a, w0), ones));
        acc[r][1] =
            _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(a, w1), ones));
      }
    }
  }
  const __m256i c0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(e.compensation));
  const __m256i c1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(e.compensation + 8));
  const __m256 s0 = _mm256_load_ps(e.scales), s1 = _mm256_load_ps(e.scales + 8);
  const __m256 b0 = _mm256_load_ps(e.bias), b1 = _mm256_load_ps(e.bias + 8);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const __m256 row_scale = _mm256_set1_ps(p.row_scales[first_row + r]);
    const __m256 y0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(acc[r][0], c0)),
                                      _mm256_mul_ps(s0, row_scale), b0);
    const __m256 y1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(acc[r][1], c1)),
                                      _mm256_mul_ps(s1, row_scale), b1);
    float* y = p.y + (first_row + r) * p.weights->out_features + e.first_channel;
    if (e.valid == kPanel) {
      _mm256_storeu_ps(y, y0);
      _mm256_storeu_ps(y + 8, y1);
    } else {
      alignas(32) float last[kPanel];
      _mm256_store_ps(last, y0);
      _mm256_store_ps(last + 8, y1);
      std::copy(last, last + e.valid, y);
    }
  }
}

// The 1 to kRows - 1 rows left after the passes of kRows.
template <int R>
DOCSPARSE_AVX2 void LastRows(const Int8GemmParams& p, const int8_t* panel, const PanelEpilogue& e,
                             int64_t first_row, int64_t rows) {
  if (rows == R) return PanelRows<R>(p, panel, e, first_row);
  if constexpr (R > 1) LastRows<R - 1>(p, panel, e, first_row, rows);
}

}  // namespace

Int8GemmWeights PackInt8GemmWeights(const int8_t* weights, int64_t out_features,
                                    int64_t in_features) {
  Int8GemmWeights packed;
  packed.in_features = in_features;
  packed.out_features = out_features;
  const int64_t groups = packed.input_groups();
  packed.packed.assign(static_cast<size_t>(packed.panels() * groups * kGroupBytes), 0);
  packed.compensation.assign(static_cast<size_t>(packed.panels() * kPanel), 0);
  for (int64_t n = 0; n < out_features; ++n) {
    int8_t* panel = packed.packed.data() + n / kPanel * groups * kGroupBytes;
    int32_t sum = 0;
    for (int64_t k = 0; k < in_features; ++k) {
      const int8_t w = weights[n * in_features + k];
      panel[k / 4 * kGroupBytes + n % kPanel * 4 + k % 4] = w;
      sum += w;
    }
    packed.compensation[n] = 128 * sum;
  }
  return packed;
}

namespace {

DOCSPARSE_AVX2 void GemmAvx2(const Int8GemmParams& p, int64_t panel_begin, int64_t panel_end) {
  const Int8GemmWeights& w = *p.weights;
  assert(panel_begin >= 0 && panel_end <= w.panels());
  const int64_t block_rows =
      std::max<int64_t>(kRows, kBlockBytes / std::max<int64_t>(w.in_features, 1) / kRows * kRows);
  for (int64_t block = 0; block < p.rows; block += block_rows) {
    const int64_t block_end = std::min(p.rows, block + block_rows);
    for (int64_t panel = panel_begin; panel < panel_end; ++panel) {
      PanelEpilogue e;
      e.first_channel = panel * kPanel;
      e.valid = std::min(kPanel, w.out_features - e.first_channel);
      for (int64_t c = 0; c < kPanel; ++c) {
        const bool real = c < e.valid;
        e.compensation[c] = w.compensation[e.first_channel + c];
        e.scales[c] = real ? p.channel_scales[e.first_channel + c] : 0.0f;
        e.bias[c] = real && p.bias != nullptr ? p.bias[e.first_channel + c] : 0.0f;
      }
      const int8_t* weights = w.packed.data() + panel * w.input_groups() * kGroupBytes;
      int64_t row = block;
      for (; row + kRows <= block_end; row += kRows) PanelRows<kRows>(p, weights, e, row);
      if (row < block_end) LastRows<kRows - 1>(p, weights, e, row, block_end - row);
    }
  }
}

}  // namespace

void Int8GemmAvx2(const Int8GemmParams& params, int64_t panel_begin, int64_t panel_end) {
  GemmAvx2(params, panel_begin, panel_end);
}

}  // namespace docsparse
