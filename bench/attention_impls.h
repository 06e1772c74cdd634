// The attention implementations `docsparse-bench attention --impl NAME`
// knows. Each registers a factory under its name from its own .cc file
// (static registration), so a new planner adds one file, no edits here.
#ifndef DOCSPARSE_BENCH_ATTENTION_IMPLS_H_
#define DOCSPARSE_BENCH_ATTENTION_IMPLS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/attention/attention.h"

namespace docsparse::bench {

// One benchmark case: a single sequence of `seq` real tokens.
struct AttentionCase {
  int64_t seq = 0;
  int heads = 12;
  int head_dim = 64;
  // Target density for implementations with a budget (e.g. SBM's
  // max_density); 0 = the implementation's native configuration.
  double density = 0;
  uint64_t seed = 1;
  int threads = 1;
};

// What the benchmark times: one Forward of `mechanism` on random q, k, v of
// the case's shape, with `options` for the single batch item.
struct PreparedAttention {
  std::unique_ptr<AttentionMechanism> mechanism;
  ItemAttentionOptions options;
  // Positions in front of the tokens the mechanism expects (LSG's global
  // tokens); q, k, v then have extra_positions + seq rows.
  int extra_positions = 0;
};

using AttentionFactory =
    std::function<absl::StatusOr<PreparedAttention>(const AttentionCase& bench_case)>;

// Registers `factory` under `name`; returns true (for static initialisers).
bool RegisterAttentionImpl(const std::string& name, AttentionFactory factory);
// Null when no implementation has that name.
const AttentionFactory* FindAttentionImpl(const std::string& name);
std::vector<std::string> AttentionImplNames();

}  // namespace docsparse::bench

#endif  // DOCSPARSE_BENCH_ATTENTION_IMPLS_H_
