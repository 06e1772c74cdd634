#include "model/attention/knob_lattice.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

namespace docsparse {

std::vector<double> HalvingSteps(double start, double min, double max) {
  if (start <= 0) return {0};
  std::vector<double> steps = {start};
  for (double v = std::floor(start / 2); v >= min && v < steps.back(); v = std::floor(v / 2)) {
    steps.push_back(v);
  }
  if (start * 2 <= max) steps.push_back(start * 2);
  return steps;
}

double LatticeDistance(const AttentionKnobValues& start, const AttentionKnobValues& candidate) {
  double distance = 0;
  for (const auto& [name, value] : candidate) {
    const double from = KnobOr(start, name, value);
    if (from == value) continue;
    if (from <= 0 || value <= 0) {
      distance += 3;
    } else {
      distance += std::fabs(std::log2(value / from));
    }
  }
  return distance;
}

bool PriceFits(const AttentionPrice& price, const AttentionCap& cap) {
  return (!cap.max_density || price.density <= *cap.max_density) &&
         (!cap.max_attention_gflops || price.attention_flops / 1e9 <= *cap.max_attention_gflops);
}

BudgetFit FitOnLattice(const AttentionCap& cap, const AttentionKnobValues& start,
                       const KnobLattice& lattice,
                       const std::function<AttentionPrice(const AttentionKnobValues&)>& price,
                       const std::function<bool(const AttentionKnobValues&)>& valid) {
  BudgetFit at_start{start, price(start), true};
  at_start.fits = PriceFits(at_start.price, cap);
  if (at_start.fits) return at_start;

  // Every combination of the lattice's values, odometer style.
  std::vector<std::pair<std::string, const std::vector<double>*>> axes;
  for (const auto& [name, values] : lattice) {
    if (!values.empty()) axes.emplace_back(name, &values);
  }
  std::vector<size_t> index(axes.size(), 0);
  BudgetFit best, cheapest = at_start;
  std::tuple<double, double> best_rank{std::numeric_limits<double>::infinity(), 0};
  bool have_best = false;
  const auto cost = [&](const AttentionPrice& p) {
    return cap.max_attention_gflops ? p.attention_flops : p.density;
  };
  while (true) {
    AttentionKnobValues candidate = start;
    for (size_t a = 0; a < axes.size(); ++a) candidate[axes[a].first] = (*axes[a].second)[index[a]];
    if (valid == nullptr || valid(candidate)) {
      BudgetFit fit{candidate, price(candidate), false};
      fit.fits = PriceFits(fit.price, cap);
      if (cost(fit.price) < cost(cheapest.price)) cheapest = fit;
      if (fit.fits) {
        // Closest to the start first; of equals, the densest.
        const std::tuple<double, double> rank{LatticeDistance(start, candidate),
                                              -fit.price.density};
        if (!have_best || rank < best_rank) {
          best = fit;
          best_rank = rank;
          have_best = true;
        }
      }
    }
    size_t a = 0;
    for (; a < axes.size(); ++a) {
      if (++index[a] < axes[a].second->size()) break;
      index[a] = 0;
    }
    if (a == axes.size()) break;
  }
  if (have_best) return best;
  cheapest.fits = false;
  return cheapest;
}

}  // namespace docsparse
