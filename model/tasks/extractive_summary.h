// Extractive summarization: pick central and mutually diverse sentences by
// maximal marginal relevance (Carbonell & Goldstein 1998) against the
// centroid of the sentence embeddings, then return them in document order.
#ifndef DOCSPARSE_MODEL_TASKS_EXTRACTIVE_SUMMARY_H_
#define DOCSPARSE_MODEL_TASKS_EXTRACTIVE_SUMMARY_H_

#include <ATen/ATen.h>

#include <vector>

namespace docsparse {

struct SelectedSentence {
  int index = 0;    // row of the embedding matrix
  float score = 0;  // marginal relevance when it was picked
};

// embeddings: [n, h] unit-norm rows of the candidate sentences. Picks
// min(count, n) rows, each maximising
//   (1 - diversity) * cos(row, centroid) - diversity * max cos(row, picked),
// and returns them sorted by index.
std::vector<SelectedSentence> SelectSentences(const at::Tensor& embeddings, int count,
                                              float diversity);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_TASKS_EXTRACTIVE_SUMMARY_H_
