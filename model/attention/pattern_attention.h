// A position pattern's plans run by the block-sparse executors
// (kernels/block_sparse_attention.h): per item, the pattern planner's
// PatternPlan for its real tokens (model/attention/pattern_plan.h), keys and
// values extended by the plan's gathered copies, and the same executors LSG
// uses (AMX or AVX512-BF16 for a bf16 model, AVX-512/AVX2 for fp32, CUDA for
// device tensors). Rows past an item's length come out zero.
#ifndef DOCSPARSE_MODEL_ATTENTION_PATTERN_ATTENTION_H_
#define DOCSPARSE_MODEL_ATTENTION_PATTERN_ATTENTION_H_

#include <functional>
#include <memory>

#include "model/attention/attention.h"
#include "model/attention/pattern_plan.h"

namespace docsparse {

// One sequence's plan under `knobs` (every knob set): `length` real tokens,
// `heads` heads, the item's seed and the layer (for sampling patterns).
using PatternPlanner = std::function<PatternPlan(const AttentionKnobValues& knobs, int32_t length,
                                                 int32_t heads, uint64_t seed, int32_t layer)>;

// `kind` is what the mechanism reports; items take `native` with their
// options' knobs over it. `num_threads` <= 0: LibTorch's intra-op count.
std::unique_ptr<AttentionMechanism> MakePatternAttention(AttentionKind kind, PatternPlanner planner,
                                                         AttentionKnobValues native,
                                                         int num_threads = 0);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_PATTERN_ATTENTION_H_
