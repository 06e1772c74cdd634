#include "model/tasks/extractive_summary.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <limits>

#include "model/encoder/pooling.h"

namespace docsparse {

std::vector<SelectedSentence> SelectSentences(const at::Tensor& embeddings, int count,
                                              float diversity) {
  const int64_t n = embeddings.size(0);
  std::vector<SelectedSentence> picked;
  if (n == 0 || count <= 0) return picked;
  c10::InferenceMode inference_mode;
  at::Tensor centroid = L2Normalize(embeddings.mean(0).unsqueeze(0)).squeeze(0);
  at::Tensor relevance_t = at::mv(embeddings, centroid).contiguous();
  at::Tensor similarity_t = at::matmul(embeddings, embeddings.t()).contiguous();
  const float* relevance = relevance_t.data_ptr<float>();
  const float* similarity = similarity_t.data_ptr<float>();

  // redundancy[i] = max similarity of i to an already picked sentence.
  std::vector<float> redundancy(n, -std::numeric_limits<float>::infinity());
  std::vector<bool> taken(n, false);
  const int64_t target = std::min<int64_t>(count, n);
  while (static_cast<int64_t>(picked.size()) < target) {
    int64_t best = -1;
    float best_score = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < n; ++i) {
      if (taken[i]) continue;
      const float penalty = picked.empty() ? 0.0f : redundancy[i];
      const float score = (1 - diversity) * relevance[i] - diversity * penalty;
      if (score > best_score) {
        best_score = score;
        best = i;
      }
    }
    taken[best] = true;
    picked.push_back({static_cast<int>(best), best_score});
    for (int64_t i = 0; i < n; ++i) {
      redundancy[i] = std::max(redundancy[i], similarity[best * n + i]);
    }
  }
  std::sort(picked.begin(), picked.end(),
            [](const SelectedSentence& a, const SelectedSentence& b) { return a.index < b.index; });
  return picked;
}

}  // namespace docsparse
