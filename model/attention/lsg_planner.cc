#include "model/attention/lsg_planner.h"

#include <algorithm>

namespace docsparse {
namespace {

constexpr int32_t kFullAttentionRows = 64;

// Appends [begin, end) of the extended keys, if not empty.
void AddSpan(int32_t begin, int32_t end, std::vector<KeySpan>& spans) {
  if (end > begin) spans.push_back({begin, end - begin});
}

// Tokens [begin, end) clipped to the real tokens, minus a masked first token.
void AddTokens(const LsgLayout& layout, int32_t begin, int32_t end, std::vector<KeySpan>& spans) {
  begin = std::max(begin, layout.first_token_masked ? 1 : 0);
  end = std::min(end, layout.tokens);
  if (end > begin) AddSpan(layout.TokenKey(begin), layout.TokenKey(end), spans);
}

// Derived keys [begin, end) clipped to the derived sequence, split around
// the keys `valid` rules out.
void AddDerived(const LsgLayout& layout, const uint8_t* valid, int32_t begin, int32_t end,
                std::vector<KeySpan>& spans) {
  begin = std::max(begin, 0);
  end = std::min(end, layout.derived_keys);
  int32_t run = begin;
  for (int32_t s = begin; s <= end; ++s) {
    if (s == end || !valid[s]) {
      if (s > run) AddSpan(layout.DerivedKey(run), layout.DerivedKey(s), spans);
      run = s + 1;
    }
  }
}

int64_t SpanKeys(const KeySpan* begin, const KeySpan* end) {
  int64_t keys = 0;
  for (const KeySpan* span = begin; span != end; ++span) keys += span->length;
  return keys;
}

}  // namespace

LsgLayout LayoutLsgSequence(const LsgConfig& config, int32_t global, int32_t tokens) {
  LsgLayout layout;
  layout.global = global;
  layout.tokens = tokens;
  layout.first_token_masked = config.mask_first_token;
  layout.full = tokens <= 2 * config.block_size;
  if (layout.full) {
    layout.padded_tokens = tokens;
    return layout;
  }
  layout.padded_tokens = (tokens + config.block_size - 1) / config.block_size * config.block_size;
  if (config.HasSparseKeys()) layout.derived_keys = layout.padded_tokens / config.sparsity_factor;
  return layout;
}

LsgPlan PlanLsgSequence(const LsgConfig& config, const LsgLayout& layout, int heads,
                        const std::vector<uint8_t>& derived_valid, bool padding_rows) {
  LsgPlan plan;
  const int32_t real_rows = layout.global + layout.tokens;
  plan.query_block_starts.push_back(0);
  if (layout.full) {
    for (int32_t row = kFullAttentionRows; row < real_rows; row += kFullAttentionRows) {
      plan.query_block_starts.push_back(row);
    }
    plan.query_block_starts.push_back(real_rows);
  } else {
    const int32_t row_end = layout.global + (padding_rows ? layout.padded_tokens : layout.tokens);
    for (int32_t j = 0; j < layout.num_token_blocks(config.block_size); ++j) {
      plan.query_block_starts.push_back(std::min(row_end, layout.global + j * config.block_size));
    }
    plan.query_block_starts.push_back(row_end);
  }
  const int32_t blocks = static_cast<int32_t>(plan.query_block_starts.size()) - 1;

  const int32_t step = config.HasSparseKeys() ? config.SparseStep() : 0;
  const int32_t sparse = config.sparse_block_size;
  plan.span_offsets.push_back(0);
  plan.head_edges.assign(heads, 0);
  for (int h = 0; h < heads; ++h) {
    const uint8_t* valid = layout.derived_keys > 0
                               ? derived_valid.data() + static_cast<size_t>(h) * layout.derived_keys
                               : nullptr;
    for (int32_t block = 0; block < blocks; ++block) {
      const size_t first_span = plan.spans.size();
      if (layout.full || block == 0) {
        // Full attention, or the global queries: every global token and
        // every real token.
        AddSpan(0, layout.global, plan.spans);
        AddTokens(layout, 0, layout.tokens, plan.spans);
      } else {
        const int32_t j = block - 1;
        AddSpan(0, layout.global, plan.spans);
        if (layout.derived_keys > 0) {
          AddDerived(layout, valid, (j - 1) * step - sparse, (j - 1) * step, plan.spans);
          const int32_t right = step == 1 ? j : (j + 2) * step;
          AddDerived(layout, valid, right, right + sparse, plan.spans);
        }
        AddTokens(layout, (j - 1) * config.block_size, (j + 2) * config.block_size, plan.spans);
      }
      plan.span_offsets.push_back(static_cast<int32_t>(plan.spans.size()));
      const int32_t rows = std::min(plan.query_block_starts[block + 1], real_rows) -
                           std::min(plan.query_block_starts[block], real_rows);
      plan.head_edges[h] +=
          rows * SpanKeys(plan.spans.data() + first_span, plan.spans.data() + plan.spans.size());
    }
  }
  return plan;
}

}  // namespace docsparse
