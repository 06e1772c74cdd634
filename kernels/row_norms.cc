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

inline float ToFloat(uint16_t bf16) { return Bf16ToFloat(bf16); }
inline float ToFloat(float value) { return value; }

template <typename T>
void RowNormsScalar(const T* rows, int64_t count, int64_t stride, int64_t d, float* out) {
  for (int64_t i = 0; i < count; ++i) {
    const T* row = rows + i * stride;
    // Eight partial sums: one is a chain of dependent adds.
    float partial[8] = {};
    int64_t e = 0;
    for (; e + 8 <= d; e += 8) {
      for (int lane = 0; lane < 8; ++lane) {
        const float value = ToFloat(row[e + lane]);
        partial[lane] += value * value;
      }
    }
    for (; e < d; ++e) partial[0] += ToFloat(row[e]) * ToFloat(row[e]);
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

void FloatRowNorms(const float* rows, int64_t count, int64_t stride, int64_t d, float* out) {
  RowNormsScalar(rows, count, stride, d, out);
}

}  // namespace docsparse
