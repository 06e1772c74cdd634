#include "server/shared_label_rows.h"

#include <gtest/gtest.h>

#include <vector>

namespace docsparse {
namespace {

TEST(SharedLabelRowsTest, WaitersBeforeAndAfterPublishGetTheRows) {
  SharedLabelRows shared;
  std::vector<float> seen;
  const auto record = [&seen](const absl::StatusOr<at::Tensor>& rows) {
    ASSERT_TRUE(rows.ok()) << rows.status();
    seen.push_back(rows->sum().item<float>());
  };
  shared.WhenReady(record);
  shared.WhenReady(record);
  EXPECT_TRUE(seen.empty());
  shared.Publish(at::ones({2, 3}, at::kFloat));
  EXPECT_EQ(seen, (std::vector<float>{6, 6}));
  shared.WhenReady(record);
  EXPECT_EQ(seen.size(), 3u);
  // A second publication changes nothing.
  shared.Publish(at::zeros({2, 3}, at::kFloat));
  shared.WhenReady(record);
  EXPECT_EQ(seen.back(), 6);
}

TEST(SharedLabelRowsTest, AnErrorReachesEveryWaiter) {
  SharedLabelRows shared;
  int errors = 0;
  const auto record = [&errors](const absl::StatusOr<at::Tensor>& rows) {
    EXPECT_EQ(rows.status().code(), absl::StatusCode::kCancelled);
    ++errors;
  };
  shared.WhenReady(record);
  shared.Publish(absl::CancelledError("client cancelled while queued"));
  shared.WhenReady(record);
  EXPECT_EQ(errors, 2);
}

}  // namespace
}  // namespace docsparse
