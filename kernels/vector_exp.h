// exp(x) on SIMD registers for the kernels' softmaxes and sigmoids, and ln(x)
// for SBM's inclusion correction.
//
// Exp256 (AVX2, the fp32 kernels): Cephes' expf polynomial after the range
// reduction x = n·ln2 + r, relative error ~1e-7. x is clamped to
// [-87.3, 88.3] so that e^x stays a normal float: inputs below give ~1e-38
// instead of 0 (callers that need exact zeros for masked keys skip them),
// inputs above saturate.
//
// Each function carries its own target attribute: callers compiled for the
// same instruction set inline it; the including file need not be.
#ifndef DOCSPARSE_KERNELS_VECTOR_EXP_H_
#define DOCSPARSE_KERNELS_VECTOR_EXP_H_

#include <immintrin.h>

namespace docsparse {

__attribute__((target("avx2,fma"))) inline __m256 Exp256(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
  const __m256 n = _mm256_floor_ps(
      _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 poly = _mm256_set1_ps(1.9875691500E-4f);
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(1.3981999507E-3f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(8.3334519073E-3f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(4.1665795894E-2f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(1.6666665459E-1f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(5.0000001201E-1f));
  const __m256 y =
      _mm256_add_ps(_mm256_fmadd_ps(poly, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  const __m256i exponent =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(exponent));
}

// ln(x) for positive normal floats: x = 2^e·m with m in [√½, √2), then
// ln m = 2·atanh(t), t = (m − 1)/(m + 1), |t| <= 0.172, from its series to
// t^9 (relative error ~1e-7, float's own).
__attribute__((target("avx2,fma"))) inline __m256 Log256(__m256 x) {
  const __m256i bits = _mm256_castps_si256(x);
  __m256i exponent = _mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(127));
  __m256 m = _mm256_castsi256_ps(_mm256_or_si256(
      _mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x3f800000)));
  // m in [1, 2): above √2, halve it and count one more power of two.
  const __m256 big = _mm256_cmp_ps(m, _mm256_set1_ps(1.41421356f), _CMP_GT_OQ);
  m = _mm256_blendv_ps(m, _mm256_mul_ps(m, _mm256_set1_ps(0.5f)), big);
  exponent =
      _mm256_add_epi32(exponent, _mm256_and_si256(_mm256_castps_si256(big), _mm256_set1_epi32(1)));
  const __m256 t =
      _mm256_div_ps(_mm256_sub_ps(m, _mm256_set1_ps(1.0f)), _mm256_add_ps(m, _mm256_set1_ps(1.0f)));
  const __m256 t2 = _mm256_mul_ps(t, t);
  __m256 poly = _mm256_set1_ps(1.0f / 9);
  poly = _mm256_fmadd_ps(poly, t2, _mm256_set1_ps(1.0f / 7));
  poly = _mm256_fmadd_ps(poly, t2, _mm256_set1_ps(1.0f / 5));
  poly = _mm256_fmadd_ps(poly, t2, _mm256_set1_ps(1.0f / 3));
  poly = _mm256_fmadd_ps(poly, t2, _mm256_set1_ps(1.0f));
  const __m256 log_m = _mm256_mul_ps(_mm256_mul_ps(poly, t), _mm256_set1_ps(2.0f));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(exponent), _mm256_set1_ps(0.693147180559945f), log_m);
}

// exp(x) for softmax exponents (x <= 0 once the row maximum is subtracted)
// whose results become bf16 probabilities: 2^(x·log2 e) split into 2^n·2^f
// with |f| <= 1/2, 2^f from its degree-5 Taylor polynomial, and 2^n applied
// by VSCALEFPS, which underflows very negative x to 0. Relative error
// < 1e-5 down to x = -87 (mostly from rounding x·log2 e to fp32), far below
// bf16's 2^-9. x must be finite (-inf gives NaN). Nine instructions where the
// Cephes form takes sixteen (a 4,096-token LSG forward in bf16: ~3% faster).
__attribute__((target("avx512f"))) inline __m512 ExpNonPositive512(__m512 x) {
  const __m512 t = _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f));
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  __m512 p = _mm512_set1_ps(1.3333558146e-3f);                  // ln2^5 / 5!
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291076e-3f));  // ln2^4 / 4!
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504108665e-2f));  // ln2^3 / 3!
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022650696e-1f));  // ln2^2 / 2!
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718056e-1f));  // ln2
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// ExpNonPositive512 on AVX2 (the fp32 executor's softmax with the query
// rows in the lanes): the same polynomial, with 2^n built in the exponent
// bits, so x·log2 e is clamped at -126 first (results below e^-87.3 come out
// as 2^-126·2^f, which flush-to-zero turns into 0). Thirteen instructions
// where Exp256 takes eighteen. x must not be NaN.
__attribute__((target("avx2,fma"))) inline __m256 ExpNonPositive256(__m256 x) {
  const __m256 t = _mm256_max_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                 _mm256_set1_ps(-126.0f));
  const __m256 n = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_sub_ps(t, n);
  __m256 p = _mm256_set1_ps(1.3333558146e-3f);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.6181291076e-3f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.5504108665e-2f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.4022650696e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.9314718056e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
  const __m256i two_to_n =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(two_to_n));
}

// 2^t for t <= 0 whose results are rounded to bf16 straight away (the AMX
// attention's probabilities): t = n + f with n = floor(t) and f in [0, 1)
// taken by one VREDUCEPS, 2^f from a degree-3 polynomial fitted for least
// maximum relative error on [0, 1) (7.5e-5, 26x below bf16's 2^-9), and
// VSCALEFPS, which multiplies by 2^floor(t) itself (underflowing to 0).
// Callers fold log2 e into their scale, so the whole exponential is five
// instructions. t must be finite.
__attribute__((target("avx512f,avx512dq"))) inline __m512 Exp2ForBf16_512(__m512 t) {
  const __m512 f = _mm512_reduce_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 p = _mm512_set1_ps(0.07802419f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.22606722f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.69583374f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.9999252f));
  return _mm512_scalef_ps(p, t);
}

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_VECTOR_EXP_H_
