#include "server/compute_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"

namespace docsparse {
namespace {

TEST(ComputeThreadTest, TasksFromManyThreadsAllRunOnTheOneComputeThread) {
  ComputeThread compute;
  std::mutex mu;
  std::set<std::thread::id> ran_on;
  std::vector<std::thread> callers;
  for (int i = 0; i < 6; ++i) {
    callers.emplace_back([&] {
      for (int j = 0; j < 20; ++j) {
        compute.Run([&] {
          std::lock_guard<std::mutex> lock(mu);
          ran_on.insert(std::this_thread::get_id());
        });
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  ASSERT_EQ(ran_on.size(), 1u);
  EXPECT_NE(*ran_on.begin(), std::this_thread::get_id());
}

TEST(ComputeThreadTest, RunReturnsOnlyOnceTheTaskHasFinished) {
  ComputeThread compute;
  int value = 0;
  compute.Run([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    value = 42;
  });
  EXPECT_EQ(value, 42);
}

TEST(ComputeThreadTest, RunFromTheComputeThreadRunsInPlace) {
  ComputeThread compute;
  std::thread::id outer, inner;
  compute.Run([&] {
    outer = std::this_thread::get_id();
    compute.Run([&] { inner = std::this_thread::get_id(); });  // would deadlock if queued
  });
  EXPECT_EQ(outer, inner);
}

// A long task (a summary decoding) lets a task queued meanwhile run at its
// next step instead of after it.
TEST(ComputeThreadTest, ALongTaskLetsWaitingTasksRunBetweenItsSteps) {
  ComputeThread compute;
  absl::Notification long_task_started;
  std::atomic<bool> short_task_done{false};
  std::atomic<int> steps_after_short_task{-1};
  auto long_task = std::async(std::launch::async, [&] {
    compute.Run([&] {
      long_task_started.Notify();
      for (int step = 0; step < 200; ++step) {
        ComputeThread::RunWaitingTasks();
        if (short_task_done && steps_after_short_task < 0) steps_after_short_task = 200 - step;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
  });
  long_task_started.WaitForNotification();
  compute.Run([&] { short_task_done = true; });
  long_task.get();
  // The short task finished while the long one still had most of its steps.
  EXPECT_GT(steps_after_short_task.load(), 100);
}

TEST(ComputeThreadTest, RunWaitingTasksOffTheComputeThreadDoesNothing) {
  ComputeThread compute;
  ComputeThread::RunWaitingTasks();  // a test's own thread: returns at once
  bool ran = false;
  compute.Run([&] { ran = true; });
  EXPECT_TRUE(ran);
}

}  // namespace
}  // namespace docsparse
