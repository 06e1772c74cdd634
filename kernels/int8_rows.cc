#include "kernels/int8_rows.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/bf16.h"
#include "kernels/cpu_features.h"

// GCC 12 warns inside its own AVX-512 headers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace docsparse {
namespace {

#define DOCSPARSE_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))
#define DOCSPARSE_AVX2 __attribute__((target("avx2,fma")))

float Load(const QuantizeRowsParams& p, int64_t i) {
  return p.bf16 ? Bf16ToFloat(static_cast<const uint16_t*>(p.x)[i])
                : static_cast<const float*>(p.x)[i];
}

// One value's code: round(x · inverse) (to nearest even, as the vector
// conversions), clamped to [-127, 127], stored as q + 128 where asked.
int8_t QuantizedCode(float x, float inverse, bool plus_128) {
  const int q = static_cast<int>(std::clamp(std::nearbyint(x * inverse), -127.0f, 127.0f));
  return static_cast<int8_t>(plus_128 ? q ^ 0x80 : q);
}

void QuantizeRowPortable(const QuantizeRowsParams& p, int64_t row) {
  const int64_t start = row * p.width;
  float max_abs = 0;
  for (int64_t c = 0; c < p.width; ++c) max_abs = std::max(max_abs, std::fabs(Load(p, start + c)));
  p.scales[row] = max_abs / 127.0f;
  const float inverse = max_abs > 0 ? 127.0f / max_abs : 0.0f;
  for (int64_t c = 0; c < p.width; ++c) {
    p.q[start + c] = QuantizedCode(Load(p, start + c), inverse, p.plus_128);
  }
}

void DequantizeRowPortable(const DequantizeRowsParams& p, int64_t row) {
  const int64_t start = row * p.width;
  for (int64_t c = 0; c < p.width; ++c) {
    float value = static_cast<float>(p.sums[start + c]) * p.row_scales[row] * p.channel_scales[c];
    if (p.bias != nullptr) value += p.bias[c];
    if (p.bf16) {
      static_cast<uint16_t*>(p.y)[start + c] = FloatToBf16(value);
    } else {
      static_cast<float*>(p.y)[start + c] = value;
    }
  }
}

DOCSPARSE_AVX512 inline __m512 Load16(const QuantizeRowsParams& p, int64_t i, __mmask16 mask) {
  return p.bf16 ? LoadBf16x16(static_cast<const uint16_t*>(p.x) + i, mask)
                : _mm512_maskz_loadu_ps(mask, static_cast<const float*>(p.x) + i);
}

DOCSPARSE_AVX512 void QuantizeRowAvx512(const QuantizeRowsParams& p, int64_t row) {
  const int64_t start = row * p.width;
  __m512 max16 = _mm512_setzero_ps();
  for (int64_t c = 0; c < p.width; c += 16) {
    max16 = _mm512_max_ps(max16, _mm512_abs_ps(Load16(p, start + c, FirstLanes(p.width - c))));
  }
  const float max_abs = _mm512_reduce_max_ps(max16);
  p.scales[row] = max_abs / 127.0f;
  const __m512 inverse = _mm512_set1_ps(max_abs > 0 ? 127.0f / max_abs : 0.0f);
  for (int64_t c = 0; c < p.width; c += 16) {
    const __mmask16 mask = FirstLanes(p.width - c);
    // Round to nearest even, as std::nearbyint; |x·inverse| <= 127 (up to
    // rounding, which the saturating narrowing absorbs).
    const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(Load16(p, start + c, mask), inverse));
    if (p.plus_128) {
      _mm512_mask_cvtusepi32_storeu_epi8(p.q + start + c, mask,
                                         _mm512_add_epi32(q, _mm512_set1_epi32(128)));
    } else {
      _mm512_mask_cvtsepi32_storeu_epi8(p.q + start + c, mask, q);
    }
  }
}

// fp32 rows only (bf16 activations come with AVX-512).
DOCSPARSE_AVX2 void QuantizeRowAvx2(const QuantizeRowsParams& p, int64_t row) {
  const float* x = static_cast<const float*>(p.x) + row * p.width;
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  __m256 max8 = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 8 <= p.width; c += 8)
    max8 = _mm256_max_ps(max8, _mm256_and_ps(_mm256_loadu_ps(x + c), abs_mask));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, max8);
  float max_abs = *std::max_element(lanes, lanes + 8);
  for (; c < p.width; ++c) max_abs = std::max(max_abs, std::fabs(x[c]));
  p.scales[row] = max_abs / 127.0f;
  const float inverse_scalar = max_abs > 0 ? 127.0f / max_abs : 0.0f;
  const __m256 inverse = _mm256_set1_ps(inverse_scalar);
  const __m256i flip = _mm256_set1_epi8(p.plus_128 ? static_cast<char>(0x80) : 0);
  // PACKSSDW and PACKSSWB narrow within 128-bit halves: four vectors a..d
  // come out as dwords a0 b0 c0 d0 a1 b1 c1 d1 (each four bytes), put back
  // in order by one permutation.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int8_t* q = p.q + row * p.width;
  for (c = 0; c + 32 <= p.width; c += 32) {
    __m256i v[4];
    for (int i = 0; i < 4; ++i) {
      // Round to nearest even, as std::nearbyint; |x·inverse| <= 127 up to
      // rounding, which the saturating narrowing absorbs.
      v[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + c + 8 * i), inverse));
    }
    const __m256i bytes =
        _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + c),
                        _mm256_xor_si256(_mm256_permutevar8x32_epi32(bytes, order), flip));
  }
  for (; c < p.width; ++c) q[c] = QuantizedCode(x[c], inverse_scalar, p.plus_128);
}

DOCSPARSE_AVX512 void DequantizeRowAvx512(const DequantizeRowsParams& p, int64_t row) {
  const int64_t start = row * p.width;
  const __m512 row_scale = _mm512_set1_ps(p.row_scales[row]);
  for (int64_t c = 0; c < p.width; c += 16) {
    const __mmask16 mask = FirstLanes(p.width - c);
    const __m512 sums = _mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(mask, p.sums + start + c));
    const __m512 scale =
        _mm512_mul_ps(row_scale, _mm512_maskz_loadu_ps(mask, p.channel_scales + c));
    const __m512 bias =
        p.bias != nullptr ? _mm512_maskz_loadu_ps(mask, p.bias + c) : _mm512_setzero_ps();
    const __m512 value = _mm512_fmadd_ps(sums, scale, bias);
    if (p.bf16) {
      StoreBf16x16(static_cast<uint16_t*>(p.y) + start + c, value, mask);
    } else {
      _mm512_mask_storeu_ps(static_cast<float*>(p.y) + start + c, mask, value);
    }
  }
}

bool UseAvx512() {
  static const bool avx512 = HostCpuFeatures().avx512bw_vl;
  return avx512;
}

bool UseAvx2() {
  static const bool avx2 = HostCpuFeatures().avx2_fma;
  return avx2;
}

}  // namespace

void QuantizeRowsInt8Portable(const QuantizeRowsParams& params, int64_t row_begin,
                              int64_t row_end) {
  for (int64_t row = row_begin; row < row_end; ++row) QuantizeRowPortable(params, row);
}

void DequantizeRowsInt8Portable(const DequantizeRowsParams& params, int64_t row_begin,
                                int64_t row_end) {
  for (int64_t row = row_begin; row < row_end; ++row) DequantizeRowPortable(params, row);
}

void QuantizeRowsInt8(const QuantizeRowsParams& params, int64_t row_begin, int64_t row_end) {
  for (int64_t row = row_begin; row < row_end; ++row) {
    if (UseAvx512()) {
      QuantizeRowAvx512(params, row);
    } else if (UseAvx2() && !params.bf16) {
      QuantizeRowAvx2(params, row);
    } else {
      QuantizeRowPortable(params, row);
    }
  }
}

void DequantizeRowsInt8(const DequantizeRowsParams& params, int64_t row_begin, int64_t row_end) {
  for (int64_t row = row_begin; row < row_end; ++row) {
    if (UseAvx512()) {
      DequantizeRowAvx512(params, row);
    } else {
      DequantizeRowPortable(params, row);
    }
  }
}

}  // namespace docsparse
