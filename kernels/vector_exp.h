// exp(x) on SIMD registers for the kernels' softmaxes and sigmoids: Cephes'
// expf polynomial after the range reduction x = n·ln2 + r, relative error
// ~1e-7. x is clamped to [-87.3, 88.3] so that e^x stays a normal float:
// inputs below give ~1e-38 instead of 0 (callers that need exact zeros for
// masked keys skip them), inputs above saturate.
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

__attribute__((target("avx512f"))) inline __m512 Exp512(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.3f));
  const __m512 n = _mm512_roundscale_ps(
      _mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(0.5f)),
      _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 poly = _mm512_set1_ps(1.9875691500E-4f);
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.3981999507E-3f));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(8.3334519073E-3f));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(4.1665795894E-2f));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.6666665459E-1f));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(5.0000001201E-1f));
  const __m512 y =
      _mm512_add_ps(_mm512_fmadd_ps(poly, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  const __m512i exponent =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(y, _mm512_castsi512_ps(exponent));
}

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_VECTOR_EXP_H_
