// Rounding a size or an offset up to a multiple: blocks of whole huge pages,
// arrays packed into one upload buffer at their alignment.
#ifndef DOCSPARSE_COMMON_ALIGN_UP_H_
#define DOCSPARSE_COMMON_ALIGN_UP_H_

#include <cstdint>

namespace docsparse {

// The smallest multiple of `to` (> 0) at or above `value` (>= 0).
constexpr int64_t AlignUp(int64_t value, int64_t to) { return (value + to - 1) / to * to; }

}  // namespace docsparse

#endif  // DOCSPARSE_COMMON_ALIGN_UP_H_
