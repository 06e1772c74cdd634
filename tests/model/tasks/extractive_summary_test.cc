#include "model/tasks/extractive_summary.h"

#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include "model/encoder/pooling.h"
#include "model/tasks/zero_shot.h"

namespace docsparse {
namespace {

at::Tensor Rows(const std::vector<std::vector<float>>& rows) {
  std::vector<at::Tensor> tensors;
  for (const auto& row : rows) tensors.push_back(at::tensor(row));
  return L2Normalize(at::stack(tensors));
}

TEST(ExtractiveSummaryTest, PicksCentralThenDiverseInDocumentOrder) {
  c10::InferenceMode inference_mode;
  // Rows 0-2 are near the x axis (the bulk), row 3 a near-duplicate of 1,
  // row 4 points along y.
  const at::Tensor embeddings =
      Rows({{1, 0.1f, 0}, {1, 0, 0.05f}, {1, 0.05f, 0.1f}, {1, 0, 0.06f}, {0.2f, 1, 0}});
  const auto central = SelectSentences(embeddings, 1, 0.0f);
  ASSERT_EQ(central.size(), 1u);
  EXPECT_NE(central[0].index, 4);

  const auto diverse = SelectSentences(embeddings, 2, 0.9f);
  ASSERT_EQ(diverse.size(), 2u);
  EXPECT_LT(diverse[0].index, diverse[1].index);
  EXPECT_EQ(diverse[1].index, 4);  // the outlier is the most novel second pick
}

TEST(ExtractiveSummaryTest, CountLargerThanSentences) {
  c10::InferenceMode inference_mode;
  const auto picked = SelectSentences(Rows({{1, 0}, {0, 1}}), 5, 0.3f);
  ASSERT_EQ(picked.size(), 2u);
  EXPECT_EQ(picked[0].index, 0);
  EXPECT_EQ(picked[1].index, 1);
  EXPECT_TRUE(SelectSentences(at::empty({0, 2}), 3, 0.3f).empty());
}

TEST(ZeroShotTest, SoftmaxOverSimilarityWithTemperature) {
  c10::InferenceMode inference_mode;
  const at::Tensor labels = Rows({{1, 0}, {0, 1}});
  const at::Tensor document = Rows({{0.8f, 0.6f}})[0];
  const auto scores = ScoreLabels(document, labels, {"x", "y"}, 0.1f);
  ASSERT_EQ(scores.size(), 2u);
  EXPECT_EQ(scores[0].label, "x");
  EXPECT_NEAR(scores[0].similarity, 0.8, 1e-6);
  EXPECT_NEAR(scores[1].similarity, 0.6, 1e-6);
  // softmax([8, 6]) = 1 / (1 + e^-2)
  EXPECT_NEAR(scores[0].probability, 1.0 / (1.0 + std::exp(-2.0)), 1e-6);
  EXPECT_NEAR(scores[0].probability + scores[1].probability, 1.0, 1e-6);
}

TEST(ZeroShotTest, LabelPromptUsesDescriptionOrTemplate) {
  ZeroShotConfig config;
  config.hypothesis_template = "This text is about {}.";
  config.labels.push_back({"license", "A software license."});
  EXPECT_EQ(LabelPrompt("license", config), "A software license.");
  EXPECT_EQ(LabelPrompt("cooking", config), "This text is about cooking.");
}

}  // namespace
}  // namespace docsparse
