#include "kernels/sbm_sampling.h"

#include <algorithm>
#include <cmath>

namespace docsparse {
const double* LogFactorialTable() {
  static const std::vector<double> table = [] {
    std::vector<double> t(kLogFactorialTableSize, 0.0);
    for (int i = 2; i < kLogFactorialTableSize; ++i)
      t[i] = t[i - 1] + std::log(static_cast<double>(i));
    return t;
  }();
  return table.data();
}

template <typename T>
void AliasTable::BuildFrom(const T* weights, int32_t size, AliasScratch* scratch) {
  entries_.resize(size);
  double total = 0;
  for (int32_t i = 0; i < size; ++i) total += weights[i];
  if (!(total > 0)) {
    for (int32_t i = 0; i < size; ++i) entries_[i] = {0, 0};
    return;
  }
  // Scaled probabilities (mean 1) sorted into small (< 1) and large (>= 1)
  // stacks, kept in one array: small from the front, large from the back.
  scratch->scaled.resize(size);
  scratch->stack.resize(size);
  double* scaled = scratch->scaled.data();
  int32_t* stack = scratch->stack.data();
  int32_t small_end = 0;
  int32_t large_begin = size;
  const double factor = static_cast<double>(size) / total;
  for (int32_t i = 0; i < size; ++i) {
    scaled[i] = weights[i] * factor;
    // Branch-free: write both ends (they never meet before the last index),
    // advance one.
    const bool small = scaled[i] < 1;
    stack[small_end] = i;
    stack[large_begin - 1] = i;
    small_end += small;
    large_begin -= !small;
  }
  constexpr double kScale = 4294967296.0;  // 2^32
  auto threshold = [&](double p) {
    return static_cast<uint32_t>(std::min(p * kScale, kScale - 1));
  };
  while (small_end > 0 && large_begin < size) {
    const int32_t small = stack[--small_end];
    const int32_t large = stack[large_begin];
    entries_[small] = {threshold(scaled[small]), large};
    scaled[large] -= 1 - scaled[small];
    if (scaled[large] < 1) {
      ++large_begin;
      stack[small_end++] = large;
    }
  }
  // What is left has probability 1 up to rounding: always keep the column.
  for (int32_t i = 0; i < small_end; ++i) entries_[stack[i]] = {0xffffffffu, stack[i]};
  for (int32_t i = large_begin; i < size; ++i) entries_[stack[i]] = {0xffffffffu, stack[i]};
}

void AliasTable::Build(const double* weights, int32_t size, AliasScratch* scratch) {
  BuildFrom(weights, size, scratch);
}

void AliasTable::Build(const float* weights, int32_t size, AliasScratch* scratch) {
  BuildFrom(weights, size, scratch);
}

}  // namespace docsparse
