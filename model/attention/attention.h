// The attention interface every planner plugs into (DESIGN.md, "The attention
// engine"): the encoder projects queries, keys and values and hands them to
// an AttentionMechanism, which chooses the keys each query sees, computes the
// context, and reports per batch item what it computed.
#ifndef DOCSPARSE_MODEL_ATTENTION_ATTENTION_H_
#define DOCSPARSE_MODEL_ATTENTION_ATTENTION_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/attention/cost_model.h"
#include "model/checkpoint/precision.h"

namespace docsparse {

// Every planner the engine has (DESIGN.md, "The planner contract"). Each is
// an AttentionPlanner registered by AttentionKindName
// (model/attention/planner_registry.h); code outside the attention room
// never branches on one.
enum class AttentionKind {
  kDense,
  kLsg,
  kSbm,
  kLongformer,
  kBigBird,
  kSparseTransformer,
  kStar,
  kModernBert,
  kEtc,
  kLsh,
  kRouting,
  kUnion,
};

// Lower-case names: "dense", "lsg", "sbm", "longformer", "bigbird",
// "sparse_transformer", "star", "modernbert", "etc", "lsh", "routing",
// "union" (docsparse.json's attention.kind, the metrics'
// label values, the proto's ATTENTION_KIND_<NAME>).
std::string_view AttentionKindName(AttentionKind kind);
// The kind named `name`, if any.
std::optional<AttentionKind> AttentionKindNamed(std::string_view name);
// Every kind, in enum order.
const std::vector<AttentionKind>& AllAttentionKinds();

// A planner's knobs by name (window, random_blocks, sparsity_factor,
// edge_regularization, ...), each a number. A knob absent from the map has
// its native value.
using AttentionKnobValues = std::map<std::string, double>;

// `knobs[name]` when set, else `fallback`.
double KnobOr(const AttentionKnobValues& knobs, const std::string& name, double fallback);

// An integer knob that is set (the planners' knobs after their natives are
// applied); throws std::out_of_range where it is not.
inline int32_t IntKnob(const AttentionKnobValues& knobs, const char* name) {
  return static_cast<int32_t>(knobs.at(name));
}

// What one request's budget resolved to (DESIGN.md, "Budgets"), per batch
// item.
struct ItemAttentionOptions {
  // The mechanism to run (a request's budget.attention override); unset: the
  // model's own. Only a switching mechanism (model/attention/attention_switch.h)
  // honours it; the others run what they are.
  std::optional<AttentionKind> kind;
  // The knobs the planner runs with instead of its native values, chosen by
  // its FitBudget or set by the request (model/attention/attention_planner.h).
  AttentionKnobValues knobs;
  // Sampling planners (SBM, BigBird's random blocks): the seed (the
  // request's, else derived from its id).
  uint64_t seed = 0;
};

// Queries, keys and values [batch, heads, seq, head_dim] each.
struct ProjectedHeads {
  at::Tensor query, key, value;
};

// Global projections as AttentionInputs::global_projections returns them:
// `query` [batch, rows, heads·head_dim] (the global rows' queries) and
// `key_value` [batch, seq, 2·heads·head_dim] (keys, then values, of every
// token) split into heads, as views.
ProjectedHeads SplitGlobalHeads(const at::Tensor& query, const at::Tensor& key_value,
                                int64_t heads);

struct AttentionInputs {
  // [batch, heads, seq, head_dim] each, in the model's activation type:
  // float32, or bfloat16 for a bf16 model. Any strides with head_dim
  // contiguous: the encoder passes views of its interleaved projection.
  at::Tensor query;
  at::Tensor key;
  at::Tensor value;
  // Real tokens per item; tokens [length, seq) are right padding.
  std::vector<int64_t> lengths;  // [batch]
  int layer = 0;
  // [batch], or empty: every item with default options.
  std::vector<ItemAttentionOptions> item_options;
  // The model's precision (kFp32 or kBf16). With kBf16 a mechanism may run its
  // matrix products in bf16 (dense does, and LSG on AMX or AVX512-BF16: q·kᵀ
  // and p·v on the CPU's bf16 hardware; SBM and the other lists of pairs q·k
  // by AVX512-BF16 dot products) or convert to fp32; softmax accumulates in
  // fp32.
  Precision precision = Precision::kFp32;
  // Architectures whose global tokens have projections of their own
  // (Longformer's query_global, key_global, value_global): makes them from
  // the layer's input, typed as query/key/value: the queries of the first
  // `query_rows` tokens ([batch, heads, query_rows, head_dim]; only global
  // rows need them), keys and values of every token. Unset for the others.
  // A mechanism whose plans have such global rows (PatternPlan::global_rows)
  // computes them from these and calls this at most once per Forward; the
  // others ignore it.
  std::function<ProjectedHeads(int64_t query_rows)> global_projections = nullptr;
};

// Implementations are immutable and safe to call from several threads.
class AttentionMechanism {
 public:
  virtual ~AttentionMechanism() = default;

  virtual AttentionKind kind() const = 0;

  // Returns the context [batch, heads, seq, head_dim], in float32 or the
  // inputs' element type (callers convert as they need). Padding keys never
  // receive weight; outputs at padding queries are unspecified. Sets
  // (*item_costs)[b] to what item b computed (resized to the batch).
  virtual at::Tensor Forward(const AttentionInputs& inputs,
                             std::vector<ItemAttentionCost>* item_costs) const = 0;
};

// softmax(q·kᵀ/√d + padding mask)·v over every real key; density 1. Runs on
// the block-sparse executors with one span per query block (AMX tiles or
// AVX512-BF16 dot products for a bf16 model, AVX-512/AVX2 for fp32), reading q, k and v in place
// and returning a view of a [batch, seq, heads, head_dim] context; elsewhere BLAS (fp32) or
// oneDNN's bf16 matmul with a fused softmax, the matrices materialised.
std::unique_ptr<AttentionMechanism> MakeDenseAttention();

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_ATTENTION_H_
