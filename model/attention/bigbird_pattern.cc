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

// The random blocks' candidates for one query block: the non-global blocks
// [g, num_blocks) less the window, i.e. [g, cut_begin) ∪ [cut_end, num_blocks).
// Indexed in order, so a sorted set of indices maps to sorted blocks.
struct Candidates {
  int64_t global;
  int64_t cut_begin;
  int64_t cut_end;
  int64_t num_blocks;

  int64_t size() const { return (cut_begin - global) + (num_blocks - cut_end); }
  int32_t Block(int64_t index) const {
    const int64_t below_window = cut_begin - global;
    return static_cast<int32_t>(index < below_window ? global + index
                                                     : cut_end + (index - below_window));
  }
};

Candidates CandidatesOf(const BigBirdKnobs& knobs, int32_t num_blocks, int32_t query_block) {
  const int64_t global = std::min(knobs.global_blocks, num_blocks);
  const int64_t side = (knobs.window_blocks - 1) / 2;
  // The window clipped to the non-global blocks; when it lies wholly among
  // the global ones, the cut is empty (begin = end = g).
  const int64_t cut_begin = std::clamp<int64_t>(query_block - side, global, num_blocks);
  const int64_t cut_end = std::clamp<int64_t>(query_block + side + 1, cut_begin, num_blocks);
  return {global, cut_begin, cut_end, num_blocks};
}

}  // namespace

std::vector<int32_t> BigBirdRandomBlocks(const BigBirdKnobs& knobs, int32_t num_blocks,
                                         uint64_t seed, int32_t layer, int32_t head,
                                         int32_t query_block) {
  assert(knobs.window_blocks >= 1 && knobs.window_blocks % 2 == 1);
  assert(knobs.global_blocks >= 0 && knobs.random_blocks >= 0);
  assert(query_block >= 0 && query_block < num_blocks);
  const Candidates candidates = CandidatesOf(knobs, num_blocks, query_block);
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
  assert(knobs.global_blocks >= 0 && knobs.random_blocks >= 0);
  assert(length >= 0 && heads >= 1);
  const int64_t block_size = knobs.block_size;
  const int32_t num_blocks = static_cast<int32_t>((length + block_size - 1) / block_size);
  const int32_t global = std::min(knobs.global_blocks, num_blocks);

  PatternPlanBuilder builder(length, heads, UniformQueryBlocks(length, knobs.block_size), {});
  // Key blocks [first, end) as the tokens they hold.
  auto add_blocks = [&](int64_t first, int64_t end) {
    builder.AddSpan(first * block_size, std::min<int64_t>(length, end * block_size));
  };
  for (int32_t head = 0; head < heads; ++head) {
    for (int32_t query_block = 0; query_block < num_blocks; ++query_block) {
      if (query_block < global) {
        add_blocks(0, num_blocks);
        builder.EndBlock();
        continue;
      }
      // In ascending order: the global blocks, the random blocks below the
      // window, the window (less what the global blocks took), the random
      // blocks above it. Random blocks are never global nor in the window.
      const Candidates candidates = CandidatesOf(knobs, num_blocks, query_block);
      const std::vector<int32_t> random =
          BigBirdRandomBlocks(knobs, num_blocks, seed, layer, head, query_block);
      add_blocks(0, global);
      auto next = random.begin();
      for (; next != random.end() && *next < candidates.cut_begin; ++next) {
        add_blocks(*next, *next + 1);
      }
      add_blocks(candidates.cut_begin, candidates.cut_end);
      for (; next != random.end(); ++next) add_blocks(*next, *next + 1);
      builder.EndBlock();
    }
  }
  return builder.Finish();
}

}  // namespace docsparse
