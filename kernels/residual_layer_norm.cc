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

DOCSPARSE_AVX512 inline __m512 Load16(const uint16_t* bits, __mmask16 mask) {
  return LoadBf16x16(bits, mask);
}
DOCSPARSE_AVX512 inline __m512 Load16(const float* values, __mmask16 mask) {
  return _mm512_maskz_loadu_ps(mask, values);
}
inline float Load1(const uint16_t* bits) { return Bf16ToFloat(*bits); }
inline float Load1(const float* value) { return *value; }

template <typename Element>
DOCSPARSE_AVX512 void NormalizeRowAvx512(const ResidualLayerNormRowsParams<Element>& p, int64_t row,
                                         float* sum_row) {
  const int64_t width = p.width;
  const Element* x = p.x + row * width;
  const Element* residual = p.residual == nullptr ? nullptr : p.residual + row * width;
  const auto load_sum = [&](int64_t c, __mmask16 mask) DOCSPARSE_AVX512 {
    __m512 v = Load16(x + c, mask);
    if (residual != nullptr) v = _mm512_add_ps(v, Load16(residual + c, mask));
    _mm512_mask_storeu_ps(sum_row + c, mask, v);
    return v;  // masked-off lanes 0
  };
  // The mean's sum in double lanes: rows far from zero (an offset of 1,000
  // over 4,096 columns) lose ~1e-3 of it in fp32 lanes, and the
  // normalisation scales that up. Two vectors are added in fp32 first (one
  // rounding of a two-term sum), then widened: widening every vector, with
  // a mask computed for each, was a third of the row's time. Two
  // independent double sums (low and high halves).
  __m512d low = _mm512_setzero_pd(), high = _mm512_setzero_pd();
  const auto add_wide = [&](__m512 v) DOCSPARSE_AVX512 {
    low = _mm512_add_pd(low, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    high = _mm512_add_pd(
        high, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
  };
  int64_t c = 0;
  for (; c + 32 <= width; c += 32) {
    add_wide(_mm512_add_ps(load_sum(c, 0xffff), load_sum(c + 16, 0xffff)));
  }
  for (; c < width; c += 16) add_wide(load_sum(c, FirstLanes(width - c)));
  const float mean = static_cast<float>(_mm512_reduce_add_pd(_mm512_add_pd(low, high)) /
                                        static_cast<double>(width));
  WriteLayerNormRowAvx512(sum_row, mean, width, p.gamma, p.beta, p.eps, p.out + row * width);
}

#define DOCSPARSE_AVX2 __attribute__((target("avx2,fma")))

// The AVX2 form: the mean's sum in double lanes too, two vectors added in
// fp32 before each widening (as in the AVX-512 form), the columns past the
// last multiple of 8 one by one.
template <typename Element>
DOCSPARSE_AVX2 void NormalizeRowAvx2(const ResidualLayerNormRowsParams<Element>& p, int64_t row,
                                     float* sum_row) {
  const int64_t width = p.width;
  const int64_t full = width / 8 * 8;
  const Element* x = p.x + row * width;
  const Element* residual = p.residual == nullptr ? nullptr : p.residual + row * width;
  __m256d low = _mm256_setzero_pd(), high = _mm256_setzero_pd();
  const auto load_sum = [&](int64_t c) DOCSPARSE_AVX2 {
    __m256 v = LoadElements8(x + c);
    if (residual != nullptr) v = _mm256_add_ps(v, LoadElements8(residual + c));
    _mm256_storeu_ps(sum_row + c, v);
    return v;
  };
  const auto add_wide = [&](__m256 v) DOCSPARSE_AVX2 {
    low = _mm256_add_pd(low, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    high = _mm256_add_pd(high, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  };
  int64_t c = 0;
  for (; c + 16 <= full; c += 16) add_wide(_mm256_add_ps(load_sum(c), load_sum(c + 8)));
  if (c < full) add_wide(load_sum(c));
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(low, high));
  double total = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (c = full; c < width; ++c) {
    float v = Load1(x + c);
    if (residual != nullptr) v += Load1(residual + c);
    sum_row[c] = v;
    total += v;
  }
  const float mean = static_cast<float>(total / static_cast<double>(width));
  WriteLayerNormRowAvx2(sum_row, mean, width, p.gamma, p.beta, p.eps, p.out + row * width);
}

template <typename Element>
void NormalizeRowPortable(const ResidualLayerNormRowsParams<Element>& p, int64_t row,
                          float* sum_row) {
  const int64_t width = p.width;
  double total = 0;
  for (int64_t c = 0; c < width; ++c) {
    float v = Load1(p.x + row * width + c);
    if (p.residual != nullptr) v += Load1(p.residual + row * width + c);
    sum_row[c] = v;
    total += v;
  }
  const float mean = static_cast<float>(total / static_cast<double>(width));
  WriteLayerNormRowPortable(sum_row, mean, width, p.gamma, p.beta, p.eps, p.out + row * width);
}

template <typename Element>
using RowFunction = void (*)(const ResidualLayerNormRowsParams<Element>&, int64_t, float*);

template <typename Element>
void RunRows(RowFunction<Element> row_function, const ResidualLayerNormRowsParams<Element>& p,
             int64_t row_begin, int64_t row_end) {
  RowScratch sum_row(p.width);
  for (int64_t row = row_begin; row < row_end; ++row) row_function(p, row, sum_row.data());
}

template <typename Element>
void RunDispatched(const ResidualLayerNormRowsParams<Element>& p, int64_t row_begin,
                   int64_t row_end) {
  static const RowFunction<Element> row_function = [] {
    const CpuFeatures& cpu = HostCpuFeatures();
    if (cpu.avx512bw_vl) return NormalizeRowAvx512<Element>;
    return cpu.avx2_fma ? NormalizeRowAvx2<Element> : NormalizeRowPortable<Element>;
  }();
  RunRows<Element>(row_function, p, row_begin, row_end);
}

}  // namespace

void ResidualLayerNormBf16RowsPortable(const ResidualLayerNormParams& params, int64_t row_begin,
                                       int64_t row_end) {
  RunRows<uint16_t>(NormalizeRowPortable<uint16_t>, params, row_begin, row_end);
}

void ResidualLayerNormBf16Rows(const ResidualLayerNormParams& params, int64_t row_begin,
                               int64_t row_end) {
  RunDispatched(params, row_begin, row_end);
}

void ResidualLayerNormFp32RowsPortable(const ResidualLayerNormFp32Params& params, int64_t row_begin,
                                       int64_t row_end) {
  RunRows<float>(NormalizeRowPortable<float>, params, row_begin, row_end);
}

void ResidualLayerNormFp32Rows(const ResidualLayerNormFp32Params& params, int64_t row_begin,
                               int64_t row_end) {
  RunDispatched(params, row_begin, row_end);
}

}  // namespace docsparse
