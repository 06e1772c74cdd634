#include "server/inference_pool.h"

#include <gtest/gtest.h>

#include <atomic>

#include "absl/synchronization/notification.h"

namespace docsparse {
namespace {

TEST(InferencePoolTest, RunsEveryAcceptedJob) {
  std::atomic<int> ran{0};
  {
    InferencePool pool(2, 100);
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(pool.TrySubmit([&ran] { ++ran; }));
  }  // the destructor drains the queue
  EXPECT_EQ(ran.load(), 50);
}

TEST(InferencePoolTest, RefusesWorkWhenTheQueueIsFull) {
  absl::Notification release;
  absl::Notification started;
  InferencePool pool(1, 2);
  ASSERT_TRUE(pool.TrySubmit([&] {
    started.Notify();
    release.WaitForNotification();
  }));
  started.WaitForNotification();  // the worker is busy; the queue is empty
  EXPECT_TRUE(pool.TrySubmit([] {}));
  EXPECT_TRUE(pool.TrySubmit([] {}));
  EXPECT_EQ(pool.queue_depth(), 2u);
  EXPECT_FALSE(pool.TrySubmit([] {}));
  release.Notify();
}

}  // namespace
}  // namespace docsparse
