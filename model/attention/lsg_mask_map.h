// Mask map of LSG attention over a document's token positions (see
// model/attention/mask_map.h for the grid): local windows exactly as planned; each
// sparse key is spread over the sparsity_factor tokens it is derived from;
// global tokens are not document positions and are left out.
#ifndef DOCSPARSE_MODEL_ATTENTION_LSG_MASK_MAP_H_
#define DOCSPARSE_MODEL_ATTENTION_LSG_MASK_MAP_H_

#include <cstdint>
#include <vector>

#include "model/checkpoint/lsg_config.h"

namespace docsparse {

// `window_lengths`: the document's consecutive windows (sequences, special
// tokens included), each run through LSG with `config`.
std::vector<float> LsgMaskMap(const LsgConfig& config, const std::vector<int64_t>& window_lengths,
                              int resolution, int* cells);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_LSG_MASK_MAP_H_
