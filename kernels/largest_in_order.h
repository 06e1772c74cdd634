// The largest few of a list of keys, in ascending order: LSG's norm sparsity
// keeps, per head and chunk of tokens, the tokens of largest key norm.
#ifndef DOCSPARSE_KERNELS_LARGEST_IN_ORDER_H_
#define DOCSPARSE_KERNELS_LARGEST_IN_ORDER_H_

#include <cstdint>

namespace docsparse {

// kept[i] for i < keep: the position of the (count − keep + i)-th smallest
// of keys[0, count), keys ordered by value and equal keys by position: the
// `keep` largest in ascending order, as sorting (key, position) pairs
// leaves them. 0 <= keep <= count.
//
// On AVX-512 each key's rank is counted against all the others 16 at a time
// and the key written straight to its place: for LSG's 128-token chunks no
// sort at all. Up to 512 keys; longer lists are sorted.
void LargestInOrder(const uint32_t* keys, int32_t count, int32_t keep, int32_t* kept);

// The same by nth_element and sort, on any CPU.
void LargestInOrderPortable(const uint32_t* keys, int32_t count, int32_t keep, int32_t* kept);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_LARGEST_IN_ORDER_H_
