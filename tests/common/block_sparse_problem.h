// A random block-sparse attention problem (fp32 tensors, query blocks, key
// spans) and its reference output, two-pass softmax in double: shared by the
// CPU and CUDA executor tests.
#ifndef DOCSPARSE_TESTS_COMMON_BLOCK_SPARSE_PROBLEM_H_
#define DOCSPARSE_TESTS_COMMON_BLOCK_SPARSE_PROBLEM_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/block_sparse_plan.h"

namespace docsparse {
namespace test {

struct Problem {
  int batch, heads, q_len, k_len, head_dim, block_size;
  std::vector<float> q, k, v;
  std::vector<int32_t> block_starts;
  std::vector<int32_t> offsets;
  std::vector<KeySpan> spans;
  // Per span, or empty: no span slides.
  std::vector<KeySlide> slides;
  int blocks() const { return static_cast<int>(block_starts.size()) - 1; }
};

// Random tensors and, per (batch, head, query block), a random set of
// disjoint spans; `dense` gives every block the single span [0, k_len).
inline Problem MakeProblem(int batch, int heads, int q_len, int k_len, int head_dim, int block_size,
                           bool dense, uint32_t seed, int max_span = 5) {
  Problem p{batch, heads, q_len, k_len, head_dim, block_size, {}, {}, {}, {}, {0}, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  auto fill = [&](std::vector<float>* x, int len) {
    x->resize(static_cast<size_t>(batch) * heads * len * head_dim);
    for (float& value : *x) value = normal(rng);
  };
  fill(&p.q, q_len);
  fill(&p.k, k_len);
  fill(&p.v, k_len);
  for (int start = 0; start < q_len; start += block_size) p.block_starts.push_back(start);
  p.block_starts.push_back(q_len);
  for (int row = 0; row < batch * heads * p.blocks(); ++row) {
    if (dense) {
      p.spans.push_back({0, k_len});
    } else {
      // Walk the keys, alternately taking and skipping random lengths; some
      // blocks end up with nothing.
      int at = static_cast<int>(rng() % 3);
      bool take = rng() % 4 != 0;
      while (at < k_len) {
        const int length = 1 + static_cast<int>(rng() % max_span);
        if (take) p.spans.push_back({at, std::min(length, k_len - at)});
        at += length;
        take = !take;
      }
    }
    p.offsets.push_back(static_cast<int32_t>(p.spans.size()));
  }
  return p;
}

// Per (item·head, block), a fixed span [0, g) and a sliding span over
// [g, k_len) (a Longformer window: random offset and width, clipped), as
// pattern planners make them; the global keys leave every query one.
inline Problem MakeSlidingProblem(int batch, int heads, int q_len, int k_len, int head_dim,
                                  int block_size, uint32_t seed, int max_width) {
  Problem p = MakeProblem(batch, heads, q_len, k_len, head_dim, block_size, true, seed);
  std::mt19937 rng(seed + 1);
  p.spans.clear();
  p.offsets = {0};
  for (int row = 0; row < batch * heads * p.blocks(); ++row) {
    const int global = 1 + static_cast<int>(rng() % 3);
    const int width = 1 + static_cast<int>(rng() % max_width);
    const int offset = -static_cast<int>(rng() % (width + 1));
    p.spans.push_back({0, global});
    p.slides.push_back({0, 0});
    p.spans.push_back({global, k_len - global});
    p.slides.push_back({offset, width});
    p.offsets.push_back(static_cast<int32_t>(p.spans.size()));
  }
  return p;
}

// The keys query `query` of (item·head) `bh` attends to: its block's spans
// (blocks of p.block_size queries), none past the last block.
inline std::vector<int> QueryKeys(const Problem& p, int bh, int query) {
  std::vector<int> keys;
  const int block = query / p.block_size;
  if (block >= p.blocks() || query >= p.block_starts.back()) return keys;
  const int row = bh * p.blocks() + block;
  for (int s = p.offsets[row]; s < p.offsets[row + 1]; ++s) {
    const KeySlide slide = p.slides.empty() ? KeySlide{0, 0} : p.slides[s];
    // The definition, key by key: within the span, and for a sliding one
    // within [query + offset, query + offset + width).
    for (int j = 0; j < p.spans[s].length; ++j) {
      const int key = p.spans[s].begin + j;
      if (slide.width == 0 ||
          (key >= query + slide.offset && key < query + slide.offset + slide.width)) {
        keys.push_back(key);
      }
    }
  }
  return keys;
}

// Two-pass softmax in double over the same spans.
inline std::vector<float> Reference(const Problem& p) {
  std::vector<float> out(p.q.size());
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.heads; ++h) {
      const size_t bh = static_cast<size_t>(b) * p.heads + h;
      for (int i = 0; i < p.q_len; ++i) {
        const std::vector<int> keys = QueryKeys(p, static_cast<int>(bh), i);
        const float* q = &p.q[(bh * p.q_len + i) * p.head_dim];
        std::vector<double> scores;
        double max_score = -1e300;
        for (int key : keys) {
          const float* k = &p.k[(bh * p.k_len + key) * p.head_dim];
          double dot = 0;
          for (int d = 0; d < p.head_dim; ++d) dot += static_cast<double>(q[d]) * k[d];
          scores.push_back(dot / std::sqrt(static_cast<double>(p.head_dim)));
          max_score = std::max(max_score, scores.back());
        }
        double total = 0;
        for (double& s : scores) total += (s = std::exp(s - max_score));
        for (int d = 0; d < p.head_dim; ++d) {
          double acc = 0;
          for (size_t j = 0; j < keys.size(); ++j) {
            acc += scores[j] * p.v[(bh * p.k_len + keys[j]) * p.head_dim + d];
          }
          out[(bh * p.q_len + i) * p.head_dim + d] =
              keys.empty() ? 0.0f : static_cast<float>(acc / total);
        }
      }
    }
  }
  return out;
}

}  // namespace test
}  // namespace docsparse

#endif  // DOCSPARSE_TESTS_COMMON_BLOCK_SPARSE_PROBLEM_H_
