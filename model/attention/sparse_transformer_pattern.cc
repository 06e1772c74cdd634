#include "model/attention/sparse_transformer_pattern.h"

#include <algorithm>
#include <cassert>
#include <utility>
#include <vector>

namespace docsparse {
namespace {

// The last `summary` tokens of each stride block, in ascending order. Every
// block but the last is full, so the summaries of blocks [0, k) are the
// first k·summary entries whenever block k exists.
std::vector<int32_t> SummaryTokens(int32_t length, int32_t stride, int32_t summary) {
  std::vector<int32_t> tokens;
  for (int64_t block_start = 0; block_start < length; block_start += stride) {
    const int64_t end = std::min<int64_t>(length, block_start + stride);
    for (int64_t token = block_start + stride - summary; token < end; ++token) {
      tokens.push_back(static_cast<int32_t>(token));
    }
  }
  return tokens;
}

}  // namespace

PatternPlan PlanSparseTransformer(const SparseTransformerKnobs& knobs, int32_t length,
                                  int32_t heads) {
  assert(knobs.stride >= 1);
  assert(knobs.summary >= 1 && knobs.summary <= knobs.stride);
  assert(knobs.fixed_heads >= -1 && knobs.fixed_heads <= heads);
  assert(length >= 0 && heads >= 1);
  const int64_t stride = knobs.stride;
  const int64_t summary = knobs.summary;
  const int32_t fixed_heads = knobs.fixed_heads < 0 ? heads / 2 : knobs.fixed_heads;
  const int32_t strided_heads = heads - fixed_heads;

  const ResidueClasses columns(0, length, knobs.stride);
  std::vector<int32_t> key_gather;
  if (strided_heads > 0) key_gather = columns.Tokens();
  const int64_t columns_at = length;
  const int64_t summaries_at = int64_t{length} + static_cast<int64_t>(key_gather.size());
  if (fixed_heads > 0) {
    const std::vector<int32_t> summaries = SummaryTokens(length, knobs.stride, knobs.summary);
    key_gather.insert(key_gather.end(), summaries.begin(), summaries.end());
  }
  const int64_t summary_count =
      int64_t{length} + static_cast<int64_t>(key_gather.size()) - summaries_at;

  const std::vector<int32_t> query_block_starts =
      UniformQueryBlocks(length, strided_heads > 0 ? 1 : knobs.stride);
  const int32_t blocks = static_cast<int32_t>(query_block_starts.size()) - 1;
  PatternPlanBuilder builder(length, heads, query_block_starts, std::move(key_gather));

  for (int32_t head = 0; head < strided_heads; ++head) {
    for (int32_t row = 0; row < length; ++row) {
      builder.AddSpan(std::max<int64_t>(0, row - stride + 1),
                      std::min<int64_t>(length, row + stride));
      const int32_t residue = static_cast<int32_t>(row % stride);
      const ResidueClasses::Range before = columns.MembersIn(residue, 0, row);
      const ResidueClasses::Range after = columns.MembersIn(residue, row + 1, length);
      builder.AddSpan(columns_at + before.begin, columns_at + before.end);
      builder.AddSpan(columns_at + after.begin, columns_at + after.end);
      builder.EndBlock();
    }
  }
  for (int32_t head = strided_heads; head < heads; ++head) {
    for (int32_t block = 0; block < blocks; ++block) {
      // Query blocks are rows or stride blocks: either way, one stride block.
      const int64_t stride_block = query_block_starts[block] / stride;
      builder.AddSpan(stride_block * stride,
                      std::min<int64_t>(length, (stride_block + 1) * stride));
      builder.AddSpan(summaries_at, summaries_at + stride_block * summary);
      builder.AddSpan(summaries_at + std::min(summary_count, (stride_block + 1) * summary),
                      summaries_at + summary_count);
      builder.EndBlock();
    }
  }
  return builder.Finish();
}

}  // namespace docsparse
