// kernels/group_major_rows: rows of groups rewritten group by group, against
// the index arithmetic written out here, with plain and non-temporal stores,
// groups of sizes that are and are not multiples of 16 bytes, destinations
// aligned and not.
#include "kernels/group_major_rows.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

namespace docsparse {
namespace {

TEST(GroupMajorRowsTest, EveryGroupLandsInItsRowOfItsGroup) {
  for (const bool streamed : {false, true}) {
    for (const int64_t group_bytes : {int64_t{64}, int64_t{6}, int64_t{40}}) {
      for (const int64_t offset : {int64_t{0}, int64_t{3}}) {
        constexpr int64_t kGroups = 5, kTotalRows = 23;
        const int64_t row_bytes = kGroups * group_bytes;
        std::vector<uint8_t> source(kTotalRows * row_bytes);
        std::iota(source.begin(), source.end(), uint8_t{1});
        std::vector<uint8_t> dst(kGroups * kTotalRows * group_bytes + offset + 1, 0);
        const GroupMajorRows out{dst.data() + offset, kTotalRows, kGroups, group_bytes, streamed};
        // Two pieces, as PackedLinear::RunStaged hands them over.
        CopyRowsGroupMajor(source.data(), 0, 16, out);
        CopyRowsGroupMajor(source.data() + 16 * row_bytes, 16, kTotalRows - 16, out);
        for (int64_t g = 0; g < kGroups; ++g) {
          for (int64_t r = 0; r < kTotalRows; ++r) {
            for (int64_t b = 0; b < group_bytes; ++b) {
              ASSERT_EQ(dst[offset + (g * kTotalRows + r) * group_bytes + b],
                        source[r * row_bytes + g * group_bytes + b])
                  << "group " << g << " row " << r << " byte " << b << " streamed " << streamed
                  << " group_bytes " << group_bytes << " offset " << offset;
            }
          }
        }
        for (int64_t b = 0; b < offset; ++b) EXPECT_EQ(dst[b], 0);
        EXPECT_EQ(dst.back(), 0);
      }
    }
  }
}

}  // namespace
}  // namespace docsparse
