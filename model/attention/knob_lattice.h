// Budget fitting on a lattice of knob values (DESIGN.md, "Budgets"): each
// knob takes a few values around its starting one (halving and doubling
// steps); the fit is the combination closest to the start, in log2 steps,
// whose price fits the cap, else the cheapest one. Planners with integer
// knobs (the position patterns) share it; LSG keeps its own lattice
// (model/attention/lsg_budget.h), which predates it.
#ifndef DOCSPARSE_MODEL_ATTENTION_KNOB_LATTICE_H_
#define DOCSPARSE_MODEL_ATTENTION_KNOB_LATTICE_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "model/attention/attention_planner.h"

namespace docsparse {

// Candidate values per knob; knobs absent keep their starting value.
using KnobLattice = std::map<std::string, std::vector<double>>;

// A knob's candidates when cheaper plans come from smaller values (a window,
// a number of random blocks): `start`, then halvings down to `min`, then
// one doubling up to `max`. A start of 0 gives {0}.
std::vector<double> HalvingSteps(double start, double min, double max);

// Distance of a candidate to the start: Σ |log2(value / start)| over knobs,
// a knob that leaves or reaches 0 counting 3 steps.
double LatticeDistance(const AttentionKnobValues& start, const AttentionKnobValues& candidate);

// The fit on `lattice` for `cap`, pricing each combination with `price`;
// `valid` may reject combinations (e.g. inconsistent knobs).
BudgetFit FitOnLattice(const AttentionCap& cap, const AttentionKnobValues& start,
                       const KnobLattice& lattice,
                       const std::function<AttentionPrice(const AttentionKnobValues&)>& price,
                       const std::function<bool(const AttentionKnobValues&)>& valid = nullptr);

// Whether `price` fits `cap` (no cap: fits).
bool PriceFits(const AttentionPrice& price, const AttentionCap& cap);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_KNOB_LATTICE_H_
