// One row's online-softmax update over a tile of scores on AVX-512
// (Milakov & Gimelshein), shared by the fp32 and bf16 tile executors:
// rescales what the row accumulated when its maximum grows, turns the
// tile's scores into unnormalised probabilities in place (zeros at the
// padding keys), and adds them to the row's denominator. Callers compiled
// for AVX-512 inline it; the including file need not be.
#ifndef DOCSPARSE_KERNELS_ONLINE_SOFTMAX_AVX512_H_
#define DOCSPARSE_KERNELS_ONLINE_SOFTMAX_AVX512_H_

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/bf16.h"
#include "kernels/vector_exp.h"

namespace docsparse {

// row: [padded_keys] scores, of which the first tile_keys are real; acc:
// [head_dim] (a multiple of 16) the row's unnormalised output.
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline void OnlineSoftmaxRowAvx512(
    float* row, int32_t tile_keys, int32_t padded_keys, float* acc, int32_t head_dim,
    float* row_max, float* row_sum) {
  __m512 max16 = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int32_t j = 0; j < tile_keys; j += 16) {
    max16 = _mm512_mask_max_ps(max16, FirstLanes(tile_keys - j), max16, _mm512_loadu_ps(row + j));
  }
  const float new_max = std::max(*row_max, _mm512_reduce_max_ps(max16));
  const float correction = std::exp(*row_max - new_max);  // 0 on the first tile
  const __m512 shift = _mm512_set1_ps(new_max);
  __m512 sum16 = _mm512_setzero_ps();
  for (int32_t j = 0; j < padded_keys; j += 16) {
    const __mmask16 real = j < tile_keys ? FirstLanes(tile_keys - j) : __mmask16{0};
    const __m512 e = _mm512_maskz_mov_ps(
        real, ExpNonPositive512(_mm512_sub_ps(_mm512_loadu_ps(row + j), shift)));
    _mm512_storeu_ps(row + j, e);
    sum16 = _mm512_add_ps(sum16, e);
  }
  const __m512 c = _mm512_set1_ps(correction);
  for (int32_t i = 0; i < head_dim; i += 16) {
    _mm512_storeu_ps(acc + i, _mm512_mul_ps(_mm512_loadu_ps(acc + i), c));
  }
  *row_sum = *row_sum * correction + _mm512_reduce_add_ps(sum16);
  *row_max = new_max;
}

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_ONLINE_SOFTMAX_AVX512_H_
