// References for the CUDA attention kernels over explicit key lists: exact
// attention in double, and a naive same-precision attention (bf16 or fp16
// rounding where PyTorch's eager `softmax(q @ kᵀ * scale) @ v` rounds: after
// each matmul, the scaling and the softmax). Done-means for the half-precision
// kernels: their error against the double reference is at most twice the
// naive attention's.
#ifndef DOCSPARSE_TESTS_CUDA_ATTENTION_REFERENCE_H_
#define DOCSPARSE_TESTS_CUDA_ATTENTION_REFERENCE_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cuda_attention_params.h"

namespace docsparse {
namespace test {

// The keys query `query` of (item·head) `batch_head` attends to.
using KeysOf = std::function<std::vector<int>(int batch_head, int query)>;

struct AttentionShape {
  int batch_heads, q_len, k_len, head_dim;
};

inline float RoundTo(CudaElementType type, float x) {
  switch (type) {
    case CudaElementType::kBFloat16:
      return Bf16ToFloat(FloatToBf16(x));
    case CudaElementType::kFloat16:
      return static_cast<float>(static_cast<_Float16>(x));
    case CudaElementType::kFloat32:
      break;
  }
  return x;
}

inline std::vector<float> RoundAll(CudaElementType type, std::vector<float> values) {
  for (float& x : values) x = RoundTo(type, x);
  return values;
}

// The bytes a kernel reads for `values` in `type` (2 or 4 per element).
inline std::vector<uint8_t> Encode(CudaElementType type, const std::vector<float>& values) {
  const int width = CudaElementBytes(type);
  std::vector<uint8_t> bytes(values.size() * width);
  for (size_t i = 0; i < values.size(); ++i) {
    if (type == CudaElementType::kFloat32) {
      std::memcpy(&bytes[i * 4], &values[i], 4);
    } else if (type == CudaElementType::kBFloat16) {
      const uint16_t bits = FloatToBf16(values[i]);
      std::memcpy(&bytes[i * 2], &bits, 2);
    } else {
      const _Float16 half = static_cast<_Float16>(values[i]);
      std::memcpy(&bytes[i * 2], &half, 2);
    }
  }
  return bytes;
}

inline std::vector<float> Decode(CudaElementType type, const std::vector<uint8_t>& bytes) {
  const int width = CudaElementBytes(type);
  std::vector<float> values(bytes.size() / width);
  for (size_t i = 0; i < values.size(); ++i) {
    if (type == CudaElementType::kFloat32) {
      std::memcpy(&values[i], &bytes[i * 4], 4);
    } else if (type == CudaElementType::kBFloat16) {
      uint16_t bits;
      std::memcpy(&bits, &bytes[i * 2], 2);
      values[i] = Bf16ToFloat(bits);
    } else {
      _Float16 half;
      std::memcpy(&half, &bytes[i * 2], 2);
      values[i] = static_cast<float>(half);
    }
  }
  return values;
}

// Attention over the listed keys. `round` is nullptr for the reference
// (double throughout), else the rounding a naive same-precision attention
// applies after q·k, after the scaling, after the softmax and after p·v.
inline std::vector<float> AttentionOverKeys(const AttentionShape& s, const std::vector<float>& q,
                                            const std::vector<float>& k,
                                            const std::vector<float>& v, const KeysOf& keys_of,
                                            float (*round)(float) = nullptr) {
  const auto rounded = [&](double x) { return round ? static_cast<double>(round(x)) : x; };
  std::vector<float> out(static_cast<size_t>(s.batch_heads) * s.q_len * s.head_dim, 0.0f);
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  for (int bh = 0; bh < s.batch_heads; ++bh) {
    for (int i = 0; i < s.q_len; ++i) {
      const std::vector<int> keys = keys_of(bh, i);
      if (keys.empty()) continue;  // a query without keys gets zeros
      const float* query = &q[(static_cast<size_t>(bh) * s.q_len + i) * s.head_dim];
      std::vector<double> scores;
      double max_score = -1e300;
      for (int key : keys) {
        const float* kr = &k[(static_cast<size_t>(bh) * s.k_len + key) * s.head_dim];
        double dot = 0;
        for (int d = 0; d < s.head_dim; ++d) dot += static_cast<double>(query[d]) * kr[d];
        scores.push_back(rounded(rounded(dot) * (round ? static_cast<float>(scale) : scale)));
        max_score = std::max(max_score, scores.back());
      }
      double total = 0;
      for (double& score : scores) total += (score = std::exp(score - max_score));
      for (double& score : scores) score = rounded(score / total);
      float* row = &out[(static_cast<size_t>(bh) * s.q_len + i) * s.head_dim];
      for (int d = 0; d < s.head_dim; ++d) {
        double acc = 0;
        for (size_t j = 0; j < keys.size(); ++j) {
          acc += scores[j] * v[(static_cast<size_t>(bh) * s.k_len + keys[j]) * s.head_dim + d];
        }
        row[d] = static_cast<float>(rounded(acc));
      }
    }
  }
  return out;
}

inline float RoundBf16(float x) { return RoundTo(CudaElementType::kBFloat16, x); }
inline float RoundFp16(float x) { return RoundTo(CudaElementType::kFloat16, x); }
inline float (*NaiveRounding(CudaElementType type))(float) {
  return type == CudaElementType::kBFloat16 ? RoundBf16 : RoundFp16;
}

inline double MaxAbsError(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  return worst;
}

}  // namespace test
}  // namespace docsparse

#endif  // DOCSPARSE_TESTS_CUDA_ATTENTION_REFERENCE_H_
