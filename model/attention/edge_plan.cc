#include "model/attention/edge_plan.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <limits>

namespace docsparse {

HeadEdgeList BuildHeadEdgeList(int32_t rows, bool biased,
                               const std::function<void(int32_t row, std::vector<int32_t>& keys,
                                                        std::vector<float>& bias)>& append_row) {
  constexpr int64_t kBlockRows = 256;
  const int64_t blocks = (int64_t{rows} + kBlockRows - 1) / kBlockRows;
  std::vector<std::vector<int32_t>> block_keys(static_cast<size_t>(blocks));
  std::vector<std::vector<float>> block_bias(static_cast<size_t>(blocks));
  HeadEdgeList list;
  list.row_offsets.assign(static_cast<size_t>(rows) + 1, 0);
  at::parallel_for(0, blocks, 1, [&](int64_t first_block, int64_t last_block) {
    for (int64_t block = first_block; block < last_block; ++block) {
      std::vector<int32_t>& keys = block_keys[block];
      std::vector<float>& bias = block_bias[block];
      const int64_t end = std::min<int64_t>(rows, (block + 1) * kBlockRows);
      for (int64_t i = block * kBlockRows; i < end; ++i) {
        const size_t before = keys.size();
        append_row(static_cast<int32_t>(i), keys, bias);
        list.row_offsets[i + 1] = static_cast<int64_t>(keys.size() - before);
      }
    }
  });
  for (int32_t i = 0; i < rows; ++i) list.row_offsets[i + 1] += list.row_offsets[i];
  list.keys.reserve(static_cast<size_t>(list.row_offsets[rows]));
  for (const std::vector<int32_t>& keys : block_keys) {
    list.keys.insert(list.keys.end(), keys.begin(), keys.end());
  }
  if (biased) {
    list.logit_bias.reserve(list.keys.size());
    for (const std::vector<float>& bias : block_bias) {
      list.logit_bias.insert(list.logit_bias.end(), bias.begin(), bias.end());
    }
  }
  return list;
}

HeadEdgeList PatternHeadEdges(const PatternPlan& plan, int32_t head) {
  const int32_t n = plan.length;
  const int32_t blocks = plan.num_query_blocks();
  return BuildHeadEdgeList(
      n, false, [&](int32_t query, std::vector<int32_t>& keys, std::vector<float>&) {
        const int32_t block =
            static_cast<int32_t>(std::upper_bound(plan.query_block_starts.begin(),
                                                  plan.query_block_starts.end(), query) -
                                 plan.query_block_starts.begin() - 1);
        const int32_t cell = head * blocks + block;
        const size_t row_begin = keys.size();
        for (int32_t s = plan.span_offsets[cell]; s < plan.span_offsets[cell + 1]; ++s) {
          const KeySlide slide = plan.slides.empty() ? KeySlide{0, 0} : plan.slides[s];
          int32_t begin = 0, end = 0;
          SlidingRowKeys(plan.spans[s], slide, query, &begin, &end);
          for (int32_t key = begin; key < end; ++key) {
            keys.push_back(key < n ? key : plan.key_gather[key - n]);
          }
        }
        if (!plan.key_gather.empty()) {
          // Copies map back to tokens in any order, and may repeat one
          // (BigBird's block 0). Without copies a row's spans ascend and never
          // share a token (pattern_plan.h).
          const auto first = keys.begin() + static_cast<int64_t>(row_begin);
          std::sort(first, keys.end());
          keys.erase(std::unique(first, keys.end()), keys.end());
        }
      });
}

HeadEdgeList UnionOfEdges(const std::vector<HeadEdgeList>& parts) {
  if (parts.size() == 1) return parts.front();
  if (parts.empty()) return HeadEdgeList{};
  const bool biased = std::any_of(parts.begin(), parts.end(), [](const HeadEdgeList& part) {
    return !part.logit_bias.empty();
  });
  // Rows are ascending and distinct: a k-way merge. A pair several parts
  // list takes the smallest bias (a part without biases counts 0: the pair
  // is certain there).
  return BuildHeadEdgeList(
      parts.front().rows(), biased,
      [&](int32_t i, std::vector<int32_t>& keys, std::vector<float>& bias) {
        std::vector<int64_t> at(parts.size());
        for (size_t p = 0; p < parts.size(); ++p) at[p] = parts[p].row_offsets[i];
        while (true) {
          int32_t next = std::numeric_limits<int32_t>::max();
          for (size_t p = 0; p < parts.size(); ++p) {
            if (at[p] < parts[p].row_offsets[i + 1]) next = std::min(next, parts[p].keys[at[p]]);
          }
          if (next == std::numeric_limits<int32_t>::max()) break;
          float least = std::numeric_limits<float>::infinity();
          for (size_t p = 0; p < parts.size(); ++p) {
            if (at[p] < parts[p].row_offsets[i + 1] && parts[p].keys[at[p]] == next) {
              least =
                  std::min(least, parts[p].logit_bias.empty() ? 0.0f : parts[p].logit_bias[at[p]]);
              ++at[p];
            }
          }
          keys.push_back(next);
          if (biased) bias.push_back(least);
        }
      });
}

}  // namespace docsparse
