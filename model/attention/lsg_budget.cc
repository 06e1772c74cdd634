#include "model/attention/lsg_budget.h"

#include <cmath>
#include <tuple>

#include "model/attention/lsg_attention.h"
#include "model/attention/lsg_planner.h"

namespace docsparse {
namespace {

struct Priced {
  double density = 0;
  double gflops = 0;
};

Priced Price(const LsgConfig& config, const std::vector<int64_t>& tokens,
             const EncoderShape& shape) {
  double edges = 0;
  double dense_pairs = 0;
  for (int64_t n : tokens) {
    const double real = static_cast<double>(n + config.num_global_tokens);
    edges += static_cast<double>(LsgPlannedEdges(config, n, shape.num_heads));
    dense_pairs += real * real * shape.num_heads;
  }
  Priced priced;
  priced.density = dense_pairs > 0 ? edges / dense_pairs : 0;
  priced.gflops = 4.0 * shape.head_dim * edges * shape.num_layers / 1e9;
  return priced;
}

bool Fits(const Priced& priced, const LsgCap& cap) {
  return (!cap.max_density || priced.density <= *cap.max_density) &&
         (!cap.max_attention_gflops || priced.gflops <= *cap.max_attention_gflops);
}

// Steps away from native on a log2 scale; dropping sparse keys counts 3.
double Distance(const LsgConfig& native, const LsgConfig& c) {
  auto steps = [](int a, int b) { return std::fabs(std::log2(static_cast<double>(a) / b)); };
  double d = steps(c.block_size, native.block_size);
  if (native.sparsity_factor > 0) d += steps(c.sparsity_factor, native.sparsity_factor);
  if (native.sparse_block_size > 0) {
    d += c.sparse_block_size == 0 ? 3 : steps(c.sparse_block_size, native.sparse_block_size);
  }
  return d;
}

}  // namespace

int64_t LsgPlannedEdges(const LsgConfig& config, int64_t tokens, int heads) {
  const LsgLayout layout =
      LayoutLsgSequence(config, config.num_global_tokens, static_cast<int32_t>(tokens));
  const std::vector<uint8_t> all_valid(layout.derived_keys, 1);
  // Every head plans alike when every derived key is attendable.
  return PlanLsgSequence(config, layout, 1, all_valid, false).head_edges[0] * heads;
}

LsgKnobChoice ChooseLsgKnobs(const LsgConfig& native, const std::vector<int64_t>& tokens,
                             const EncoderShape& shape, const LsgCap& cap) {
  std::vector<int> blocks, sparse_blocks, factors;
  for (int k = 0; k < 4; ++k) {
    if ((native.block_size >> k) >= 2) blocks.push_back(native.block_size >> k);
  }
  if (native.sparse_block_size > 0) {
    for (int k = 0; k < 3; ++k) {
      if ((native.sparse_block_size >> k) >= 1)
        sparse_blocks.push_back(native.sparse_block_size >> k);
    }
  }
  sparse_blocks.push_back(0);
  if (native.sparsity_factor > 0) {
    for (int k = 0; k < 3; ++k) factors.push_back(native.sparsity_factor << k);
  } else {
    factors.push_back(0);
  }

  LsgKnobChoice best;
  std::tuple<bool, double, double> best_rank{false, 0, 0};  // fits, -distance, density
  bool have_best = false;
  LsgKnobChoice cheapest;
  double cheapest_cost = INFINITY;
  for (int block : blocks) {
    for (int sparse : sparse_blocks) {
      for (int factor : factors) {
        LsgConfig c = native;
        c.block_size = block;
        c.sparse_block_size = sparse;
        c.sparsity_factor = factor;
        if (!ValidateLsgConfig(c, "lattice").ok()) continue;
        const Priced priced = Price(c, tokens, shape);
        LsgKnobChoice choice;
        choice.config = c;
        choice.options.knobs = {{kLsgBlockSizeKnob, block},
                                {kLsgSparseBlockSizeKnob, sparse},
                                {kLsgSparsityFactorKnob, factor}};
        choice.planned_density = priced.density;
        choice.planned_attention_gflops = priced.gflops;
        choice.fits = Fits(priced, cap);
        const double cost = cap.max_attention_gflops ? priced.gflops : priced.density;
        if (cost < cheapest_cost) {
          cheapest_cost = cost;
          cheapest = choice;
        }
        if (!choice.fits) continue;
        const std::tuple<bool, double, double> rank{true, -Distance(native, c), priced.density};
        if (!have_best || rank > best_rank) {
          best = choice;
          best_rank = rank;
          have_best = true;
        }
      }
    }
  }
  return have_best ? best : cheapest;
}

}  // namespace docsparse
