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

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/layer_boundary.h"

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

// Two compute threads sharing two cores, whose first widens a lone task to
// both; each thread's width is what set_threads last gave it.
struct WideningCompute {
  WideningCompute() {
    LoneTaskWidening widening;
    widening.shared = 1;
    widening.lone = 2;
    widening.set_threads = [](int threads) { width = threads; };
    compute = std::make_unique<ComputeThreads>(2, nullptr, widening);
  }
  static thread_local int width;
  std::unique_ptr<ComputeThreads> compute;
};
thread_local int WideningCompute::width = 0;

TEST(ComputeThreadsTest, ALoneTaskGetsEveryThreadTasksQueuedTogetherAShareEach) {
  WideningCompute c;
  int lone_width = 0;
  c.compute->Run([&] { lone_width = WideningCompute::width; });
  EXPECT_EQ(lone_width, 2);
  // RunOnEach queues a task per thread at once (the server's per-instance
  // warm-up): none is alone, each at its instance's share.
  std::mutex mu;
  std::vector<int> widths;
  c.compute->RunOnEach([&] {
    std::lock_guard<std::mutex> lock(mu);
    widths.push_back(WideningCompute::width);
  });
  EXPECT_EQ(widths, (std::vector<int>{1, 1}));
  c.compute->Run([&] { lone_width = WideningCompute::width; });
  EXPECT_EQ(lone_width, 2);
}

TEST(ComputeThreadsTest, AWaitingTaskWaitsForALoneTaskThatGivesNothingBack) {
  WideningCompute c;
  absl::Notification lone_started, second_queued;
  std::atomic<bool> lone_done{false};
  std::atomic<bool> second_saw_lone_done{false};
  auto lone = std::async(std::launch::async, [&] {
    c.compute->Run([&] {
      lone_started.Notify();
      second_queued.WaitForNotificationWithTimeout(absl::Seconds(2));
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      lone_done = true;
    });
  });
  lone_started.WaitForNotification();
  auto second = std::async(std::launch::async, [&] {
    c.compute->Run([&] { second_saw_lone_done = lone_done.load(); });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // queued by now
  second_queued.Notify();
  lone.get();
  second.get();
  EXPECT_TRUE(second_saw_lone_done) << "the second task ran beside the lone one on borrowed cores";
}

TEST(ComputeThreadsTest, ALoneTaskGivesItsCoresBackAtALayerBoundaryAndTakesThemAgainWhenAlone) {
  WideningCompute c;
  absl::Notification lone_started, second_ran;
  std::vector<int> lone_widths;
  std::thread::id lone_thread, second_thread;
  auto lone = std::async(std::launch::async, [&] {
    c.compute->Run([&] {
      lone_thread = std::this_thread::get_id();
      lone_widths.push_back(WideningCompute::width);
      lone_started.Notify();
      // Layer after layer until the waiting task has run beside this one
      // and this one is wide again.
      for (int layer = 0; layer < 400; ++layer) {
        AtLayerBoundary();
        lone_widths.push_back(WideningCompute::width);
        if (second_ran.HasBeenNotified() && lone_widths.back() == 2) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    });
  });
  lone_started.WaitForNotification();
  int second_width = 0;
  c.compute->Run([&] {
    second_thread = std::this_thread::get_id();
    second_width = WideningCompute::width;
    second_ran.Notify();
  });
  lone.get();
  EXPECT_NE(second_thread, lone_thread);
  EXPECT_EQ(second_width, 1);
  // Wide, then narrow while the second ran, then wide again.
  std::vector<int> changes;
  for (const int width : lone_widths) {
    if (changes.empty() || changes.back() != width) changes.push_back(width);
  }
  EXPECT_EQ(changes, (std::vector<int>{2, 1, 2}));
  // And the next lone task widens from the start.
  int next_width = 0;
  c.compute->Run([&] { next_width = WideningCompute::width; });
  EXPECT_EQ(next_width, 2);
}

TEST(ComputeThreadsTest, WithoutWideningNoThreadCountIsEverSet) {
  std::atomic<int> calls{0};
  LoneTaskWidening off;
  off.shared = 2;
  off.lone = 2;  // not wider: off
  off.set_threads = [&](int) { ++calls; };
  ComputeThreads compute(2, nullptr, off);
  for (int i = 0; i < 5; ++i) compute.Run([] {});
  EXPECT_TRUE(RunAtOnce(compute, 2));
  EXPECT_EQ(calls.load(), 0);
}

TEST(LayOutComputeTest, TwoInstancesThreadsDividedAmongThemALoneBatchWidenedOnTheCpu) {
  struct Case {
    int instances_flag, threads_flag;
    bool gpu;
    int cores;
    bool widen;
    ComputeLayout expected;
  };
  const Case cases[] = {
      {0, 0, false, 8, true, {2, 4, 8}},   // the CPU's default: two, a lone batch on all
      {0, 0, false, 1, true, {1, 1, 1}},   // one core: one instance
      {0, 0, false, 8, false, {1, 8, 8}},  // no widening: one instance, every core
      {0, 16, true, 32, true, {2, 8, 8}},  // a GPU's default: two, --threads shared, no widening
      {2, 0, false, 2, false, {2, 1, 1}},  // two strict instances
      {3, 8, false, 2, true, {3, 2, 8}},   // --threads, not the cores
      {4, 3, false, 2, true, {4, 1, 3}},   // more instances than threads: one each, not none
      {1, 0, false, 4, true, {1, 4, 4}},   // one instance has nothing to widen
  };
  for (const Case& c : cases) {
    const absl::StatusOr<ComputeLayout> layout =
        LayOutCompute(c.instances_flag, c.threads_flag, c.gpu, c.cores, c.widen);
    ASSERT_TRUE(layout.ok()) << layout.status();
    const std::string which =
        absl::StrCat(c.instances_flag, " ", c.threads_flag, " ", c.gpu, " ", c.cores, " ", c.widen);
    EXPECT_EQ(layout->instances, c.expected.instances) << which;
    EXPECT_EQ(layout->threads_per_instance, c.expected.threads_per_instance) << which;
    EXPECT_EQ(layout->lone_batch_threads, c.expected.lone_batch_threads) << which;
  }
}

TEST(LayOutComputeTest, RefusesACountOutsideItsRangeNamingTheFlag) {
  for (int bad : {-1, kMaxInstances + 1}) {
    absl::StatusOr<ComputeLayout> layout = LayOutCompute(bad, 0, false, 2, true);
    ASSERT_FALSE(layout.ok()) << bad;
    EXPECT_EQ(layout.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(layout.status().message().find("--instances: " + std::to_string(bad)),
              std::string::npos)
        << layout.status().message();
  }
}

}  // namespace
}  // namespace docsparse
