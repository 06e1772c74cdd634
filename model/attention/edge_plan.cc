#include "model/attention/edge_plan.h"

#include <algorithm>
#include <limits>

namespace docsparse {

HeadEdgeList PatternHeadEdges(const PatternPlan& plan, int32_t head) {
  const int32_t n = plan.length;
  const int32_t blocks = plan.num_query_blocks();
  HeadEdgeList list;
  list.row_offsets.reserve(static_cast<size_t>(n) + 1);
  list.row_offsets.push_back(0);
  std::vector<int32_t> row;
  for (int32_t block = 0; block < blocks; ++block) {
    const int32_t cell = head * blocks + block;
    for (int32_t query = plan.query_block_starts[block]; query < plan.query_block_starts[block + 1];
         ++query) {
      row.clear();
      for (int32_t s = plan.span_offsets[cell]; s < plan.span_offsets[cell + 1]; ++s) {
        const KeySlide slide = plan.slides.empty() ? KeySlide{0, 0} : plan.slides[s];
        int32_t begin = 0, end = 0;
        SlidingRowKeys(plan.spans[s], slide, query, &begin, &end);
        for (int32_t key = begin; key < end; ++key) {
          row.push_back(key < n ? key : plan.key_gather[key - n]);
        }
      }
      if (!plan.key_gather.empty()) {
        // Copies map back to tokens in any order, and may repeat one
        // (BigBird's block 0). Without copies a row's spans ascend and never
        // share a token (pattern_plan.h).
        std::sort(row.begin(), row.end());
        row.erase(std::unique(row.begin(), row.end()), row.end());
      }
      list.keys.insert(list.keys.end(), row.begin(), row.end());
      list.row_offsets.push_back(static_cast<int64_t>(list.keys.size()));
    }
  }
  return list;
}

HeadEdgeList UnionOfEdges(const std::vector<HeadEdgeList>& parts) {
  if (parts.size() == 1) return parts.front();
  HeadEdgeList list;
  if (parts.empty()) return list;
  const int32_t rows = parts.front().rows();
  const bool biased = std::any_of(parts.begin(), parts.end(), [](const HeadEdgeList& part) {
    return !part.logit_bias.empty();
  });
  int64_t bound = 0;
  for (const HeadEdgeList& part : parts) bound += part.edges();
  list.keys.reserve(static_cast<size_t>(bound));
  if (biased) list.logit_bias.reserve(static_cast<size_t>(bound));
  list.row_offsets.reserve(static_cast<size_t>(rows) + 1);
  list.row_offsets.push_back(0);
  // Rows are ascending and distinct: a k-way merge. A pair several parts
  // list takes the smallest bias (a part without biases counts 0: the pair
  // is certain there).
  std::vector<int64_t> at(parts.size());
  for (int32_t i = 0; i < rows; ++i) {
    for (size_t p = 0; p < parts.size(); ++p) at[p] = parts[p].row_offsets[i];
    while (true) {
      int32_t next = std::numeric_limits<int32_t>::max();
      for (size_t p = 0; p < parts.size(); ++p) {
        if (at[p] < parts[p].row_offsets[i + 1]) next = std::min(next, parts[p].keys[at[p]]);
      }
      if (next == std::numeric_limits<int32_t>::max()) break;
      float bias = std::numeric_limits<float>::infinity();
      for (size_t p = 0; p < parts.size(); ++p) {
        if (at[p] < parts[p].row_offsets[i + 1] && parts[p].keys[at[p]] == next) {
          bias = std::min(bias, parts[p].logit_bias.empty() ? 0.0f : parts[p].logit_bias[at[p]]);
          ++at[p];
        }
      }
      list.keys.push_back(next);
      if (biased) list.logit_bias.push_back(bias);
    }
    list.row_offsets.push_back(static_cast<int64_t>(list.keys.size()));
  }
  return list;
}

}  // namespace docsparse
