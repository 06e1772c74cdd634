// Plans as lists of (query, key) pairs: the form every planner whose plans
// are token pairs can give (the position patterns, SBM, LSH, routing), so
// that content-based planners run on the edge executor
// (kernels/edge_attention.h) and plans compose: a union of plans
// (model/attention/union_planner.h) merges its parts' lists, each pair
// computed and counted once. LSG's plans are not token pairs (its pooled
// keys are derived from many tokens) and have no edge form.
#ifndef DOCSPARSE_MODEL_ATTENTION_EDGE_PLAN_H_
#define DOCSPARSE_MODEL_ATTENTION_EDGE_PLAN_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "model/attention/attention.h"
#include "model/attention/pattern_plan.h"

namespace docsparse {

// One head's keys per query over an item's real tokens, CSR by query:
// query i attends keys[row_offsets[i] .. row_offsets[i + 1]), distinct and
// ascending (unions merge rows; the executor reads in memory order).
struct HeadEdgeList {
  std::vector<int64_t> row_offsets;  // [tokens + 1]
  std::vector<int32_t> keys;
  // Empty, or one per key: added to the pair's scaled score (SBM's
  // inclusion correction).
  std::vector<float> logit_bias;

  int64_t edges() const { return static_cast<int64_t>(keys.size()); }
  int32_t rows() const { return static_cast<int32_t>(row_offsets.size()) - 1; }
};

// One head's list in a CUDA device's memory, as a planner that samples there
// makes it (SBM's fastRG): row_offsets int64 [rows + 1] from 0 and keys int32
// [edges], both on the device.
struct DeviceHeadEdgeList {
  at::Tensor row_offsets;
  at::Tensor keys;
  int64_t edges = 0;

  int32_t rows() const { return static_cast<int32_t>(row_offsets.size(0)) - 1; }
};

// What an edge planner sees of one batch item at one layer.
struct ItemPlanInput {
  // [heads, length, head_dim] each, float32 on the CPU, real tokens only:
  // content-based planners (SBM, LSH, routing) read them.
  at::Tensor query;
  at::Tensor key;
  int32_t layer = 0;
  uint64_t seed = 0;
  AttentionKnobValues knobs;  // every knob of the planner set
};

// One item's plan at one layer, handed out head by head: a whole layer's
// lists can take gigabytes at 16k tokens, one head's a few tens of MB.
class ItemEdgePlan {
 public:
  virtual ~ItemEdgePlan() = default;
  // Head `head`'s list; each head once, in any order.
  virtual HeadEdgeList Head(int32_t head) = 0;
  // Head `head`'s list made in `device`'s memory where the planner can (SBM
  // samples on a GPU), else nullopt and the caller takes Head(head) instead:
  // each head once, by one of the two.
  virtual std::optional<DeviceHeadEdgeList> HeadOnDevice(int32_t /*head*/, at::Device /*device*/) {
    return std::nullopt;
  }
  // What planning cost beyond the pairs (hashing, clustering, sampling),
  // complete once every head has been taken.
  virtual double planner_flops() const { return 0; }
  // Sampling planners: the expected pairs per head; empty when the plan is
  // deterministic given the input (the pairs are their own expectation).
  virtual std::vector<double> head_expected_edges() const { return {}; }
  // The knobs asked for less than the planner's floor, which ran instead.
  virtual bool raised_to_floor() const { return false; }
};

// Makes an item's plan from its projections and knobs. Immutable; safe to
// call from several threads.
class EdgePlanner {
 public:
  virtual ~EdgePlanner() = default;
  virtual std::unique_ptr<ItemEdgePlan> PlanItem(const ItemPlanInput& input) const = 0;
};

// A list of `rows` rows built by `append_row(i, keys, bias)`, which appends
// row i's keys (and, when `biased`, their biases) to the vectors it is
// given. Rows run in parallel in fixed blocks, each block into its own
// vectors, joined in order: the same list for any thread count.
HeadEdgeList BuildHeadEdgeList(int32_t rows, bool biased,
                               const std::function<void(int32_t row, std::vector<int32_t>& keys,
                                                        std::vector<float>& bias)>& append_row);

// Head `head` of a position pattern's plan as a list: sliding spans made
// concrete, gathered copies mapped back to their tokens, and a token that a
// row reaches twice (BigBird's copies of block 0) listed once.
HeadEdgeList PatternHeadEdges(const PatternPlan& plan, int32_t head);

// The union of `parts` (lists over the same tokens): every pair of any
// part, once.
HeadEdgeList UnionOfEdges(const std::vector<HeadEdgeList>& parts);

// The mechanism running `planner`'s plans on the edge executor: per item and
// head, the planner's list, then softmax over it: a bf16 model's on the bf16
// edge executor where the CPU has AVX512-BF16 (kernels/edge_attention_bf16.h,
// its projections read in place), else in fp32 (its projections converted);
// a CUDA model's on the CUDA edge executor in its own dtype, each head's list
// made on the device where the plan can (HeadOnDevice), else planned on the
// host and copied up (model/attention/edge_attention_device.h).
// Planners see fp32 queries and keys on the host. Knobs are `native` with each item's
// options over them.
std::unique_ptr<AttentionMechanism> MakeEdgeAttention(AttentionKind kind,
                                                      std::shared_ptr<const EdgePlanner> planner,
                                                      AttentionKnobValues native,
                                                      int num_threads = 0);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_EDGE_PLAN_H_
