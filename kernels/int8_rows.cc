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

float Load(const QuantizeRowsParams& p, int64_t i) {
  return p.bf16 ? Bf16ToFloat(static_cast<const uint16_t*>(p.x)[i])
                : static_cast<const float*>(p.x)[i];
}

void QuantizeRowPortable(const QuantizeRowsParams& p, int64_t row) {
  const int64_t start = row * p.width;
  float max_abs = 0;
  for (int64_t c = 0; c < p.width; ++c) max_abs = std::max(max_abs, std::fabs(Load(p, start + c)));
  p.scales[row] = max_abs / 127.0f;
  const float inverse = max_abs > 0 ? 127.0f / max_abs : 0.0f;
  for (int64_t c = 0; c < p.width; ++c) {
    const float scaled = std::nearbyint(Load(p, start + c) * inverse);
    p.q[start + c] = static_cast<int8_t>(std::clamp(scaled, -127.0f, 127.0f));
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
    _mm512_mask_cvtsepi32_storeu_epi8(p.q + start + c, mask, q);
  }
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
