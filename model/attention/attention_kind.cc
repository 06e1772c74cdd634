// Names of the attention kinds, knob lookup, and the global projections'
// split into heads (model/attention/attention.h).
#include <utility>

#include "model/attention/attention.h"

namespace docsparse {

namespace {

constexpr std::pair<AttentionKind, std::string_view> kAttentionKindNames[] = {
    {AttentionKind::kDense, "dense"},     {AttentionKind::kLsg, "lsg"},
    {AttentionKind::kSbm, "sbm"},         {AttentionKind::kLongformer, "longformer"},
    {AttentionKind::kBigBird, "bigbird"}, {AttentionKind::kSparseTransformer, "sparse_transformer"},
    {AttentionKind::kStar, "star"},       {AttentionKind::kModernBert, "modernbert"},
    {AttentionKind::kEtc, "etc"},         {AttentionKind::kLsh, "lsh"},
    {AttentionKind::kRouting, "routing"}, {AttentionKind::kUnion, "union"},
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

ProjectedHeads SplitGlobalHeads(const at::Tensor& query, const at::Tensor& key_value,
                                int64_t heads) {
  const int64_t batch = query.size(0);
  const int64_t head_dim = query.size(2) / heads;
  const at::Tensor keys_values =
      key_value.view({batch, key_value.size(1), 2, heads, head_dim}).permute({2, 0, 3, 1, 4});
  return ProjectedHeads{query.view({batch, query.size(1), heads, head_dim}).permute({0, 2, 1, 3}),
                        keys_values[0], keys_values[1]};
}

double KnobOr(const AttentionKnobValues& knobs, const std::string& name, double fallback) {
  const auto it = knobs.find(name);
  return it == knobs.end() ? fallback : it->second;
}

}  // namespace docsparse
