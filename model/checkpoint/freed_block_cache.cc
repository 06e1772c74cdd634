#include "model/checkpoint/freed_block_cache.h"

#include <algorithm>

namespace docsparse {

std::optional<FreedBlockCache::Block> FreedBlockCache::Take(size_t bytes) {
  const auto fit = by_size_.lower_bound(bytes);
  if (fit == by_size_.end() || fit->first / 2 > bytes) return std::nullopt;
  const Block block{fit->second.data, fit->first};
  kept_bytes_ -= fit->first;
  by_size_.erase(fit);
  return block;
}

std::vector<FreedBlockCache::Block> FreedBlockCache::Keep(Block block) {
  std::vector<Block> dropped;
  if (block.bytes > capacity_bytes_) {
    dropped.push_back(block);
    return dropped;
  }
  // A few dozen blocks at most: a linear search for the oldest is enough.
  while (kept_bytes_ + block.bytes > capacity_bytes_) {
    const auto oldest =
        std::min_element(by_size_.begin(), by_size_.end(),
                         [](const auto& a, const auto& b) { return a.second.age < b.second.age; });
    dropped.push_back({oldest->second.data, oldest->first});
    kept_bytes_ -= oldest->first;
    by_size_.erase(oldest);
  }
  by_size_.emplace(block.bytes, Kept{block.data, clock_++});
  kept_bytes_ += block.bytes;
  return dropped;
}

}  // namespace docsparse
