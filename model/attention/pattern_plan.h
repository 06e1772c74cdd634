// The plan a position-based pattern planner (Longformer, BigBird, Sparse
// Transformer, Star) makes for one sequence: query blocks and, per head and
// block, key spans, as the block-sparse executors take them
// (kernels/block_sparse_plan.h). No LibTorch: the planners are plain
// functions of the knobs, the length and the seed, tested against dense
// masks built from the papers' definitions.
//
// Keys live in an extended sequence: positions [0, length) are the tokens;
// positions length + p, for p in [0, key_gather.size()), are copies of
// token key_gather[p]. A pattern whose keys are not contiguous (Longformer's
// dilated window) lists the tokens grouped by residue there, so each of its
// rows is again a span. Every (query, token) pair appears at most once over
// a row's spans, counting copies, except where a pattern repeats keys on
// purpose: transformers' BigBird attends block 0 1 + r times
// (bigbird_pattern.h), each copy a key of the softmax.
#ifndef DOCSPARSE_MODEL_ATTENTION_PATTERN_PLAN_H_
#define DOCSPARSE_MODEL_ATTENTION_PATTERN_PLAN_H_

#include <cstdint>
#include <vector>

#include "kernels/block_sparse_plan.h"

namespace docsparse {

struct PatternPlan {
  int32_t length = 0;  // real tokens of the sequence
  int32_t heads = 0;
  // [blocks + 1], from 0 to length, increasing: block i is queries
  // [query_block_starts[i], query_block_starts[i + 1]). Shared by all heads.
  std::vector<int32_t> query_block_starts;
  // Head h, block i has spans [span_offsets[h * blocks + i],
  // span_offsets[h * blocks + i + 1]); [heads * blocks + 1].
  std::vector<int32_t> span_offsets;
  std::vector<KeySpan> spans;
  // Per span, how it slides (kernels/block_sparse_plan.h: a band moving
  // with the query), or empty when no span slides.
  std::vector<KeySlide> slides;
  // Tokens copied after the sequence, see above; empty for most patterns.
  std::vector<int32_t> key_gather;
  // Computed (query, key) pairs per head: Σ over blocks of block rows × span
  // lengths.
  std::vector<int64_t> head_edges;
  // Queries [0, global_rows) attend every token (Longformer's global
  // tokens): a model with projections of their own for them
  // (AttentionInputs::global_projections) computes these rows from those.
  int32_t global_rows = 0;

  int32_t num_query_blocks() const { return static_cast<int32_t>(query_block_starts.size()) - 1; }
  int32_t extended_keys() const { return length + static_cast<int32_t>(key_gather.size()); }
};

// {0, size, 2·size, ..., length}: blocks of `size` >= 1 queries, the last
// one possibly partial; {0} (no block) when length is 0.
std::vector<int32_t> UniformQueryBlocks(int32_t length, int32_t size);

// Builds a PatternPlan cell by cell in span_offsets' order: head by head and,
// within a head, query block by query block. It keeps the counts
// (span_offsets, head_edges) so that a planner only says which keys each
// cell attends to, and it drops empty spans and merges a span into the
// cell's previous one when they touch, so planners emit their pieces
// (global part, window, gathered part) without special cases.
class PatternPlanBuilder {
 public:
  // `query_block_starts` and `key_gather` as in PatternPlan.
  PatternPlanBuilder(int32_t length, int32_t heads, std::vector<int32_t> query_block_starts,
                     std::vector<int32_t> key_gather);

  // Adds the extended keys [begin, end) to the current cell. Within a cell,
  // spans come in ascending order: begin is not before the previous span's
  // end. An empty range (begin == end) adds nothing.
  void AddSpan(int64_t begin, int64_t end);
  // Adds a sliding span: query q of the cell's block attends the keys of
  // [begin, end) within [q + offset, q + offset + width). Never merged.
  void AddSlidingSpan(int64_t begin, int64_t end, int32_t offset, int32_t width);
  // Closes the current cell; the next AddSpan goes to the next block, or to
  // the next head's first block.
  void EndBlock();
  // The plan, once every one of heads × blocks cells is closed.
  PatternPlan Finish();
  int32_t num_query_blocks() const { return plan_.num_query_blocks(); }

 private:
  PatternPlan plan_;
  int64_t cells_closed_ = 0;
};

// The same plan with one query per block and every span fixed (sliding
// spans made concrete row by row): for executors without sliding spans.
PatternPlan ExpandSlides(const PatternPlan& plan);

// The tokens [first, end) grouped by residue mod `modulus` (residue 0 first,
// ascending within a residue class), as a key_gather section: a set of keys
// in arithmetic progression (a dilated window, a strided column) is then one
// span of the section. Positions are closed forms, so no table of `modulus`
// entries is kept.
class ResidueClasses {
 public:
  // Requires 0 <= first, end >= first (an empty range is fine), modulus >= 1.
  ResidueClasses(int32_t first, int32_t end, int32_t modulus);

  // Indices [begin, end) into the section.
  struct Range {
    int32_t begin;
    int32_t end;
  };

  // The section: every token of [first, end), in the order above.
  std::vector<int32_t> Tokens() const;
  // The members of residue class `residue` (in [0, modulus)) that lie in
  // [lo, hi) (clamped to [first, end)): consecutive in the section.
  Range MembersIn(int32_t residue, int64_t lo, int64_t hi) const;

 private:
  // Tokens of [0, x) whose residue is below r.
  int64_t CountBelowResidue(int64_t x, int64_t r) const;
  // Tokens of [0, x) whose residue is r.
  int64_t CountOfResidue(int64_t x, int64_t r) const;

  int64_t first_;
  int64_t end_;
  int64_t modulus_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_PATTERN_PLAN_H_
