#include "model/tasks/zero_shot.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>

namespace docsparse {

std::string LabelPrompt(const std::string& label, const ZeroShotConfig& config) {
  for (const ZeroShotLabel& known : config.labels) {
    if (known.name == label) return config.LabelText(known);
  }
  return config.LabelText(ZeroShotLabel{label, ""});
}

std::vector<LabelProbability> ScoreLabels(const at::Tensor& document, const at::Tensor& labels,
                                          const std::vector<std::string>& names,
                                          float temperature) {
  c10::InferenceMode inference_mode;
  at::Tensor similarity = at::mv(labels, document).contiguous();
  at::Tensor probability = at::softmax(similarity / temperature, 0).contiguous();
  std::vector<LabelProbability> scores;
  for (size_t i = 0; i < names.size(); ++i) {
    const int64_t row = static_cast<int64_t>(i);
    scores.push_back({names[i], probability[row].item<float>(), similarity[row].item<float>()});
  }
  std::stable_sort(scores.begin(), scores.end(),
                   [](const LabelProbability& a, const LabelProbability& b) {
                     return a.probability > b.probability;
                   });
  return scores;
}

}  // namespace docsparse
