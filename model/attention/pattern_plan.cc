#include "model/attention/pattern_plan.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace docsparse {

std::vector<int32_t> UniformQueryBlocks(int32_t length, int32_t size) {
  assert(length >= 0 && size >= 1);
  std::vector<int32_t> starts;
  for (int64_t start = 0; start < length; start += size) {
    starts.push_back(static_cast<int32_t>(start));
  }
  starts.push_back(length);
  return starts;
}

PatternPlanBuilder::PatternPlanBuilder(int32_t length, int32_t heads,
                                       std::vector<int32_t> query_block_starts,
                                       std::vector<int32_t> key_gather) {
  assert(length >= 0 && heads >= 0);
  assert(!query_block_starts.empty() && query_block_starts.front() == 0 &&
         query_block_starts.back() == length);
  plan_.length = length;
  plan_.heads = heads;
  plan_.query_block_starts = std::move(query_block_starts);
  plan_.key_gather = std::move(key_gather);
  plan_.span_offsets.reserve(static_cast<size_t>(heads) * plan_.num_query_blocks() + 1);
  plan_.span_offsets.push_back(0);
  plan_.head_edges.assign(heads, 0);
}

void PatternPlanBuilder::AddSpan(int64_t begin, int64_t end) {
  const int32_t blocks = plan_.num_query_blocks();
  assert(cells_closed_ < int64_t{plan_.heads} * blocks);
  assert(0 <= begin && begin <= end && end <= plan_.extended_keys());
  if (begin == end) return;
  const int32_t head = static_cast<int32_t>(cells_closed_ / blocks);
  const int32_t block = static_cast<int32_t>(cells_closed_ % blocks);
  const int32_t rows = plan_.query_block_starts[block + 1] - plan_.query_block_starts[block];
  plan_.head_edges[head] += rows * (end - begin);

  const bool cell_has_spans = static_cast<int32_t>(plan_.spans.size()) > plan_.span_offsets.back();
  const bool previous_slides = !plan_.slides.empty() && plan_.slides.back().width != 0;
  if (cell_has_spans) {
    KeySpan& previous = plan_.spans.back();
    const int64_t previous_end = int64_t{previous.begin} + previous.length;
    assert(begin >= previous_end);
    if (begin == previous_end && !previous_slides) {
      previous.length += static_cast<int32_t>(end - begin);
      return;
    }
  }
  plan_.spans.push_back({static_cast<int32_t>(begin), static_cast<int32_t>(end - begin)});
  if (!plan_.slides.empty()) plan_.slides.push_back({0, 0});
}

void PatternPlanBuilder::AddSlidingSpan(int64_t begin, int64_t end, int32_t offset, int32_t width) {
  const int32_t blocks = plan_.num_query_blocks();
  assert(cells_closed_ < int64_t{plan_.heads} * blocks);
  assert(0 <= begin && begin <= end && end <= plan_.extended_keys() && width > 0);
  const int32_t head = static_cast<int32_t>(cells_closed_ / blocks);
  const int32_t block = static_cast<int32_t>(cells_closed_ % blocks);
  const KeySpan span{static_cast<int32_t>(begin), static_cast<int32_t>(end - begin)};
  const KeySlide slide{offset, width};
  int64_t edges = 0;
  for (int32_t q = plan_.query_block_starts[block]; q < plan_.query_block_starts[block + 1]; ++q) {
    int32_t lo = 0, hi = 0;
    SlidingRowKeys(span, slide, q, &lo, &hi);
    edges += hi - lo;
  }
  if (edges == 0) return;
  plan_.head_edges[head] += edges;
  // The spans before it become fixed ones in the slides list.
  if (plan_.slides.empty()) plan_.slides.assign(plan_.spans.size(), KeySlide{0, 0});
  plan_.spans.push_back(span);
  plan_.slides.push_back(slide);
}

void PatternPlanBuilder::EndBlock() {
  assert(cells_closed_ < int64_t{plan_.heads} * plan_.num_query_blocks());
  plan_.span_offsets.push_back(static_cast<int32_t>(plan_.spans.size()));
  ++cells_closed_;
}

PatternPlan PatternPlanBuilder::Finish() {
  assert(cells_closed_ == int64_t{plan_.heads} * plan_.num_query_blocks());
  return std::move(plan_);
}

PatternPlan ExpandSlides(const PatternPlan& plan) {
  if (plan.slides.empty()) return plan;
  std::vector<int32_t> rows(static_cast<size_t>(plan.length) + 1);
  for (int32_t q = 0; q <= plan.length; ++q) rows[q] = q;
  PatternPlanBuilder builder(plan.length, plan.heads, std::move(rows), plan.key_gather);
  const int32_t blocks = plan.num_query_blocks();
  for (int32_t head = 0; head < plan.heads; ++head) {
    for (int32_t block = 0; block < blocks; ++block) {
      const int32_t cell = head * blocks + block;
      for (int32_t q = plan.query_block_starts[block]; q < plan.query_block_starts[block + 1];
           ++q) {
        for (int32_t s = plan.span_offsets[cell]; s < plan.span_offsets[cell + 1]; ++s) {
          int32_t lo = 0, hi = 0;
          SlidingRowKeys(plan.spans[s], plan.slides[s], q, &lo, &hi);
          builder.AddSpan(lo, hi);
        }
        builder.EndBlock();
      }
    }
  }
  PatternPlan expanded = builder.Finish();
  expanded.global_rows = plan.global_rows;
  return expanded;
}

ResidueClasses::ResidueClasses(int32_t first, int32_t end, int32_t modulus)
    : first_(first), end_(end), modulus_(modulus) {
  assert(first >= 0 && end >= first && modulus >= 1);
}

std::vector<int32_t> ResidueClasses::Tokens() const {
  std::vector<int32_t> tokens;
  tokens.reserve(static_cast<size_t>(end_ - first_));
  // Residues at or past end_ have no token below end_.
  for (int64_t residue = 0; residue < std::min(modulus_, end_); ++residue) {
    // The class's first token at or after first_.
    int64_t token = first_ + ((residue - first_) % modulus_ + modulus_) % modulus_;
    for (; token < end_; token += modulus_) tokens.push_back(static_cast<int32_t>(token));
  }
  return tokens;
}

ResidueClasses::Range ResidueClasses::MembersIn(int32_t residue, int64_t lo, int64_t hi) const {
  assert(residue >= 0 && residue < modulus_);
  lo = std::clamp(lo, first_, end_);
  hi = std::clamp(hi, lo, end_);
  // The section holds the classes below `residue` first, then this class's
  // tokens of [first_, end_) in order.
  const int64_t class_begin = CountBelowResidue(end_, residue) - CountBelowResidue(first_, residue);
  const int64_t before_first = CountOfResidue(first_, residue);
  return {static_cast<int32_t>(class_begin + CountOfResidue(lo, residue) - before_first),
          static_cast<int32_t>(class_begin + CountOfResidue(hi, residue) - before_first)};
}

int64_t ResidueClasses::CountBelowResidue(int64_t x, int64_t r) const {
  return x / modulus_ * r + std::min(x % modulus_, r);
}

int64_t ResidueClasses::CountOfResidue(int64_t x, int64_t r) const {
  return x / modulus_ + (x % modulus_ > r ? 1 : 0);
}

}  // namespace docsparse
