#include "model/attention/bigbird_pattern.h"

#include <algorithm>
#include <cassert>

#include "kernels/sbm_sampling.h"

namespace docsparse {
namespace {

// Uniform in [0, n), n >= 1, without modulo bias: draws below 2^64 mod n
// are rejected, leaving a multiple of n equally likely values.
uint64_t UniformBelow(CounterRng& rng, uint64_t n) {
  const uint64_t rejected = (0 - n) % n;
  for (;;) {
    const uint64_t x = rng.Next();
    if (x >= rejected) return x % n;
  }
}

// The global blocks: [0, first_end) and, with last_block_global, the last one.
// The blocks between are the non-global ones, [first_end, non_global_end).
struct GlobalBlocks {
  int32_t first_end;
  int32_t non_global_end;

  bool Contains(int32_t block) const { return block < first_end || block >= non_global_end; }
};

GlobalBlocks GlobalBlocksOf(const BigBirdKnobs& knobs, int32_t num_blocks) {
  const int32_t first_end = std::min(knobs.global_blocks, num_blocks);
  const int32_t last = knobs.last_block_global && num_blocks > first_end ? 1 : 0;
  return {first_end, num_blocks - last};
}

// The random blocks' candidates for one query block: the non-global blocks
// [g, e) less the window, i.e. [g, cut_begin) ∪ [cut_end, e).
// Indexed in order, so a sorted set of indices maps to sorted blocks.
struct Candidates {
  int64_t global;
  int64_t cut_begin;
  int64_t cut_end;
  int64_t non_global_end;

  int64_t size() const { return (cut_begin - global) + (non_global_end - cut_end); }
  int32_t Block(int64_t index) const {
    const int64_t below_window = cut_begin - global;
    return static_cast<int32_t>(index < below_window ? global + index
                                                     : cut_end + (index - below_window));
  }
};

Candidates CandidatesOf(const BigBirdKnobs& knobs, const GlobalBlocks& globals,
                        int32_t query_block) {
  const int64_t global = globals.first_end;
  const int64_t end = globals.non_global_end;
  const int64_t side = (knobs.window_blocks - 1) / 2;
  // The window clipped to the non-global blocks; when it lies wholly among
  // the global ones, the cut is empty (begin = end).
  const int64_t cut_begin = std::clamp<int64_t>(query_block - side, global, end);
  const int64_t cut_end = std::clamp<int64_t>(query_block + side + 1, cut_begin, end);
  return {global, cut_begin, cut_end, end};
}

}  // namespace

std::vector<int32_t> BigBirdRandomBlocks(const BigBirdKnobs& knobs, int32_t num_blocks,
                                         uint64_t seed, int32_t layer, int32_t head,
                                         int32_t query_block) {
  assert(knobs.window_blocks >= 1 && knobs.window_blocks % 2 == 1);
  assert(knobs.global_blocks >= 0 && knobs.random_blocks >= 0);
  assert(query_block >= 0 && query_block < num_blocks);
  const Candidates candidates = CandidatesOf(knobs, GlobalBlocksOf(knobs, num_blocks), query_block);
  const int64_t n = candidates.size();
  const int64_t count = std::min<int64_t>(knobs.random_blocks, n);

  // The labels go in as 32-bit patterns, so negative values are fine too.
  uint64_t key = DeriveKey(seed, static_cast<uint32_t>(layer));
  key = DeriveKey(key, static_cast<uint32_t>(head));
  key = DeriveKey(key, static_cast<uint32_t>(query_block));
  CounterRng rng(key);

  // Floyd's algorithm: a uniform count-subset of [0, n) in count draws,
  // whatever n is (no O(n) shuffle). `picked` stays sorted.
  std::vector<int64_t> picked;
  picked.reserve(count);
  for (int64_t top = n - count; top < n; ++top) {
    int64_t index = static_cast<int64_t>(UniformBelow(rng, static_cast<uint64_t>(top) + 1));
    auto at = std::lower_bound(picked.begin(), picked.end(), index);
    if (at != picked.end() && *at == index) {
      // `top` is new: every earlier pick is below it.
      index = top;
      at = picked.end();
    }
    picked.insert(at, index);
  }

  std::vector<int32_t> blocks;
  blocks.reserve(count);
  for (int64_t index : picked) blocks.push_back(candidates.Block(index));
  return blocks;
}

PatternPlan PlanBigBird(const BigBirdKnobs& knobs, int32_t length, int32_t heads, uint64_t seed,
                        int32_t layer) {
  assert(knobs.block_size >= 1);
  assert(knobs.window_blocks >= 1 && knobs.window_blocks % 2 == 1);
  assert(knobs.global_blocks >= 0 && knobs.random_blocks >= 0 && knobs.dense_up_to >= 0);
  assert(length >= 0 && heads >= 1);
  const int64_t block_size = knobs.block_size;
  const int32_t num_blocks = static_cast<int32_t>((length + block_size - 1) / block_size);
  // Short enough for full attention: every block is global.
  const GlobalBlocks globals = length <= knobs.dense_up_to ? GlobalBlocks{num_blocks, num_blocks}
                                                           : GlobalBlocksOf(knobs, num_blocks);

  // random_at_first_block: r copies of block 0, after the tokens.
  std::vector<int32_t> first_block_copies;
  if (knobs.random_at_first_block && globals.first_end < globals.non_global_end) {
    const int32_t first_block = static_cast<int32_t>(std::min<int64_t>(block_size, length));
    for (int32_t copy = 0; copy < knobs.random_blocks; ++copy) {
      for (int32_t token = 0; token < first_block; ++token) first_block_copies.push_back(token);
    }
  }
  const int64_t copies = static_cast<int64_t>(first_block_copies.size());

  PatternPlanBuilder builder(length, heads, UniformQueryBlocks(length, knobs.block_size),
                             std::move(first_block_copies));
  // Key blocks [first, end) as the tokens they hold.
  auto add_blocks = [&](int64_t first, int64_t end) {
    if (first >= end) return;
    builder.AddSpan(first * block_size, std::min<int64_t>(length, end * block_size));
  };
  for (int32_t head = 0; head < heads; ++head) {
    for (int32_t query_block = 0; query_block < num_blocks; ++query_block) {
      if (globals.Contains(query_block)) {
        add_blocks(0, num_blocks);
        builder.EndBlock();
        continue;
      }
      // In ascending order: the first global blocks, the random blocks below
      // the window, the window (less what the global blocks took), the
      // random blocks above it, the last global block, the copies. Random
      // blocks are never global nor in the window.
      const Candidates candidates = CandidatesOf(knobs, globals, query_block);
      const std::vector<int32_t> random =
          knobs.random_at_first_block
              ? std::vector<int32_t>{}
              : BigBirdRandomBlocks(knobs, num_blocks, seed, layer, head, query_block);
      add_blocks(0, globals.first_end);
      auto next = random.begin();
      for (; next != random.end() && *next < candidates.cut_begin; ++next) {
        add_blocks(*next, *next + 1);
      }
      add_blocks(candidates.cut_begin, candidates.cut_end);
      for (; next != random.end(); ++next) add_blocks(*next, *next + 1);
      add_blocks(globals.non_global_end, num_blocks);
      builder.AddSpan(length, length + copies);
      builder.EndBlock();
    }
  }
  return builder.Finish();
}

}  // namespace docsparse
