// Per-request choice of attention (SparsityBudget.attention): a mechanism
// that runs each batch item with the kind its options ask for, among the
// ones the model has parameters for, and the model's own kind otherwise.
// Items that ask for the same kind run together, so a batch of one kind
// costs what that mechanism alone costs.
#ifndef DOCSPARSE_MODEL_ATTENTION_ATTENTION_SWITCH_H_
#define DOCSPARSE_MODEL_ATTENTION_ATTENTION_SWITCH_H_

#include <map>
#include <memory>
#include <vector>

#include "model/attention/attention.h"

namespace docsparse {

// `native` runs items without a kind (and those asking for native's kind);
// `alternatives` the others. An item asking for a kind that is neither is a
// caller bug (the server validates requests first): it runs native.
std::unique_ptr<AttentionMechanism> MakeSwitchingAttention(
    std::unique_ptr<AttentionMechanism> native,
    std::map<AttentionKind, std::unique_ptr<AttentionMechanism>> alternatives);

// The kinds a mechanism made by MakeSwitchingAttention can run, native first;
// for any other mechanism, its own kind.
std::vector<AttentionKind> AvailableAttentionKinds(const AttentionMechanism& mechanism);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_ATTENTION_SWITCH_H_
