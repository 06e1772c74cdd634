#include "kernels/masked_softmax.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "kernels/cpu_features.h"
#include "kernels/vector_exp.h"

// GCC 12 warns inside its own AVX-512 headers, whose intrinsics start from
// _mm512_undefined_*() (GCC bug 105593); the values are never read.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace docsparse {
namespace {

float Bf16ToFloat(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof(value));
  return value;
}

// Round to nearest even, as LibTorch's and the AVX-512 path's conversion.
uint16_t FloatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

#define DOCSPARSE_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

DOCSPARSE_AVX512 inline __m512 LoadBf16(const uint16_t* src, __mmask16 mask) {
  const __m256i bits = _mm256_maskz_loadu_epi16(mask, src);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// Round to nearest even (NaN does not occur: inputs are finite probabilities).
DOCSPARSE_AVX512 inline void StoreBf16(uint16_t* dst, __m512 value, __mmask16 mask) {
  const __m512i bits = _mm512_castps_si512(value);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(bits, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
  _mm256_mask_storeu_epi16(dst, mask, _mm512_cvtepi32_epi16(rounded));
}

// The lanes of the 16 that hold columns, when `remaining` columns are left.
inline __mmask16 FirstLanes(int64_t remaining) {
  return static_cast<__mmask16>(remaining >= 16 ? 0xFFFF
                                                : (1u << static_cast<unsigned>(remaining)) - 1);
}

DOCSPARSE_AVX512 void SoftmaxRowAvx512(const uint16_t* scores, uint16_t* probs, int64_t valid,
                                       int64_t cols, float scale, float* scratch) {
  __m512 max16 = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t c = 0; c < valid; c += 16) {
    const __mmask16 mask = FirstLanes(valid - c);
    const __m512 x = _mm512_mul_ps(LoadBf16(scores + c, mask), _mm512_set1_ps(scale));
    _mm512_mask_storeu_ps(scratch + c, mask, x);
    max16 = _mm512_mask_max_ps(max16, mask, max16, x);
  }
  const __m512 row_max = _mm512_set1_ps(_mm512_reduce_max_ps(max16));
  __m512 sum16 = _mm512_setzero_ps();
  for (int64_t c = 0; c < valid; c += 16) {
    const __mmask16 mask = FirstLanes(valid - c);
    const __m512 e = Exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, scratch + c), row_max));
    _mm512_mask_storeu_ps(scratch + c, mask, e);
    sum16 = _mm512_mask_add_ps(sum16, mask, sum16, e);
  }
  const __m512 inverse = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sum16));
  for (int64_t c = 0; c < valid; c += 16) {
    const __mmask16 mask = FirstLanes(valid - c);
    StoreBf16(probs + c, _mm512_mul_ps(_mm512_maskz_loadu_ps(mask, scratch + c), inverse), mask);
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
  // One row of fp32 scratch per call: a few KiB on the stack for 512 keys,
  // on the heap beyond.
  constexpr int64_t kStackCols = 4096;
  float stack_scratch[kStackCols];
  std::unique_ptr<float[]> heap_scratch;
  float* scratch = stack_scratch;
  if (p.cols > kStackCols) {
    heap_scratch.reset(new float[p.cols]);
    scratch = heap_scratch.get();
  }
  for (int64_t row = row_begin; row < row_end; ++row) {
    const int64_t valid = std::clamp<int64_t>(p.valid_cols[row / p.rows_per_item], 1, p.cols);
    row_function(p.scores + row * p.cols, p.probs + row * p.cols, valid, p.cols, p.scale, scratch);
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
