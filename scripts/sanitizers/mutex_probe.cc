// Shows that common/mutex.h makes TSan results mean something with Debian's
// uninstrumented Abseil (docs/RELIABILITY.md, "Sanitizers"). Not part of the
// build; compile and run by hand:
//
//   g++ -std=c++17 -O1 -g -fsanitize=thread -I. scripts/sanitizers/mutex_probe.cc \
//       -o /tmp/mutex_probe -labsl_synchronization -labsl_time -labsl_base -lpthread
//   for mode in wrapped absl unlocked await; do /tmp/mutex_probe $mode; done
//
// wrapped:  two threads increment under docsparse::Mutex: no report expected.
// absl:     the same under absl::Mutex itself: TSan reports a race that is not
//           one (it cannot see Debian's Abseil synchronize).
// unlocked: one thread skips the lock: a real race, which TSan must report.
// await:    a waiter Awaits a flag set under the lock, then reads what was
//           written before it: no report expected.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "common/mutex.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: mutex_probe wrapped|absl|unlocked|await\n");
    return 2;
  }
  const char* mode = argv[1];
  docsparse::Mutex mu;
  absl::Mutex amu;
  long x = 0;
  bool ready = false;
  long data = 0;
  auto body = [&](bool skip) {
    for (int i = 0; i < 100000; ++i) {
      if (!strcmp(mode, "absl")) {
        absl::MutexLock l(&amu);
        ++x;
      } else if (skip) {
        ++x;
      } else {
        docsparse::MutexLock l(&mu);
        ++x;
      }
    }
  };
  if (!strcmp(mode, "await")) {
    std::thread waiter([&] {
      docsparse::MutexLock l(&mu);
      mu.Await(absl::Condition(&ready));
      x = data;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    {
      docsparse::MutexLock l(&mu);
      data = 42;
      ready = true;
    }
    waiter.join();
  } else {
    std::thread a([&] { body(false); });
    std::thread b([&] { body(!strcmp(mode, "unlocked")); });
    a.join();
    b.join();
  }
  std::printf("%s done %ld\n", mode, x);
}
