#include "kernels/residual_layer_norm.h"

#include <immintrin.h>

#include <cmath>

#include "kernels/bf16.h"
#include "kernels/cpu_features.h"
#include "kernels/layer_norm_row.h"
#include "kernels/row_scratch.h"

// GCC 12 warns inside its own AVX-512 headers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace docsparse {
namespace {

#define DOCSPARSE_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

DOCSPARSE_AVX512 void NormalizeRowAvx512(const ResidualLayerNormParams& p, int64_t row,
                                         float* sum_row) {
  const int64_t width = p.width;
  const uint16_t* x = p.x + row * width;
  const uint16_t* residual = p.residual == nullptr ? nullptr : p.residual + row * width;
  __m512 total = _mm512_setzero_ps();
  for (int64_t c = 0; c < width; c += 16) {
    const __mmask16 mask = FirstLanes(width - c);
    __m512 v = LoadBf16x16(x + c, mask);
    if (residual != nullptr) v = _mm512_add_ps(v, LoadBf16x16(residual + c, mask));
    _mm512_mask_storeu_ps(sum_row + c, mask, v);
    total = _mm512_add_ps(total, v);  // masked-off lanes loaded as 0
  }
  const float mean = _mm512_reduce_add_ps(total) / static_cast<float>(width);
  WriteLayerNormRowAvx512(sum_row, mean, width, p.gamma, p.beta, p.eps, p.out + row * width);
}

void NormalizeRowPortable(const ResidualLayerNormParams& p, int64_t row, float* sum_row) {
  const int64_t width = p.width;
  double total = 0;
  for (int64_t c = 0; c < width; ++c) {
    float v = Bf16ToFloat(p.x[row * width + c]);
    if (p.residual != nullptr) v += Bf16ToFloat(p.residual[row * width + c]);
    sum_row[c] = v;
    total += v;
  }
  const float mean = static_cast<float>(total / static_cast<double>(width));
  WriteLayerNormRowPortable(sum_row, mean, width, p.gamma, p.beta, p.eps, p.out + row * width);
}

using RowFunction = void (*)(const ResidualLayerNormParams&, int64_t, float*);

void RunRows(RowFunction row_function, const ResidualLayerNormParams& p, int64_t row_begin,
             int64_t row_end) {
  RowScratch sum_row(p.width);
  for (int64_t row = row_begin; row < row_end; ++row) row_function(p, row, sum_row.data());
}

}  // namespace

void ResidualLayerNormBf16RowsPortable(const ResidualLayerNormParams& params, int64_t row_begin,
                                       int64_t row_end) {
  RunRows(NormalizeRowPortable, params, row_begin, row_end);
}

void ResidualLayerNormBf16Rows(const ResidualLayerNormParams& params, int64_t row_begin,
                               int64_t row_end) {
  static const bool avx512 = HostCpuFeatures().avx512bw_vl;
  RunRows(avx512 ? NormalizeRowAvx512 : NormalizeRowPortable, params, row_begin, row_end);
}

}  // namespace docsparse
