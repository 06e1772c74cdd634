// Row-major rows of `groups` equal groups, rewritten group by group: the
// encoder's q, k and v projection comes out as [token][q|k|v][head][head_dim]
// and attention reads it head by head, so it is stored as
// [q|k|v][head][token][head_dim], each head's rows back to back. Read in the
// projection's own layout, a head's rows lay one per 2,304 bytes (bf16,
// 384-wide model): the AMX executor's packing and LSG's key selection then
// waited on memory, and a 16k-token LSG layer's attention took 29-30 ms
// against 24-26 ms on rows stored so (docs/BENCHMARKS.md).
#ifndef DOCSPARSE_KERNELS_GROUP_MAJOR_ROWS_H_
#define DOCSPARSE_KERNELS_GROUP_MAJOR_ROWS_H_

#include <cstdint>

namespace docsparse {

// Where the rows go, and how.
struct GroupMajorRows {
  uint8_t* dst;         // [groups][total_rows][group_bytes]
  int64_t total_rows;   // rows of each group in dst
  int64_t groups;       // groups per row
  int64_t group_bytes;  // bytes per group
  // Non-temporal stores, which do not read dst's lines before overwriting
  // them and leave them out of the caches: for outputs far larger than the
  // caches that are read much later.
  bool streamed = false;
};

// Copies rows [first, first + count) of the row-major source (`rows`,
// groups·group_bytes bytes per row) into `out`: source row r's group g to
// out.dst + ((g·total_rows) + first + r)·group_bytes. Runs on the calling
// thread's OpenMP team (rows shared out, each row's groups in turn: group by
// group, reading the source 2,304 bytes apart, the copy took ~2 ms more of a
// 16k-token layer), or on the calling thread alone inside a parallel region.
void CopyRowsGroupMajor(const uint8_t* rows, int64_t first, int64_t count,
                        const GroupMajorRows& out);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_GROUP_MAJOR_ROWS_H_
