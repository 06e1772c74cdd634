// The fp32 block executor on AVX2+FMA (Fp32LanesBlock<8>): the vector
// operations fp32_lanes_executor.h is written in, on 8 lanes and 16
// registers (12 accumulators: 6 keys or 6 output columns a step for groups
// of 16 rows). It replaced a rows-in-memory tile that transposed every key
// tile, reduced each row horizontally and took a scalar exp per row.
#include <immintrin.h>

#include <limits>

#include "kernels/vector_exp.h"

#define DOCSPARSE_LANES_TARGET __attribute__((target("avx2,fma")))

namespace docsparse {
namespace {

struct Simd {
  using Vec = __m256;
  using Keys = __m256i;
  static constexpr int kLanes = 8;
  static constexpr int kAccumulators = 12;
  static constexpr int kTailKeys = 3;

  static DOCSPARSE_LANES_TARGET Vec Zero() { return _mm256_setzero_ps(); }
  static DOCSPARSE_LANES_TARGET Vec Set1(float x) { return _mm256_set1_ps(x); }
  static DOCSPARSE_LANES_TARGET Vec Load(const float* p) { return _mm256_loadu_ps(p); }
  static DOCSPARSE_LANES_TARGET Vec Broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static DOCSPARSE_LANES_TARGET void Store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
  static DOCSPARSE_LANES_TARGET Vec Add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
  static DOCSPARSE_LANES_TARGET Vec Sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
  static DOCSPARSE_LANES_TARGET Vec Mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
  static DOCSPARSE_LANES_TARGET Vec Max(Vec a, Vec b) { return _mm256_max_ps(a, b); }
  static DOCSPARSE_LANES_TARGET Vec Fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
  // e^x for x <= 0; very negative x (masked keys) give at most 2^-126,
  // which flush-to-zero (set by the caller) mostly makes 0.
  static DOCSPARSE_LANES_TARGET Vec Exp(Vec x) { return ExpNonPositive256(x); }
  // e^(old - new) where a row had keys before (old_max finite), else 0; the
  // exponential's clamp keeps -inf - new finite.
  static DOCSPARSE_LANES_TARGET Vec Correction(Vec old_max, Vec new_max) {
    const __m256 seen = _mm256_cmp_ps(
        old_max, _mm256_set1_ps(-std::numeric_limits<float>::infinity()), _CMP_NEQ_OQ);
    return _mm256_and_ps(seen, ExpNonPositive256(_mm256_sub_ps(old_max, new_max)));
  }
  static DOCSPARSE_LANES_TARGET Keys LoadKeys(const int32_t* p) {
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
  }
  // s where lo <= key < hi (not lo > key, and hi > key), else masked.
  static DOCSPARSE_LANES_TARGET Vec KeepInRange(Vec s, Vec masked, Keys lo, Keys hi, int32_t key) {
    const __m256i k = _mm256_set1_epi32(key);
    const __m256 keep = _mm256_castsi256_ps(
        _mm256_andnot_si256(_mm256_cmpgt_epi32(lo, k), _mm256_cmpgt_epi32(hi, k)));
    return _mm256_blendv_ps(masked, s, keep);
  }
  // out[i] = the 8 values of rows[0..7] at column i, for 8 rows of 8 floats.
  static DOCSPARSE_LANES_TARGET void Transpose(__m256 r[8]) {
    __m256 t[8];
    for (int i = 0; i < 8; i += 2) {
      t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
      t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    __m256 u[8];
    for (int i = 0; i < 8; i += 4) {
      u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
      u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
      u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
      u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int i = 0; i < 4; ++i) {
      r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
      r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
  }
};

}  // namespace
}  // namespace docsparse

#include "kernels/fp32_lanes_executor.h"
