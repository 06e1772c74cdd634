#include "kernels/largest_in_order.h"

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cpu_features.h"

// GCC 12 warns inside its own AVX-512 headers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace docsparse {
namespace {

#define DOCSPARSE_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

constexpr int32_t kMostKeysCounted = 512;

// Each key's rank, 16 keys j at a time against every key i: i counts when
// smaller, or equal and before j. One comparison and one masked add per
// (i, 16 keys j).
DOCSPARSE_AVX512 void LargestInOrderAvx512(const uint32_t* keys, int32_t count, int32_t keep,
                                           int32_t* kept) {
  const int32_t dropped = count - keep;
  const __m512i one = _mm512_set1_epi32(1);
  for (int32_t b = 0; b < count; b += 16) {
    const __m512i block = _mm512_maskz_loadu_epi32(FirstLanes(count - b), keys + b);
    __m512i rank = _mm512_setzero_si512();
    const auto add_where = [&](__mmask16 counted) DOCSPARSE_AVX512 {
      rank = _mm512_mask_add_epi32(rank, counted, rank, one);
    };
    for (int32_t i = 0; i < b; ++i) {  // before every j of the block
      add_where(_mm512_cmple_epu32_mask(_mm512_set1_epi32(static_cast<int32_t>(keys[i])), block));
    }
    const int32_t block_end = std::min(count, b + 16);
    for (int32_t i = b; i < block_end; ++i) {  // before the lanes past i, after the others
      const __m512i key = _mm512_set1_epi32(static_cast<int32_t>(keys[i]));
      const __mmask16 later = static_cast<__mmask16>(~FirstLanes(i - b + 1));
      add_where(_mm512_mask_cmple_epu32_mask(later, key, block) |
                _mm512_mask_cmplt_epu32_mask(static_cast<__mmask16>(~later), key, block));
    }
    for (int32_t i = block_end; i < count; ++i) {  // after every j of the block
      add_where(_mm512_cmplt_epu32_mask(_mm512_set1_epi32(static_cast<int32_t>(keys[i])), block));
    }
    alignas(64) int32_t ranks[16];
    _mm512_store_si512(ranks, rank);
    for (int32_t lane = 0; lane < block_end - b; ++lane) {
      if (ranks[lane] >= dropped) kept[ranks[lane] - dropped] = b + lane;
    }
  }
}

}  // namespace

void LargestInOrderPortable(const uint32_t* keys, int32_t count, int32_t keep, int32_t* kept) {
  // (key, position) as one integer: its order is the pairs'.
  std::vector<uint64_t> order(static_cast<size_t>(count));
  for (int32_t j = 0; j < count; ++j) {
    order[j] = static_cast<uint64_t>(keys[j]) << 32 | static_cast<uint64_t>(j);
  }
  const auto first_kept = order.begin() + (count - keep);
  std::nth_element(order.begin(), first_kept, order.end());
  std::sort(first_kept, order.end());
  for (int32_t i = 0; i < keep; ++i) {
    kept[i] = static_cast<int32_t>(first_kept[i] & 0xFFFFFFFFu);
  }
}

void LargestInOrder(const uint32_t* keys, int32_t count, int32_t keep, int32_t* kept) {
  static const bool avx512 = HostCpuFeatures().avx512bw_vl;
  // Counting costs count² / 16 comparisons: past a few hundred keys the
  // sort's count·log(count) wins.
  if (avx512 && count <= kMostKeysCounted) {
    LargestInOrderAvx512(keys, count, keep, kept);
  } else {
    LargestInOrderPortable(keys, count, keep, kept);
  }
}

}  // namespace docsparse
