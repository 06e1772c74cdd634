#include "bench/attention_impls.h"

#include <map>

#include "model/attention/lsg_attention.h"

namespace docsparse::bench {
namespace {

std::map<std::string, AttentionFactory>& Registry() {
  static auto* registry = new std::map<std::string, AttentionFactory>();
  return *registry;
}

// Dense attention one head group at a time, so 16k tokens fit in memory
// (one head's score matrix is seq² floats, 1 GiB at 16k, plus its softmax):
// the same BLAS matmuls and softmax as the serving path, per group.
class HeadGroupedDense final : public AttentionMechanism {
 public:
  AttentionKind kind() const override { return AttentionKind::kDense; }
  at::Tensor Forward(const AttentionInputs& in,
                     std::vector<ItemAttentionCost>* item_costs) const override {
    const int64_t heads = in.query.size(1);
    const int64_t seq = in.query.size(2);
    const int64_t group =
        std::max<int64_t>(1, (int64_t{1} << 30) / std::max<int64_t>(1, seq * seq * 4));
    std::vector<at::Tensor> parts;
    std::vector<ItemAttentionCost> costs;
    item_costs->assign(in.query.size(0), ItemAttentionCost{});
    for (int64_t h = 0; h < heads; h += group) {
      const int64_t n = std::min(group, heads - h);
      // Everything else as given: the precision picks the executor.
      AttentionInputs part = in;
      part.query = in.query.narrow(1, h, n);
      part.key = in.key.narrow(1, h, n);
      part.value = in.value.narrow(1, h, n);
      parts.push_back(dense_->Forward(part, &costs));
      for (size_t b = 0; b < costs.size(); ++b) {
        auto& edges = (*item_costs)[b].head_edges;
        edges.insert(edges.end(), costs[b].head_edges.begin(), costs[b].head_edges.end());
      }
    }
    return at::cat(parts, 1);
  }

 private:
  std::unique_ptr<AttentionMechanism> dense_ = MakeDenseAttention();
};

const bool kDenseRegistered =
    RegisterAttentionImpl("dense", [](const AttentionCase&) -> absl::StatusOr<PreparedAttention> {
      return PreparedAttention{std::make_unique<HeadGroupedDense>(), {}, 0};
    });

// LSG with the reference's defaults (block 128, sparse block 128, sparsity
// factor 2, norm, 1 global token): what `docsparse-convert lsg` writes.
const bool kLsgRegistered =
    RegisterAttentionImpl("lsg", [](const AttentionCase& c) -> absl::StatusOr<PreparedAttention> {
      LsgConfig config;
      return PreparedAttention{MakeLsgAttention(config, c.threads), {}, config.num_global_tokens};
    });

}  // namespace

bool RegisterAttentionImpl(const std::string& name, AttentionFactory factory) {
  return Registry().emplace(name, std::move(factory)).second;
}

const AttentionFactory* FindAttentionImpl(const std::string& name) {
  const auto it = Registry().find(name);
  return it == Registry().end() ? nullptr : &it->second;
}

std::vector<std::string> AttentionImplNames() {
  std::vector<std::string> names;
  for (const auto& [name, factory] : Registry()) names.push_back(name);
  return names;
}

}  // namespace docsparse::bench
