// Large freed memory blocks kept for the next allocation of about their size,
// as PyTorch's CUDA caching allocator keeps device memory. The CPU allocator
// (huge_page_allocator.h) returns a tensor's block here instead of to glibc,
// which unmaps blocks above its mmap threshold (32 MiB, common/cpu_runtime.h):
// the next forward's tensor of that shape faulted its pages in again, each
// huge page zeroed by the kernel. A 4,096-token minilm-lsg forward took ~90
// such faults (180 MB zeroed, ~20 ms of ~500 on the AVX2 machine; more of the
// whole where the products are faster): docs/BENCHMARKS.md "SBM's edge
// executor and freed blocks kept".
//
// Best fit within 2x (a 3 MiB request never takes a 100 MiB block), the
// oldest blocks dropped first once more than the capacity is kept. Not
// thread-safe: its owner locks.
#ifndef DOCSPARSE_MODEL_CHECKPOINT_FREED_BLOCK_CACHE_H_
#define DOCSPARSE_MODEL_CHECKPOINT_FREED_BLOCK_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace docsparse {

class FreedBlockCache {
 public:
  struct Block {
    void* data;
    size_t bytes;  // its capacity
  };

  explicit FreedBlockCache(size_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  // The smallest kept block of at least `bytes` and at most twice that,
  // taken out of the cache; none if there is no such block.
  std::optional<Block> Take(size_t bytes);

  // Keeps `block` for a later Take. Returns the blocks the caller must free:
  // the oldest kept ones while more than the capacity would be kept, or
  // `block` itself when it alone is larger than the capacity.
  std::vector<Block> Keep(Block block);

  size_t kept_bytes() const { return kept_bytes_; }
  size_t kept_blocks() const { return by_size_.size(); }

 private:
  struct Kept {
    void* data;
    uint64_t age;  // when it was kept: smaller is older
  };

  const size_t capacity_bytes_;
  size_t kept_bytes_ = 0;
  uint64_t clock_ = 0;
  std::multimap<size_t, Kept> by_size_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_CHECKPOINT_FREED_BLOCK_CACHE_H_
