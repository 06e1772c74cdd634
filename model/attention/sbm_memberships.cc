#include "model/attention/sbm_memberships.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/vector_exp.h"

namespace docsparse {
namespace {

// Rows summed in float before the partial sums move to double: bounds the
// float rounding (each partial is at most kBlockRows) while keeping the
// inner loop in single precision.
constexpr int64_t kBlockRows = 256;

inline float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

#define DOCSPARSE_SBM_AVX2 __attribute__((target("avx2,fma")))

bool UseAvx2(int k) { return HostCpuFeatures().avx2_fma && k % 8 == 0; }

// σ(x − β) = 1 / (1 + e^(β − x)).
DOCSPARSE_SBM_AVX2 inline __m256 Sigmoid256(__m256 x, __m256 beta) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, Exp256(_mm256_sub_ps(beta, x))));
}

DOCSPARSE_SBM_AVX2 void AddColumnSumsAvx2(const float* logits, int64_t rows, int k, float beta,
                                          double* sums, double* slopes) {
  const __m256 b = _mm256_set1_ps(beta);
  const __m256 one = _mm256_set1_ps(1.0f);
  std::vector<float> block_sums(k), block_slopes(k);
  for (int64_t first = 0; first < rows; first += kBlockRows) {
    const int64_t last = std::min(rows, first + kBlockRows);
    for (int a = 0; a < k; a += 8) {
      __m256 sum = _mm256_setzero_ps();
      __m256 slope = _mm256_setzero_ps();
      for (int64_t i = first; i < last; ++i) {
        const __m256 s = Sigmoid256(_mm256_loadu_ps(logits + i * k + a), b);
        sum = _mm256_add_ps(sum, s);
        slope = _mm256_fmadd_ps(s, _mm256_sub_ps(one, s), slope);
      }
      _mm256_storeu_ps(block_sums.data() + a, sum);
      _mm256_storeu_ps(block_slopes.data() + a, slope);
    }
    for (int a = 0; a < k; ++a) {
      sums[a] += block_sums[a];
      slopes[a] += block_slopes[a];
    }
  }
}

DOCSPARSE_SBM_AVX2 void SigmoidAvx2(const float* logits, int64_t rows, int k, float beta,
                                    bool transpose, float* out) {
  const __m256 b = _mm256_set1_ps(beta);
  alignas(32) float lanes[8];
  for (int64_t i = 0; i < rows; ++i) {
    for (int a = 0; a < k; a += 8) {
      const __m256 s = Sigmoid256(_mm256_loadu_ps(logits + i * k + a), b);
      if (!transpose) {
        _mm256_storeu_ps(out + i * k + a, s);
        continue;
      }
      _mm256_store_ps(lanes, s);
      for (int l = 0; l < 8; ++l) out[(a + l) * rows + i] = lanes[l];
    }
  }
}

DOCSPARSE_SBM_AVX2 void MultiplyByBlockAvx2(const float* memberships, int64_t rows, int k,
                                            const float* block, float* out) {
  for (int64_t i = 0; i < rows; ++i) {
    const float* q = memberships + i * k;
    float* r = out + i * k;
    for (int b = 0; b < k; b += 8) {
      __m256 sum = _mm256_setzero_ps();
      for (int a = 0; a < k; ++a) {
        sum = _mm256_fmadd_ps(_mm256_set1_ps(q[a]), _mm256_loadu_ps(block + a * k + b), sum);
      }
      _mm256_storeu_ps(r + b, sum);
    }
  }
}

}  // namespace

void MultiplyByBlock(const float* memberships, int64_t rows, int k, const float* block,
                     float* out) {
  if (UseAvx2(k)) {
    MultiplyByBlockAvx2(memberships, rows, k, block, out);
    return;
  }
  for (int64_t i = 0; i < rows; ++i) {
    for (int b = 0; b < k; ++b) {
      float sum = 0;
      for (int a = 0; a < k; ++a) sum += memberships[i * k + a] * block[a * k + b];
      out[i * k + b] = sum;
    }
  }
}

void AddSigmoidColumnSums(const float* logits, int64_t rows, int k, double beta, double* sums,
                          double* slopes) {
  const float b = static_cast<float>(beta);
  if (UseAvx2(k)) {
    AddColumnSumsAvx2(logits, rows, k, b, sums, slopes);
    return;
  }
  std::vector<float> block_sums(k), block_slopes(k);
  for (int64_t first = 0; first < rows; first += kBlockRows) {
    const int64_t last = std::min(rows, first + kBlockRows);
    std::fill(block_sums.begin(), block_sums.end(), 0.0f);
    std::fill(block_slopes.begin(), block_slopes.end(), 0.0f);
    for (int64_t i = first; i < last; ++i) {
      for (int a = 0; a < k; ++a) {
        const float s = Sigmoid(logits[i * k + a] - b);
        block_sums[a] += s;
        block_slopes[a] += s * (1 - s);
      }
    }
    for (int a = 0; a < k; ++a) {
      sums[a] += block_sums[a];
      slopes[a] += block_slopes[a];
    }
  }
}

void SigmoidMemberships(const float* logits, int64_t rows, int k, double beta, bool transpose,
                        float* out) {
  const float b = static_cast<float>(beta);
  if (UseAvx2(k)) {
    SigmoidAvx2(logits, rows, k, b, transpose, out);
    return;
  }
  for (int64_t i = 0; i < rows; ++i) {
    for (int a = 0; a < k; ++a) {
      const float s = Sigmoid(logits[i * k + a] - b);
      if (transpose) {
        out[a * rows + i] = s;
      } else {
        out[i * k + a] = s;
      }
    }
  }
}

}  // namespace docsparse
