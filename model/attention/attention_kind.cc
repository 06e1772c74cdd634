// Names of the attention kinds, and knob lookup (model/attention/attention.h).
#include <utility>

#include "model/attention/attention.h"

namespace docsparse {

namespace {

constexpr std::pair<AttentionKind, std::string_view> kAttentionKindNames[] = {
    {AttentionKind::kDense, "dense"},     {AttentionKind::kLsg, "lsg"},
    {AttentionKind::kSbm, "sbm"},         {AttentionKind::kLongformer, "longformer"},
    {AttentionKind::kBigBird, "bigbird"}, {AttentionKind::kSparseTransformer, "sparse_transformer"},
    {AttentionKind::kStar, "star"},       {AttentionKind::kModernBert, "modernbert"},
};

}  // namespace

std::string_view AttentionKindName(AttentionKind kind) {
  for (const auto& [each, name] : kAttentionKindNames) {
    if (each == kind) return name;
  }
  return "unknown";
}

std::optional<AttentionKind> AttentionKindNamed(std::string_view name) {
  for (const auto& [kind, each] : kAttentionKindNames) {
    if (each == name) return kind;
  }
  return std::nullopt;
}

const std::vector<AttentionKind>& AllAttentionKinds() {
  static const std::vector<AttentionKind> kinds = [] {
    std::vector<AttentionKind> all;
    for (const auto& [kind, name] : kAttentionKindNames) all.push_back(kind);
    return all;
  }();
  return kinds;
}

double KnobOr(const AttentionKnobValues& knobs, const std::string& name, double fallback) {
  const auto it = knobs.find(name);
  return it == knobs.end() ? fallback : it->second;
}

}  // namespace docsparse
