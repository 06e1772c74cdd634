// The fp32 block executor on AVX-512 (Fp32LanesBlock<16>): the vector
// operations fp32_lanes_executor.h is written in, on 16 lanes and 32
// registers (16 accumulators: 8 keys or 8 output columns a step for groups
// of 32 rows).
#include <immintrin.h>

#include <limits>

#include "kernels/transpose_avx512.h"
#include "kernels/vector_exp.h"

// GCC 12 warns inside its own AVX-512 headers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#define DOCSPARSE_LANES_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))

namespace docsparse {
namespace {

struct Simd {
  using Vec = __m512;
  using Keys = __m512i;
  static constexpr int kLanes = 16;
  static constexpr int kAccumulators = 16;
  static constexpr int kTailKeys = 4;

  static DOCSPARSE_LANES_TARGET Vec Zero() { return _mm512_setzero_ps(); }
  static DOCSPARSE_LANES_TARGET Vec Set1(float x) { return _mm512_set1_ps(x); }
  static DOCSPARSE_LANES_TARGET Vec Load(const float* p) { return _mm512_loadu_ps(p); }
  static DOCSPARSE_LANES_TARGET Vec Broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static DOCSPARSE_LANES_TARGET void Store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
  static DOCSPARSE_LANES_TARGET Vec Add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
  static DOCSPARSE_LANES_TARGET Vec Sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
  static DOCSPARSE_LANES_TARGET Vec Mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
  static DOCSPARSE_LANES_TARGET Vec Max(Vec a, Vec b) { return _mm512_max_ps(a, b); }
  static DOCSPARSE_LANES_TARGET Vec Fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
  // e^x for x <= 0; very negative x (masked keys) give 0.
  static DOCSPARSE_LANES_TARGET Vec Exp(Vec x) { return ExpNonPositive512(x); }
  // e^(old - new) where a row had keys before (old_max finite), else 0.
  static DOCSPARSE_LANES_TARGET Vec Correction(Vec old_max, Vec new_max) {
    const __mmask16 seen = _mm512_cmp_ps_mask(
        old_max, _mm512_set1_ps(-std::numeric_limits<float>::infinity()), _CMP_NEQ_OQ);
    return _mm512_maskz_mov_ps(seen,
                               ExpNonPositive512(_mm512_maskz_sub_ps(seen, old_max, new_max)));
  }
  static DOCSPARSE_LANES_TARGET Keys LoadKeys(const int32_t* p) { return _mm512_load_si512(p); }
  // s where lo <= key < hi, else masked.
  static DOCSPARSE_LANES_TARGET Vec KeepInRange(Vec s, Vec masked, Keys lo, Keys hi, int32_t key) {
    const __m512i k = _mm512_set1_epi32(key);
    return _mm512_mask_mov_ps(masked,
                              _mm512_cmple_epi32_mask(lo, k) & _mm512_cmplt_epi32_mask(k, hi), s);
  }
  // out[i] = the 16 values of rows[0..15] at column i, for 16 rows of 16
  // floats.
  static DOCSPARSE_LANES_TARGET void Transpose(__m512 r[16]) { Transpose16x16Avx512(r); }
};

}  // namespace
}  // namespace docsparse

#include "kernels/fp32_lanes_executor.h"
