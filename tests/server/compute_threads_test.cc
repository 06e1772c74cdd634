#include "server/compute_threads.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"

namespace docsparse {
namespace {

TEST(ComputeThreadsTest, TasksFromManyThreadsAllRunOnTheOneComputeThreadByDefault) {
  ComputeThreads compute;
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

TEST(ComputeThreadsTest, RunReturnsOnlyOnceTheTaskHasFinished) {
  ComputeThreads compute;
  int value = 0;
  compute.Run([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    value = 42;
  });
  EXPECT_EQ(value, 42);
}

TEST(ComputeThreadsTest, RunFromTheComputeThreadRunsInPlace) {
  ComputeThreads compute;
  std::thread::id outer, inner;
  compute.Run([&] {
    outer = std::this_thread::get_id();
    compute.Run([&] { inner = std::this_thread::get_id(); });  // would deadlock if queued
  });
  EXPECT_EQ(outer, inner);
}

// A long task (a summary decoding) lets a task queued meanwhile run at its
// next step instead of after it.
TEST(ComputeThreadsTest, ALongTaskLetsWaitingTasksRunBetweenItsSteps) {
  ComputeThreads compute;
  absl::Notification long_task_started;
  std::atomic<bool> short_task_done{false};
  std::atomic<int> steps_after_short_task{-1};
  auto long_task = std::async(std::launch::async, [&] {
    compute.Run([&] {
      long_task_started.Notify();
      for (int step = 0; step < 200; ++step) {
        ComputeThreads::RunWaitingTasks();
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

// With a second thread free, a long task leaves what is queued to it rather
// than running it between its own steps (here steps with no pause: without
// the rule the long task would often win the race for the queue).
TEST(ComputeThreadsTest, ALongTaskLeavesWaitingTasksToAnIdleThread) {
  for (int attempt = 0; attempt < 20; ++attempt) {
    ComputeThreads compute(2);
    compute.RunOnEach([] {});  // both threads started
    absl::Notification long_task_started, short_task_done;
    std::thread::id long_thread, short_thread;
    auto long_task = std::async(std::launch::async, [&] {
      compute.Run([&] {
        long_thread = std::this_thread::get_id();
        // Time for the other thread to be back waiting for work.
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        long_task_started.Notify();
        while (!short_task_done.HasBeenNotified()) ComputeThreads::RunWaitingTasks();
      });
    });
    long_task_started.WaitForNotification();
    compute.Run([&] {
      short_thread = std::this_thread::get_id();
      short_task_done.Notify();
    });
    long_task.get();
    ASSERT_NE(short_thread, long_thread) << "attempt " << attempt;
  }
}

TEST(ComputeThreadsTest, RunWaitingTasksOffTheComputeThreadDoesNothing) {
  ComputeThreads compute;
  ComputeThreads::RunWaitingTasks();  // a test's own thread: returns at once
  bool ran = false;
  compute.Run([&] { ran = true; });
  EXPECT_TRUE(ran);
}

// Each task waits until `count` tasks have started (or a second passes):
// true when all did, i.e. they ran at once.
bool RunAtOnce(ComputeThreads& compute, int count) {
  std::mutex mu;
  std::condition_variable all_started;
  int started = 0;
  std::atomic<int> saw_all{0};
  std::vector<std::thread> callers;
  for (int i = 0; i < count; ++i) {
    callers.emplace_back([&] {
      compute.Run([&] {
        std::unique_lock<std::mutex> lock(mu);
        ++started;
        all_started.notify_all();
        if (all_started.wait_for(lock, std::chrono::seconds(1), [&] { return started == count; })) {
          ++saw_all;
        }
      });
    });
  }
  for (std::thread& caller : callers) caller.join();
  return saw_all == count;
}

TEST(ComputeThreadsTest, TwoThreadsRunTwoTasksAtOnce) {
  ComputeThreads two(2);
  EXPECT_EQ(two.size(), 2);
  EXPECT_TRUE(RunAtOnce(two, 2));
  ComputeThreads one(1);
  EXPECT_FALSE(RunAtOnce(one, 2));  // the second waits for the first
}

TEST(ComputeThreadsTest, SetupRunsOnceOnEveryThreadBeforeItsTasks) {
  static thread_local int set_up = 0;
  std::atomic<int> setups{0};
  auto compute = std::make_unique<ComputeThreads>(3, [&] {
    ++set_up;
    ++setups;
  });
  std::mutex mu;
  std::set<int> seen;
  std::vector<std::thread> callers;
  for (int i = 0; i < 8; ++i) {
    callers.emplace_back([&] {
      for (int j = 0; j < 10; ++j) {
        compute->Run([&] {
          std::lock_guard<std::mutex> lock(mu);
          seen.insert(set_up);
        });
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
  compute.reset();  // joins: every thread has started
  EXPECT_EQ(seen, std::set<int>{1});
  EXPECT_EQ(setups.load(), 3);
}

TEST(ComputeThreadsTest, RunOnEachRunsOnceOnEveryThread) {
  ComputeThreads compute(3);
  std::mutex mu;
  std::multiset<std::thread::id> ran_on;
  compute.RunOnEach([&] {
    std::lock_guard<std::mutex> lock(mu);
    ran_on.insert(std::this_thread::get_id());
  });
  ASSERT_EQ(ran_on.size(), 3u);
  EXPECT_EQ(std::set<std::thread::id>(ran_on.begin(), ran_on.end()).size(), 3u);
  EXPECT_EQ(ran_on.count(std::this_thread::get_id()), 0u);
}

TEST(LayOutComputeTest, OneInstanceOnTheCpuTwoOnAGpuThreadsDividedAmongThem) {
  struct Case {
    int instances_flag, threads_flag;
    bool gpu;
    int cores;
    ComputeLayout expected;
  };
  const Case cases[] = {
      {0, 0, false, 8, {1, 8}},   // the CPU's default: one instance, every core
      {0, 16, true, 32, {2, 8}},  // a GPU's default: two, --threads shared
      {2, 0, false, 2, {2, 1}},
      {4, 3, false, 2, {4, 1}},  // more instances than threads: one each, not none
  };
  for (const Case& c : cases) {
    const absl::StatusOr<ComputeLayout> layout =
        LayOutCompute(c.instances_flag, c.threads_flag, c.gpu, c.cores);
    ASSERT_TRUE(layout.ok()) << layout.status();
    EXPECT_EQ(layout->instances, c.expected.instances) << c.instances_flag;
    EXPECT_EQ(layout->threads_per_instance, c.expected.threads_per_instance) << c.instances_flag;
  }
}

TEST(LayOutComputeTest, RefusesACountOutsideItsRangeNamingTheFlag) {
  for (int bad : {-1, kMaxInstances + 1}) {
    absl::StatusOr<ComputeLayout> layout = LayOutCompute(bad, 0, false, 2);
    ASSERT_FALSE(layout.ok()) << bad;
    EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(layout.status().message().find("--instances: " + std::to_string(bad)),
              std::string::npos)
        << layout.status().message();
  }
}

}  // namespace
}  // namespace docsparse
