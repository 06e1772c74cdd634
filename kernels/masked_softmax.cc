#include "kernels/masked_softmax.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/bf16.h"
#include "kernels/cpu_features.h"
#include "kernels/row_scratch.h"
#include "kernels/vector_exp.h"

// GCC 12 warns inside its own AVX-512 headers, whose intrinsics start from
// _mm512_undefined_*() (GCC bug 105593); the values are never read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace docsparse {
namespace {

#define DOCSPARSE_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

DOCSPARSE_AVX512 void SoftmaxRowAvx512(const uint16_t* scores, uint16_t* probs, int64_t valid,
                                       int64_t cols, float scale, float* scratch) {
  __m512 max16 = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t c = 0; c < valid; c += 16) {
    const __mmask16 mask = FirstLanes(valid - c);
    const __m512 x = _mm512_mul_ps(LoadBf16x16(scores + c, mask), _mm512_set1_ps(scale));
    _mm512_mask_storeu_ps(scratch + c, mask, x);
    max16 = _mm512_mask_max_ps(max16, mask, max16, x);
  }
  const __m512 row_max = _mm512_set1_ps(_mm512_reduce_max_ps(max16));
  __m512 sum16 = _mm512_setzero_ps();
  for (int64_t c = 0; c < valid; c += 16) {
    const __mmask16 mask = FirstLanes(valid - c);
    const __m512 e =
        ExpNonPositive512(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, scratch + c), row_max));
    _mm512_mask_storeu_ps(scratch + c, mask, e);
    sum16 = _mm512_mask_add_ps(sum16, mask, sum16, e);
  }
  const __m512 inverse = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum16));
  for (int64_t c = 0; c < valid; c += 16) {
    const __mmask16 mask = FirstLanes(valid - c);
    StoreBf16x16(probs + c, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, scratch + c), inverse), mask);
  }
  std::fill(probs + valid, probs + cols, uint16_t{0});
}

void SoftmaxRowPortable(const uint16_t* scores, uint16_t* probs, int64_t valid, int64_t cols,
                        float scale, float* scratch) {
  float row_max = -std::numeric_limits<float>::infinity();
  for (int64_t c = 0; c < valid; ++c) {
    scratch[c] = Bf16ToFloat(scores[c]) * scale;
    row_max = std::max(row_max, scratch[c]);
  }
  float sum = 0;
  for (int64_t c = 0; c < valid; ++c) {
    scratch[c] = std::exp(scratch[c] - row_max);
    sum += scratch[c];
  }
  const float inverse = 1.0f / sum;
  for (int64_t c = 0; c < valid; ++c) probs[c] = FloatToBf16(scratch[c] * inverse);
  std::fill(probs + valid, probs + cols, uint16_t{0});
}

using RowFunction = void (*)(const uint16_t*, uint16_t*, int64_t, int64_t, float, float*);

void RunRows(RowFunction row_function, const MaskedSoftmaxParams& p, int64_t row_begin,
             int64_t row_end) {
  RowScratch scratch(p.cols);
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int64_t valid = std::clamp<int64_t>(p.valid_cols[row / p.rows_per_item], 1, p.cols);
    row_function(p.scores + row * p.cols, p.probs + row * p.cols, valid, p.cols, p.scale,
                 scratch.data());
  }
}

}  // namespace

void MaskedSoftmaxBf16RowsPortable(const MaskedSoftmaxParams& params, int64_t row_begin,
                                   int64_t row_end) {
  RunRows(SoftmaxRowPortable, params, row_begin, row_end);
}

void MaskedSoftmaxBf16Rows(const MaskedSoftmaxParams& params, int64_t row_begin, int64_t row_end) {
  static const bool avx512 = HostCpuFeatures().avx512bw_vl;
  RunRows(avx512 ? SoftmaxRowAvx512 : SoftmaxRowPortable, params, row_begin, row_end);
}

}  // namespace docsparse
