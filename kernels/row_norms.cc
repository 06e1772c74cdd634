#include "kernels/row_norms.h"

#include <immintrin.h>

#include <cmath>

#include "kernels/bf16.h"
#include "kernels/cpu_features.h"

// GCC 12 warns inside its own AVX-512 headers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace docsparse {
namespace {

__attribute__((target("avx512f,avx512bw,avx512vl"))) void RowNormsAvx512(const uint16_t* rows,
                                                                         int64_t count,
                                                                         int64_t stride, int64_t d,
                                                                         float* out) {
  for (int64_t i = 0; i < count; ++i) {
    const uint16_t* row = rows + i * stride;
    __m512 sum = _mm512_setzero_ps();
    for (int64_t e = 0; e < d; e += 16) {
      const __m512 x = LoadBf16x16(row + e, 0xFFFF);
      sum = _mm512_fmadd_ps(x, x, sum);
    }
    out[i] = std::sqrt(_mm512_reduce_add_ps(sum));
  }
}

// Lane r: the sum of rows[r]'s lanes, added as _mm512_reduce_add_ps adds
// them (lanes 8 apart, then 4, 2 and 1), so bit for bit its result. Each
// level adds two registers' halves at once.
__attribute__((target("avx512f,avx512bw,avx512vl"))) __m512 ReduceSixteen(const __m512* rows) {
  __m512 by8[8], by4[4], by2[2];
  for (int i = 0; i < 8; ++i) {  // lanes 0-7: row 2i; 8-15: row 2i + 1
    const __m512 a = rows[2 * i], b = rows[2 * i + 1];
    by8[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  for (int i = 0; i < 4; ++i) {  // 128-bit block j: row 4i + j
    const __m512 a = by8[2 * i], b = by8[2 * i + 1];
    by4[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
  }
  for (int i = 0; i < 2; ++i) {  // block j, lanes 0-1: row 8i + j; 2-3: row 8i + 4 + j
    const __m512 a = by4[2 * i], b = by4[2 * i + 1];
    by2[i] = _mm512_add_ps(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // Block j, lane q: row j + 4q.
  const __m512 sums = _mm512_add_ps(_mm512_shuffle_ps(by2[0], by2[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm512_shuffle_ps(by2[0], by2[1], _MM_SHUFFLE(3, 1, 3, 1)));
  // Row r sits in lane 4·(r mod 4) + r / 4.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, sums);
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void HeadNormsAvx512(
    const uint16_t* rows, int64_t tokens, int64_t token_stride, int64_t heads, int64_t head_stride,
    int64_t d, float* out) {
  const int64_t whole = tokens / 16 * 16;
  for (int64_t t = 0; t < whole; t += 16) {
    for (int64_t h = 0; h < heads; ++h) {
      const uint16_t* first = rows + t * token_stride + h * head_stride;
      __m512 sums[16];
      for (int r = 0; r < 16; ++r) {
        const uint16_t* row = first + r * token_stride;
        __m512 sum = _mm512_setzero_ps();
        for (int64_t e = 0; e < d; e += 16) {
          const __m512 x = LoadBf16x16(row + e, 0xFFFF);
          sum = _mm512_fmadd_ps(x, x, sum);
        }
        sums[r] = sum;
      }
      _mm512_storeu_ps(out + h * tokens + t, _mm512_sqrt_ps(ReduceSixteen(sums)));
    }
  }
  for (int64_t t = whole; t < tokens; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      RowNormsAvx512(rows + t * token_stride + h * head_stride, 1, 0, d, out + h * tokens + t);
    }
  }
}

template <typename T>
void RowNormsScalar(const T* rows, int64_t count, int64_t stride, int64_t d, float* out) {
  for (int64_t i = 0; i < count; ++i) {
    const T* row = rows + i * stride;
    // Eight partial sums: one is a chain of dependent adds.
    float partial[8] = {};
    int64_t e = 0;
    for (; e + 8 <= d; e += 8) {
      for (int lane = 0; lane < 8; ++lane) {
        const float value = ElementToFloat(row[e + lane]);
        partial[lane] += value * value;
      }
    }
    for (; e < d; ++e) partial[0] += ElementToFloat(row[e]) * ElementToFloat(row[e]);
    float sum = 0;
    for (float p : partial) sum += p;
    out[i] = std::sqrt(sum);
  }
}

}  // namespace

void Bf16RowNorms(const uint16_t* rows, int64_t count, int64_t stride, int64_t d, float* out) {
  static const bool avx512 = HostCpuFeatures().avx512bw_vl;
  if (avx512 && d % 16 == 0) {
    RowNormsAvx512(rows, count, stride, d, out);
  } else {
    RowNormsScalar(rows, count, stride, d, out);
  }
}

void Bf16HeadNorms(const uint16_t* rows, int64_t tokens, int64_t token_stride, int64_t heads,
                   int64_t head_stride, int64_t d, float* out) {
  static const bool avx512 = HostCpuFeatures().avx512bw_vl;
  if (avx512 && d % 16 == 0) {
    HeadNormsAvx512(rows, tokens, token_stride, heads, head_stride, d, out);
    return;
  }
  for (int64_t h = 0; h < heads; ++h) {
    RowNormsScalar(rows + h * head_stride, tokens, token_stride, d, out + h * tokens);
  }
}

void FloatRowNorms(const float* rows, int64_t count, int64_t stride, int64_t d, float* out) {
  RowNormsScalar(rows, count, stride, d, out);
}

}  // namespace docsparse
