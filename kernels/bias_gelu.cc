#include "kernels/bias_gelu.h"

#include <immintrin.h>

#include <cmath>

#include "kernels/bf16.h"
#include "kernels/cpu_features.h"
#include "kernels/vector_exp.h"

// GCC 12 warns inside its own AVX-512 headers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace docsparse {
namespace {

#define DOCSPARSE_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

// 1 / d by the 14-bit estimate and one Newton step (~23 bits): vdivps on a
// zmm register issues once per 16 cycles on Sapphire Rapids and made the
// division most of this kernel's time.
DOCSPARSE_AVX512 inline __m512 Reciprocal512(__m512 d) {
  const __m512 r = _mm512_rcp14_ps(d);
  return _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, _mm512_set1_ps(2.0f)));
}

// erf(x) by Abramowitz & Stegun 7.1.26 (absolute error < 1.5e-7):
// 1 − (a1·t + … + a5·t⁵)·e^(−x²) with t = 1 / (1 + p·|x|), sign restored.
DOCSPARSE_AVX512 inline __m512 Erf512(__m512 x) {
  const __m512 magnitude = _mm512_abs_ps(x);
  const __m512 t =
      Reciprocal512(_mm512_fmadd_ps(_mm512_set1_ps(0.3275911f), magnitude, _mm512_set1_ps(1.0f)));
  __m512 poly = _mm512_set1_ps(1.061405429f);
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(-1.453152027f));
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(1.421413741f));
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(-0.284496736f));
  poly = _mm512_fmadd_ps(poly, t, _mm512_set1_ps(0.254829592f));
  poly = _mm512_mul_ps(poly, t);
  // −x² is finite for finite x: ExpNonPositive512 applies.
  const __m512 e = ExpNonPositive512(_mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), x), x));
  const __m512 y = _mm512_fnmadd_ps(poly, e, _mm512_set1_ps(1.0f));
  // Copy x's sign onto y.
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(y), sign));
}

// tanh(y) = sign(y)·(1 − e^(−2|y|)) / (1 + e^(−2|y|)).
DOCSPARSE_AVX512 inline __m512 Tanh512(__m512 y) {
  const __m512 e = ExpNonPositive512(_mm512_mul_ps(_mm512_set1_ps(-2.0f), _mm512_abs_ps(y)));
  const __m512 magnitude = _mm512_mul_ps(_mm512_sub_ps(_mm512_set1_ps(1.0f), e),
                                         Reciprocal512(_mm512_add_ps(_mm512_set1_ps(1.0f), e)));
  const __m512i sign = _mm512_and_si512(_mm512_castps_si512(y), _mm512_set1_epi32(INT32_MIN));
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(magnitude), sign));
}

DOCSPARSE_AVX512 void RowAvx512(const BiasGeluParams& p, int64_t row) {
  uint16_t* x = p.x + row * p.width;
  const __m512 half = _mm512_set1_ps(0.5f);
  for (int64_t c = 0; c < p.width; c += 16) {
    const __mmask16 mask = FirstLanes(p.width - c);
    const __m512 v = _mm512_add_ps(LoadBf16x16(x + c, mask), LoadBf16x16(p.bias + c, mask));
    __m512 inner;
    if (p.tanh_form) {
      const __m512 cube = _mm512_mul_ps(_mm512_mul_ps(v, v), v);
      inner = Tanh512(_mm512_mul_ps(_mm512_set1_ps(0.7978845608f),
                                    _mm512_fmadd_ps(_mm512_set1_ps(0.044715f), cube, v)));
    } else {
      inner = Erf512(_mm512_mul_ps(v, _mm512_set1_ps(0.70710678118f)));
    }
    StoreBf16x16(x + c,
                 _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(inner, _mm512_set1_ps(1.0f))),
                 mask);
  }
}

void RowPortable(const BiasGeluParams& p, int64_t row) {
  uint16_t* x = p.x + row * p.width;
  for (int64_t c = 0; c < p.width; ++c) {
    const float v = Bf16ToFloat(x[c]) + Bf16ToFloat(p.bias[c]);
    const float inner = p.tanh_form ? std::tanh(0.7978845608f * (v + 0.044715f * v * v * v))
                                    : std::erf(v * 0.70710678118f);
    x[c] = FloatToBf16(0.5f * v * (1.0f + inner));
  }
}

}  // namespace

void BiasGeluBf16RowsPortable(const BiasGeluParams& params, int64_t row_begin, int64_t row_end) {
  for (int64_t row = row_begin; row < row_end; ++row) RowPortable(params, row);
}

void BiasGeluBf16Rows(const BiasGeluParams& params, int64_t row_begin, int64_t row_end) {
  static const bool avx512 = HostCpuFeatures().avx512bw_vl;
  for (int64_t row = row_begin; row < row_end; ++row) {
    if (avx512) {
      RowAvx512(params, row);
    } else {
      RowPortable(params, row);
    }
  }
}

}  // namespace docsparse
