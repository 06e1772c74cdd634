// LSG under a sparsity budget (DESIGN.md, "Budgets"): the knobs (block size,
// sparse block size, sparsity factor) are chosen from a lattice around the
// model's native config — halving and doubling steps — as the config closest
// to native whose planned cost fits the cap. The plan is priced before
// running with every derived key counted as attendable, an upper bound (the
// run may mask some, e.g. fully padded pooled chunks).
#ifndef DOCSPARSE_MODEL_ATTENTION_LSG_BUDGET_H_
#define DOCSPARSE_MODEL_ATTENTION_LSG_BUDGET_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "model/attention/attention.h"
#include "model/attention/cost_model.h"
#include "model/checkpoint/lsg_config.h"

namespace docsparse {

// Edges of one sequence of `tokens` tokens (global tokens excluded), summed
// over `heads` heads, as planned under `config`.
int64_t LsgPlannedEdges(const LsgConfig& config, int64_t tokens, int heads);

struct LsgCap {
  std::optional<double> max_density;           // mean density, (0, 1]
  std::optional<double> max_attention_gflops;  // whole request, all layers
};

struct LsgKnobChoice {
  ItemAttentionOptions options;  // the knobs to run with
  LsgConfig config;              // native with those knobs
  double planned_density = 0;
  double planned_attention_gflops = 0;
  bool fits = false;  // false: the cheapest config on the lattice, over the cap
};

// Chooses knobs for the sequences of one request (token counts without
// global tokens). With no cap, the native config.
LsgKnobChoice ChooseLsgKnobs(const LsgConfig& native, const std::vector<int64_t>& sequence_tokens,
                             const EncoderShape& shape, const LsgCap& cap);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_LSG_BUDGET_H_
