#include "model/attention/attention_planner.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/quote.h"
#include "model/attention/mask_map.h"
#include "model/attention/sbm_attention.h"

namespace docsparse {

std::vector<float> AttentionPlanner::MaskMap(const AttentionKnobValues&,
                                             const std::vector<int64_t>& lengths, int resolution,
                                             int* cells) const {
  return DenseWindowsMaskMap(lengths, resolution, cells);
}

void ApplyConfiguredNatives(const AttentionKnobValues& configured,
                            std::map<std::string, KnobRange>* knobs) {
  for (const auto& [name, value] : configured) {
    const auto it = knobs->find(name);
    if (it != knobs->end()) it->second.native = value;
  }
}

absl::Status AttentionPlanner::ValidateKnobs(const AttentionKnobValues&) const {
  return absl::OkStatus();
}

absl::Status CheckRequestKnobs(const AttentionPlanner& planner, const AttentionKnobValues& knobs,
                               std::string_view field_prefix_view) {
  const std::string field_prefix(field_prefix_view);
  // The field that holds the knobs ("budget.knobs"), for what is not one knob's.
  const std::string field(absl::StripSuffix(field_prefix, "."));
  const std::map<std::string, KnobRange> ranges = planner.Knobs();
  for (const auto& [name, value] : knobs) {
    const auto range = ranges.find(name);
    if (range == ranges.end()) {
      std::vector<std::string> names;
      for (const auto& [known, unused] : ranges) names.push_back(known);
      // The name is whatever the client sent: one that does not read as a
      // knob's goes quoted and cut (common/quote.h) under the map's field.
      const bool plain =
          !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
            return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
          });
      const std::string known = absl::StrCat(
          "not a knob of ", std::string(planner.name()), " attention",
          names.empty() ? " (it has none)" : absl::StrCat(" (", absl::StrJoin(names, ", "), ")"));
      if (plain) return absl::InvalidArgumentError(absl::StrCat(field_prefix, name, ": ", known));
      return absl::InvalidArgumentError(absl::StrCat(field, ": ", Quote(name), " is ", known));
    }
    const KnobRange& r = range->second;
    if (!std::isfinite(value) || value < r.min || value > r.max ||
        (r.integer && value != std::floor(value))) {
      return absl::InvalidArgumentError(absl::StrCat(field_prefix, name, ": ", value, " must be ",
                                                     r.integer ? "an integer " : "", "in [", r.min,
                                                     ", ", r.max, "]"));
    }
  }
  // A combination the planner cannot run names its knobs itself; it goes
  // under the field that holds them ("budget.knobs: window: 63 must be even").
  const absl::Status combination = planner.ValidateKnobs(StartingKnobs(planner, knobs));
  if (combination.ok()) return combination;
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", combination.message()));
}

AttentionKnobValues StartingKnobs(const AttentionPlanner& planner,
                                  const AttentionKnobValues& overrides) {
  AttentionKnobValues knobs;
  for (const auto& [name, range] : planner.Knobs()) knobs[name] = range.native;
  for (const auto& [name, value] : overrides) knobs[name] = value;
  return knobs;
}

uint64_t SamplingSeedFromRequestId(std::string_view request_id) {
  // SBM's derivation, which seeds were always made with.
  return SbmSeedFromRequestId(request_id);
}

AttentionPrice PriceOfLayer(double layer_edges, double layer_dense_pairs,
                            const EncoderShape& shape) {
  AttentionPrice price;
  price.density = layer_dense_pairs > 0 ? layer_edges / layer_dense_pairs : 0;
  price.edges = layer_edges * shape.num_layers;
  price.attention_flops = 4.0 * shape.head_dim * price.edges;
  return price;
}

double DensePairs(const std::vector<int64_t>& tokens, int64_t extra) {
  double pairs = 0;
  for (int64_t n : tokens) pairs += static_cast<double>(n + extra) * static_cast<double>(n + extra);
  return pairs;
}

}  // namespace docsparse
