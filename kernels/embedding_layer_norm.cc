#include "kernels/embedding_layer_norm.h"

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

// The row's three table rows (null where a table is absent).
struct SourceRows {
  const float* word;
  const float* position;
  const float* token_type;
};

SourceRows RowsOf(const EmbeddingLayerNormParams& p, int64_t row) {
  return {p.word + p.ids[row] * p.width,
          p.position == nullptr ? nullptr : p.position + p.positions[row] * p.width,
          p.token_type == nullptr ? nullptr : p.token_type + p.types[row] * p.width};
}

DOCSPARSE_AVX512 void NormalizeRowAvx512(const EmbeddingLayerNormParams& p, int64_t row,
                                         float* sum_row) {
  const int64_t width = p.width;
  const SourceRows source = RowsOf(p, row);
  __m512 total = _mm512_setzero_ps();
  for (int64_t c = 0; c < width; c += 16) {
    const __mmask16 mask = FirstLanes(width - c);
    __m512 v = _mm512_maskz_loadu_ps(mask, source.word + c);
    if (source.position != nullptr) {
      v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, source.position + c));
    }
    if (source.token_type != nullptr) {
      v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, source.token_type + c));
    }
    _mm512_mask_storeu_ps(sum_row + c, mask, v);
    total = _mm512_add_ps(total, v);  // masked-off lanes loaded as 0
  }
  const float mean = _mm512_reduce_add_ps(total) / static_cast<float>(width);
  if (p.out_bf16) {
    WriteLayerNormRowAvx512(sum_row, mean, width, p.gamma, p.beta, p.eps,
                            static_cast<uint16_t*>(p.out) + row * p.out_stride);
  } else {
    WriteLayerNormRowAvx512(sum_row, mean, width, p.gamma, p.beta, p.eps,
                            static_cast<float*>(p.out) + row * p.out_stride);
  }
}

void NormalizeRowPortable(const EmbeddingLayerNormParams& p, int64_t row, float* sum_row) {
  const int64_t width = p.width;
  const SourceRows source = RowsOf(p, row);
  double total = 0;
  for (int64_t c = 0; c < width; ++c) {
    float v = source.word[c];
    if (source.position != nullptr) v += source.position[c];
    if (source.token_type != nullptr) v += source.token_type[c];
    sum_row[c] = v;
    total += v;
  }
  const float mean = static_cast<float>(total / static_cast<double>(width));
  if (p.out_bf16) {
    WriteLayerNormRowPortable(sum_row, mean, width, p.gamma, p.beta, p.eps,
                              static_cast<uint16_t*>(p.out) + row * p.out_stride);
  } else {
    WriteLayerNormRowPortable(sum_row, mean, width, p.gamma, p.beta, p.eps,
                              static_cast<float*>(p.out) + row * p.out_stride);
  }
}

using RowFunction = void (*)(const EmbeddingLayerNormParams&, int64_t, float*);

void RunRows(RowFunction row_function, const EmbeddingLayerNormParams& p, int64_t row_begin,
             int64_t row_end) {
  RowScratch sum_row(p.width);
  for (int64_t row = row_begin; row < row_end; ++row) row_function(p, row, sum_row.data());
}

}  // namespace

void EmbeddingLayerNormRowsPortable(const EmbeddingLayerNormParams& params, int64_t row_begin,
                                    int64_t row_end) {
  RunRows(NormalizeRowPortable, params, row_begin, row_end);
}

void EmbeddingLayerNormRows(const EmbeddingLayerNormParams& params, int64_t row_begin,
                            int64_t row_end) {
  static const bool avx512 = HostCpuFeatures().avx512bw_vl;
  RunRows(avx512 ? NormalizeRowAvx512 : NormalizeRowPortable, params, row_begin, row_end);
}

}  // namespace docsparse
