// AssembleKeySegments against rows written out by hand: each segment's rows
// where its keys lie, in interleaved and contiguous layouts, and zeros in the
// gaps between segments and after the last (the buffer is not zeroed before
// it is written: every element must be written).
#include "kernels/key_segments.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "kernels/aligned_vector.h"

namespace docsparse {
namespace {

// Key `key` of (item, head) `bh`, element `e`: a value that names all three.
uint16_t Expected(int64_t bh, int32_t key, int32_t e) {
  return static_cast<uint16_t>(1 + (bh * 1000 + key * 10 + e) % 60000);
}

TEST(KeySegmentsTest, AssembledRowsAreTheSegmentsWithZerosBetweenAndAfter) {
  const int32_t batch = 2, heads = 3, d = 16, k_len = 90;
  struct Range {
    int32_t begin, count;
    bool interleaved;  // [batch, count, heads, d] rows, else [batch, heads, count, d]
  };
  const Range ranges[] = {{0, 1, false}, {5, 40, true}, {48, 30, false}};  // gaps, a tail
  std::vector<std::vector<uint16_t>> keys, values;
  std::vector<KeySegment> segments;
  for (const Range& r : ranges) {
    std::vector<uint16_t> k(static_cast<size_t>(batch) * heads * r.count * d);
    std::vector<uint16_t> v(k.size());
    const RowLayout layout = r.interleaved
                                 ? RowLayout{int64_t{r.count} * heads * d, d, int64_t{heads} * d}
                                 : RowLayout{int64_t{heads} * r.count * d, int64_t{r.count} * d, d};
    for (int64_t bh = 0; bh < batch * heads; ++bh) {
      for (int32_t row = 0; row < r.count; ++row) {
        for (int32_t e = 0; e < d; ++e) {
          const int64_t at = layout.Start(bh, heads) + row * layout.row_stride + e;
          k[at] = Expected(bh, r.begin + row, e);
          v[at] = static_cast<uint16_t>(Expected(bh, r.begin + row, e) ^ 0x5555);
        }
      }
    }
    keys.push_back(std::move(k));
    values.push_back(std::move(v));
    segments.push_back({r.begin, r.count, keys.back().data(), values.back().data(),
                        r.interleaved ? layout : RowLayout{},
                        r.interleaved ? layout : RowLayout{}});
  }
  Bf16AttentionParams p{nullptr, nullptr, nullptr, nullptr, batch, heads, 7, k_len, d, 0.25f};
  p.key_segments = segments.data();
  p.num_key_segments = static_cast<int32_t>(segments.size());

  const size_t size = static_cast<size_t>(batch) * heads * k_len * d;
  for (int repeat = 0; repeat < 2; ++repeat) {
    {  // heap memory left dirty, which the assembly's buffers then likely reuse
      CacheLineVector<uint16_t> dirty_k(size, 0xFFFF), dirty_v(size, 0xFFFF);
    }
    const AssembledKeys assembled = AssembleKeySegments(p);
    ASSERT_EQ(assembled.k.size(), size);
    EXPECT_EQ(assembled.params.k, assembled.k.data());
    EXPECT_EQ(assembled.params.num_key_segments, 0);
    for (int64_t bh = 0; bh < batch * heads; ++bh) {
      for (int32_t key = 0; key < k_len; ++key) {
        bool inside = false;
        for (const Range& r : ranges) inside |= key >= r.begin && key < r.begin + r.count;
        for (int32_t e = 0; e < d; ++e) {
          const size_t at = (static_cast<size_t>(bh) * k_len + key) * d + e;
          const uint16_t want = inside ? Expected(bh, key, e) : 0;
          ASSERT_EQ(assembled.k[at], want) << "item·head " << bh << " key " << key << " e " << e;
          ASSERT_EQ(assembled.v[at], inside ? static_cast<uint16_t>(want ^ 0x5555) : 0)
              << "item·head " << bh << " key " << key << " e " << e;
        }
      }
    }
  }
}

}  // namespace
}  // namespace docsparse
