#include "kernels/bias_gelu.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/aligned_vector.h"
#include "kernels/bf16.h"
#include "kernels/cpu_features.h"

// GCC 12 warns inside its own AVX-512 headers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace docsparse {
namespace {

#define DOCSPARSE_AVX512_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

// GELU(v) = v·F(v), with F the normal CDF Φ(v) = (1 + erf(v/√2)) / 2 or,
// for the tanh form, (1 + tanh(√(2/π)(v + 0.044715v³))) / 2. Both satisfy
// F(−a) = 1 − F(a), so one table of the upper tail Q(a) = 1 − F(a) serves
// both signs: F = 1 − Q for v >= 0, Q for v < 0. Q over [0, 8) in 32
// intervals of 1/4, a cubic in each (Chebyshev interpolation, fitted in
// double at start-up); past 8, Q(8) stands in (below 1e-15). Measured
// against erfc in double: absolute error < 7.2e-7, so GELU's relative error
// < 1.1e-6 for v > 0; for v < 0, where GELU = v·Q, relative error < 0.3% down
// to v = −6 (Q = 1e-9; the tanh form's faster-falling tail < 2%), below
// bf16's rounding. The coefficients are looked up in registers (vpermt2ps
// over 32 entries): ~15 vector operations a value, where erf by Abramowitz
// & Stegun, with an exponential and a reciprocal, took twice that.
constexpr float kLastA = 8.0f * (1.0f - 1.0f / (1 << 20));  // just below 8

// Q over [0, 8) in kIntervals equal intervals, a polynomial of degree
// kDegree in each: c[k][i] is the coefficient of t^k in interval i, t in
// [0, 1) across it.
template <int kIntervalCount, int kDegree>
struct TailTable {
  static constexpr int kIntervals = kIntervalCount;
  static constexpr int kCoefficients = kDegree + 1;
  static constexpr float kIntervalsPerUnit = kIntervals / 8.0f;
  alignas(64) float c[kCoefficients][kIntervals];
};
// AVX-512: 32 intervals of 1/4, cubics, looked up by vpermt2ps.
using TailTable512 = TailTable<32, 3>;
// AVX2, which has no 32-entry register permute: 8 unit intervals of degree
// 7, looked up by vpermps (one instruction per coefficient) instead of
// gathering four coefficients from a 32-entry table. Absolute error of Q
// < 7e-8 with the coefficients in fp32 (ten times below the cubics'), so
// GELU's error < 7e-8·|v|. The relative error in the far negative tail is
// larger than the cubics' (erf: 4.6e-3 at v in (-6, -5], where Q < 3e-7;
// the tanh form, whose tail falls faster, 24% there, where Q < 5e-8): values
// that small change nothing downstream. Under DOCSPARSE_MAX_CPU_ISA=avx2:
// 0.34 -> 0.23 ms a 512 x 1,536 MiniLM layer.
using TailTable256 = TailTable<8, 7>;

double UpperTail(double a, bool tanh_form) {
  if (!tanh_form) return 0.5 * std::erfc(a / std::sqrt(2.0));
  const double g = std::sqrt(2.0 / M_PI) * (a + 0.044715 * a * a * a);
  return 1.0 / (1.0 + std::exp(2.0 * g));  // (1 − tanh g) / 2, without cancellation
}

template <typename Table>
Table FitTailTable(bool tanh_form) {
  Table table;
  constexpr int kNodes = Table::kCoefficients;
  for (int i = 0; i < Table::kIntervals; ++i) {
    // Q across interval i at the Chebyshev nodes of t in [0, 1], and the
    // polynomial through them: a Vandermonde system, solved by Gaussian
    // elimination with partial pivoting.
    double m[kNodes][kNodes + 1];
    for (int k = 0; k < kNodes; ++k) {
      const double t = 0.5 + 0.5 * std::cos((2 * k + 1) * M_PI / (2 * kNodes));
      double power = 1;
      for (int j = 0; j < kNodes; ++j, power *= t) m[k][j] = power;
      m[k][kNodes] = UpperTail((i + t) / Table::kIntervalsPerUnit, tanh_form);
    }
    for (int col = 0; col < kNodes; ++col) {
      int pivot = col;
      for (int r = col + 1; r < kNodes; ++r) {
        if (std::fabs(m[r][col]) > std::fabs(m[pivot][col])) pivot = r;
      }
      std::swap(m[col], m[pivot]);
      for (int r = 0; r < kNodes; ++r) {
        if (r == col) continue;
        const double factor = m[r][col] / m[col][col];
        for (int j = col; j <= kNodes; ++j) m[r][j] -= factor * m[col][j];
      }
    }
    for (int k = 0; k < kNodes; ++k) table.c[k][i] = static_cast<float>(m[k][kNodes] / m[k][k]);
  }
  return table;
}

template <typename Table>
const Table& TailTableFor(bool tanh_form) {
  static const Table erf_table = FitTailTable<Table>(false);
  static const Table tanh_table = FitTailTable<Table>(true);
  return tanh_form ? tanh_table : erf_table;
}

inline __attribute__((target("avx512f,avx512bw,avx512vl"))) __m512 LoadRow16(const uint16_t* x,
                                                                             __mmask16 mask) {
  return LoadBf16x16(x, mask);
}
inline __attribute__((target("avx512f"))) __m512 LoadRow16(const float* x, __mmask16 mask) {
  return _mm512_maskz_loadu_ps(mask, x);
}

// Rows [row_begin, row_end) with the bias in fp32 (`bias`). bf16 results are
// rounded by one instruction with native bf16 conversion (AVX512-BF16), else
// by StoreBf16x16's integer rounding.
template <typename Element, bool kNativeBf16>
DOCSPARSE_AVX512_BF16 void RowsAvx512(const BiasGeluRowsParams<Element>& p, const float* bias,
                                      int64_t row_begin, int64_t row_end) {
  const TailTable512& table = TailTableFor<TailTable512>(p.tanh_form);
  __m512 lo[4], hi[4];  // the coefficients of intervals 0-15 and 16-31
  for (int k = 0; k < 4; ++k) {
    lo[k] = _mm512_load_ps(table.c[k]);
    hi[k] = _mm512_load_ps(table.c[k] + 16);
  }
  const __m512 last_a = _mm512_set1_ps(kLastA);
  const __m512 per_unit = _mm512_set1_ps(TailTable512::kIntervalsPerUnit);
  for (int64_t row = row_begin; row < row_end; ++row) {
    Element* x = p.x + row * p.width;
    for (int64_t c = 0; c < p.width; c += 16) {
      const __mmask16 mask = FirstLanes(p.width - c);
      const __m512 v = _mm512_add_ps(LoadRow16(x + c, mask), _mm512_maskz_loadu_ps(mask, bias + c));
      // a = min(|v|, kLastA) in one instruction (range: the smaller
      // magnitude, sign cleared).
      const __m512 a = _mm512_range_ps(v, last_a, 0b1010);
      const __m512 scaled = _mm512_mul_ps(a, per_unit);
      const __m512i interval = _mm512_cvttps_epi32(scaled);
      const __m512 t = _mm512_reduce_ps(scaled, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      __m512 q = _mm512_permutex2var_ps(lo[3], interval, hi[3]);
      q = _mm512_fmadd_ps(q, t, _mm512_permutex2var_ps(lo[2], interval, hi[2]));
      q = _mm512_fmadd_ps(q, t, _mm512_permutex2var_ps(lo[1], interval, hi[1]));
      q = _mm512_fmadd_ps(q, t, _mm512_permutex2var_ps(lo[0], interval, hi[0]));
      // v·F(v) = max(v, 0) − |v|·Q(|v|) for either sign (v − v·Q above 0,
      // v·Q below), with no blend; past kLastA, Q is below 1e-15.
      const __m512 gelu = _mm512_fnmadd_ps(a, q, _mm512_max_ps(v, _mm512_setzero_ps()));
      if constexpr (std::is_same_v<Element, float>) {
        _mm512_mask_storeu_ps(x + c, mask, gelu);
      } else if constexpr (kNativeBf16) {
        _mm256_mask_storeu_epi16(x + c, mask, reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(gelu)));
      } else {
        StoreBf16x16(x + c, gelu, mask);
      }
    }
  }
}

#define DOCSPARSE_AVX2 __attribute__((target("avx2,fma")))

// The AVX2 table's coefficients in registers, for Gelu8.
struct Coefficients256 {
  __m256 c[TailTable256::kCoefficients];
};

// GELU of 8 values of `in` plus `shift`, into `out`.
template <typename Element>
DOCSPARSE_AVX2 inline void Gelu8(const Coefficients256& table, const Element* in,
                                 const float* shift, Element* out) {
  const __m256 v = _mm256_add_ps(LoadElements8(in), _mm256_loadu_ps(shift));
  const __m256 a = _mm256_min_ps(
      _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF))), _mm256_set1_ps(kLastA));
  const __m256i interval = _mm256_cvttps_epi32(a);
  const __m256 t = _mm256_sub_ps(a, _mm256_cvtepi32_ps(interval));
  __m256 q = _mm256_permutevar8x32_ps(table.c[7], interval);
#pragma GCC unroll 7
  for (int k = 6; k >= 0; --k) {
    q = _mm256_fmadd_ps(q, t, _mm256_permutevar8x32_ps(table.c[k], interval));
  }
  // max(v, 0) − |v|·Q(|v|), as in the AVX-512 form.
  StoreElements8(out, _mm256_fnmadd_ps(a, q, _mm256_max_ps(v, _mm256_setzero_ps())));
}

// GELU on AVX2 (the AVX2 kind of machine): 8 values at a time, the
// TailTable256 coefficients held in registers. Rows whose width is not a
// multiple of 8 finish through a buffer of 8.
template <typename Element>
DOCSPARSE_AVX2 void RowsAvx2(const BiasGeluRowsParams<Element>& p, const float* bias,
                             int64_t row_begin, int64_t row_end) {
  const TailTable256& fitted = TailTableFor<TailTable256>(p.tanh_form);
  Coefficients256 table;
  for (int k = 0; k < TailTable256::kCoefficients; ++k) table.c[k] = _mm256_load_ps(fitted.c[k]);
  for (int64_t row = row_begin; row < row_end; ++row) {
    Element* x = p.x + row * p.width;
    int64_t c = 0;
    for (; c + 8 <= p.width; c += 8) Gelu8(table, x + c, bias + c, x + c);
    if (c < p.width) {
      Element in[8] = {};
      float shift[8] = {};
      const int64_t rest = p.width - c;
      std::copy_n(x + c, rest, in);
      std::copy_n(bias + c, rest, shift);
      Gelu8(table, in, shift, in);
      std::copy_n(in, rest, x + c);
    }
  }
}

inline void Store(uint16_t* to, float value) { *to = FloatToBf16(value); }
inline void Store(float* to, float value) { *to = value; }

template <typename Element>
void RowsPortable(const BiasGeluRowsParams<Element>& p, int64_t row_begin, int64_t row_end) {
  for (int64_t row = row_begin; row < row_end; ++row) {
    Element* x = p.x + row * p.width;
    for (int64_t c = 0; c < p.width; ++c) {
      const float v = ElementToFloat(x[c]) + ElementToFloat(p.bias[c]);
      const float inner = p.tanh_form ? std::tanh(0.7978845608f * (v + 0.044715f * v * v * v))
                                      : std::erf(v * 0.70710678118f);
      Store(x + c, 0.5f * v * (1.0f + inner));
    }
  }
}

template <typename Element>
void RowsDispatched(const BiasGeluRowsParams<Element>& params, int64_t row_begin, int64_t row_end) {
  static const CpuFeatures cpu = HostCpuFeatures();
  const bool avx512 = cpu.avx512bw_vl && cpu.avx512dq;
  if (!avx512 && !cpu.avx2_fma) {
    RowsPortable(params, row_begin, row_end);
    return;
  }
  // The bias in fp32 (bf16 biases converted once per call).
  CacheLineVector<float> converted;
  const float* bias = nullptr;
  if constexpr (std::is_same_v<Element, float>) {
    bias = params.bias;
  } else {
    converted.resize(static_cast<size_t>(params.width));
    for (int64_t c = 0; c < params.width; ++c) converted[c] = Bf16ToFloat(params.bias[c]);
    bias = converted.data();
  }
  if (!avx512) {
    RowsAvx2(params, bias, row_begin, row_end);
  } else if (cpu.avx512_bf16) {
    RowsAvx512<Element, true>(params, bias, row_begin, row_end);
  } else {
    RowsAvx512<Element, false>(params, bias, row_begin, row_end);
  }
}

}  // namespace

void BiasGeluBf16Rows(const BiasGeluParams& params, int64_t row_begin, int64_t row_end) {
  RowsDispatched(params, row_begin, row_end);
}

void BiasGeluFp32Rows(const BiasGeluFp32Params& params, int64_t row_begin, int64_t row_end) {
  RowsDispatched(params, row_begin, row_end);
}

void BiasGeluBf16RowsPortable(const BiasGeluParams& params, int64_t row_begin, int64_t row_end) {
  RowsPortable(params, row_begin, row_end);
}

void BiasGeluFp32RowsPortable(const BiasGeluFp32Params& params, int64_t row_begin,
                              int64_t row_end) {
  RowsPortable(params, row_begin, row_end);
}

}  // namespace docsparse
