// The attention interface every planner plugs into (DESIGN.md, "The attention
// engine"): the encoder projects queries, keys and values and hands them to
// an AttentionMechanism, which chooses the keys each query sees, computes the
// context, and reports per batch item what it computed.
#ifndef DOCSPARSE_MODEL_ATTENTION_ATTENTION_H_
#define DOCSPARSE_MODEL_ATTENTION_ATTENTION_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "model/attention/cost_model.h"
#include "model/checkpoint/precision.h"

namespace docsparse {

enum class AttentionKind { kDense, kLsg, kSbm };

std::string_view AttentionKindName(AttentionKind kind);

// What one request's budget resolved to (DESIGN.md, "Budgets"), per batch
// item. Each mechanism reads the fields it understands.
struct ItemAttentionOptions {
  // The mechanism to run (a request's budget.attention override); unset: the
  // model's own. Only a switching mechanism (model/attention/attention_switch.h)
  // honours it; the others run what they are.
  std::optional<AttentionKind> kind;
  // SBM: edge regularization β (0 = the model as calibrated; larger is
  // sparser) and the sampling seed (the request's, else derived from its id).
  double edge_regularization = 0;
  // SBM: when > 0, β is solved per layer by bisection on the expected edge
  // count so that the expected density is at most this (overrides
  // edge_regularization).
  double target_density = 0;
  uint64_t seed = 0;
  // LSG: knobs chosen from the lattice around the native config; 0 = native.
  int lsg_block_size = 0;
  int lsg_sparse_block_size = -1;  // -1 = native; 0 = no sparse keys
  int lsg_sparsity_factor = 0;
};

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
  // and p·v on the CPU's bf16 hardware) or convert to fp32 (SBM); softmax
  // accumulates in fp32.
  Precision precision = Precision::kFp32;
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
// AVX512-BF16 dot products for a bf16 model, AVX-512/AVX2 for fp32), reading q, k and v in place and returning a
// view of a [batch, seq, heads, head_dim] context; elsewhere BLAS (fp32) or
// oneDNN's bf16 matmul with a fused softmax, the matrices materialised.
std::unique_ptr<AttentionMechanism> MakeDenseAttention();

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_ATTENTION_H_
