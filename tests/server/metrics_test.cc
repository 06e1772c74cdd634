#include "server/metrics.h"

#include <gtest/gtest.h>

namespace docsparse {
namespace {

TEST(MetricsTest, RendersCountersWithEscapedLabels) {
  Metrics metrics;
  metrics.CountRequest("mini\"lm", "embed", "OK");
  metrics.CountRequest("mini\"lm", "embed", "OK");
  metrics.CountRequest("m", "classify", "NOT_FOUND");
  metrics.SetModelLoadSeconds("m", 1.5);
  const std::string text = metrics.Render();
  EXPECT_NE(
      text.find("docsparse_requests_total{model=\"mini\\\"lm\",task=\"embed\",code=\"OK\"} 2\n"),
      std::string::npos)
      << text;
  EXPECT_NE(
      text.find("docsparse_requests_total{model=\"m\",task=\"classify\",code=\"NOT_FOUND\"} 1"),
      std::string::npos);
  EXPECT_NE(text.find("# TYPE docsparse_requests_total counter"), std::string::npos);
  EXPECT_NE(text.find("docsparse_model_load_seconds{model=\"m\"} 1.500000"), std::string::npos);
}

TEST(MetricsTest, EscapeLabelValue) {
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
}

}  // namespace
}  // namespace docsparse
