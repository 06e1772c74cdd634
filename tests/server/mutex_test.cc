// common/mutex.h: the wrappers behave as absl's (lock, LockWhen, Await,
// CondVar waits and timeouts). Under `scripts/test --sanitize=thread` they
// also run with their TSan annotations, where a missing edge would be
// reported as a race on the guarded values below.
#include "common/mutex.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace docsparse {
namespace {

TEST(MutexTest, AwaitSeesWhatWasWrittenBeforeTheConditionHeld) {
  Mutex mu;
  bool ready = false;
  int data = 0;
  int seen = -1;
  std::thread waiter([&] {
    MutexLock lock(&mu);
    mu.Await(absl::Condition(&ready));
    seen = data;
  });
  {
    MutexLock lock(&mu);
    data = 42;
    ready = true;
  }
  waiter.join();
  EXPECT_EQ(seen, 42);
}

TEST(MutexTest, LockWhenHoldsOnceTheConditionHolds) {
  Mutex mu;
  int count = 0;
  std::vector<std::thread> adders;
  for (int t = 0; t < 4; ++t) {
    adders.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        MutexLock lock(&mu);
        ++count;
      }
    });
  }
  const auto all_added = [&count] { return count == 4000; };
  {
    MutexLock lock(&mu, absl::Condition(&all_added));
    EXPECT_EQ(count, 4000);
  }
  for (std::thread& adder : adders) adder.join();
}

TEST(MutexTest, CondVarWakesOnSignalAndTimesOut) {
  Mutex mu;
  CondVar cv;
  bool flag = false;
  {
    MutexLock lock(&mu);
    EXPECT_TRUE(cv.WaitWithTimeout(&mu, absl::Milliseconds(5)));  // nobody signals
  }
  std::thread signaller([&] {
    MutexLock lock(&mu);
    flag = true;
    cv.Signal();
  });
  {
    MutexLock lock(&mu);
    while (!flag) cv.Wait(&mu);
    EXPECT_TRUE(flag);
  }
  signaller.join();
}

}  // namespace
}  // namespace docsparse
