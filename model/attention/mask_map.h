// Downsampled attention mask pictures: the density of computed query-key
// pairs in each cell of a grid over the document's token positions.
#ifndef DOCSPARSE_MODEL_ATTENTION_MASK_MAP_H_
#define DOCSPARSE_MODEL_ATTENTION_MASK_MAP_H_

#include <cstdint>
#include <vector>

namespace docsparse {

// Row-major [cells, cells] densities for a document encoded as consecutive
// windows, each with dense attention inside and none across: cell (i, j)
// holds the fraction of (query in row bucket i, key in column bucket j)
// pairs that share a window. cells = min(resolution, total tokens).
std::vector<float> DenseWindowsMaskMap(const std::vector<int64_t>& window_lengths, int resolution,
                                       int* cells);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_MASK_MAP_H_
