// Zero-shot classification by embedding similarity: the document embedding
// against one embedding per label, softmax over cosine similarity divided by
// a temperature.
#ifndef DOCSPARSE_MODEL_TASKS_ZERO_SHOT_H_
#define DOCSPARSE_MODEL_TASKS_ZERO_SHOT_H_

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "model/checkpoint/serving_config.h"

namespace docsparse {

struct LabelProbability {
  std::string label;
  float probability = 0;
  float similarity = 0;
};

// The text embedded for `label`: its description when the model's
// docsparse.json describes it, else the hypothesis template filled with it.
std::string LabelPrompt(const std::string& label, const ZeroShotConfig& config);

// document: [h] unit norm; labels: [n, h] unit norm rows, names[i] for row i.
// Returns the labels sorted by probability, best first.
std::vector<LabelProbability> ScoreLabels(const at::Tensor& document, const at::Tensor& labels,
                                          const std::vector<std::string>& names, float temperature);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_TASKS_ZERO_SHOT_H_
