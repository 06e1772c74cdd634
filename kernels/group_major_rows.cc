#include "kernels/group_major_rows.h"

#include <emmintrin.h>
#include <omp.h>

#include <cstring>

namespace docsparse {
namespace {

// `bytes` from `from` to `to` by 16-byte non-temporal stores (SSE2: every
// x86-64 CPU) where `to` is aligned for them, plain copies for the rest.
void StreamBytes(const uint8_t* from, uint8_t* to, int64_t bytes) {
  int64_t i = 0;
  const int64_t misaligned = static_cast<int64_t>(reinterpret_cast<uintptr_t>(to) % 16);
  if (misaligned != 0) {
    i = bytes < 16 - misaligned ? bytes : 16 - misaligned;
    std::memcpy(to, from, i);
  }
  for (; i + 16 <= bytes; i += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(to + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + i)));
  }
  if (i < bytes) std::memcpy(to + i, from + i, bytes - i);
}

}  // namespace

void CopyRowsGroupMajor(const uint8_t* rows, int64_t first, int64_t count,
                        const GroupMajorRows& out) {
  const int64_t row_bytes = out.groups * out.group_bytes;
  const int64_t group_stride = out.total_rows * out.group_bytes;
  // Row by row, each row's groups in turn: the source is read in order (the
  // prefetchers follow it), and every destination row is written whole.
#pragma omp parallel if (!omp_in_parallel())
  {
#pragma omp for schedule(static) nowait
    for (int64_t r = 0; r < count; ++r) {
      const uint8_t* in = rows + r * row_bytes;
      uint8_t* to = out.dst + (first + r) * out.group_bytes;
      for (int64_t g = 0; g < out.groups; ++g, in += out.group_bytes, to += group_stride) {
        if (out.streamed) {
          StreamBytes(in, to, out.group_bytes);
        } else {
          std::memcpy(to, in, out.group_bytes);
        }
      }
    }
    // Non-temporal stores are weakly ordered: each thread fences its own
    // before the region ends, so that whoever reads dst next (perhaps another
    // thread) sees them.
    if (out.streamed) _mm_sfence();
  }
}

}  // namespace docsparse
