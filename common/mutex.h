// absl::Mutex, absl::MutexLock and absl::CondVar as the server uses them,
// telling ThreadSanitizer the happens-before edges they make.
//
// Debian's Abseil is not built with TSan: its Mutex synchronizes through
// futexes and atomics of its own that TSan cannot see, so under
// `scripts/test --sanitize=thread` every structure guarded by an absl::Mutex
// looked racy (docs/RELIABILITY.md). These wrappers release the mutex's
// address to TSan before each unlock or wait and acquire it after each lock
// or wake-up, the edges an instrumented Abseil would report. In other builds
// the annotations compile to nothing and the methods are absl's, inline.
#ifndef DOCSPARSE_COMMON_MUTEX_H_
#define DOCSPARSE_COMMON_MUTEX_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#if defined(__SANITIZE_THREAD__)
#define DOCSPARSE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define DOCSPARSE_TSAN 1
#endif
#endif

#ifdef DOCSPARSE_TSAN
extern "C" void __tsan_acquire(void* address);
extern "C" void __tsan_release(void* address);
#endif

namespace docsparse {

class CondVar;

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_.Lock();
    Acquired();
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    Released();
    mu_.Unlock();
  }
  // Blocks until `condition` holds, then holds the mutex (absl::Mutex::LockWhen).
  // As Lock then Await, not absl's LockWhen: a thread unlocking the mutex
  // evaluates the waiters' conditions, and one that waits without ever
  // holding the mutex writes its condition with no edge to that thread, a
  // race TSan reported (MutexTest, about one run in two).
  void LockWhen(const absl::Condition& condition) ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    Lock();
    Await(condition);
  }
  // Releases the mutex until `condition` holds (absl::Mutex::Await). The
  // condition is written before the release, so that whoever evaluates it
  // (holding the mutex after this thread let it go) sees it written.
  void Await(const absl::Condition& condition) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    Annotated annotated{this, &condition};
    const absl::Condition evaluated = annotated.condition();
    Released();
    mu_.Await(evaluated);
    Acquired();
  }

 private:
  friend class CondVar;

  // absl evaluates a condition under the mutex, in the waiting thread or in
  // the one unlocking, before LockWhen or Await return, and when it is false
  // unlocks again inside absl: under TSan the evaluation acquires the edges
  // the guarded state was released with, and releases what it read to the
  // next holder.
  struct Annotated {
    Mutex* mu;
    const absl::Condition* user;

    static bool Evaluate(Annotated* self) {
      self->mu->Acquired();
      const bool holds = self->user->Eval();
      self->mu->Released();
      return holds;
    }
    absl::Condition condition() {
#ifdef DOCSPARSE_TSAN
      return absl::Condition(&Annotated::Evaluate, this);
#else
      return *user;
#endif
    }
  };

  void Acquired() {
#ifdef DOCSPARSE_TSAN
    __tsan_acquire(this);
#endif
  }
  void Released() {
#ifdef DOCSPARSE_TSAN
    __tsan_release(this);
#endif
  }

  absl::Mutex mu_;
};

// Holds `mu` for its scope; with a condition, from when it holds.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  MutexLock(Mutex* mu, const absl::Condition& condition) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu) {
    mu_->LockWhen(condition);
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class CondVar {
 public:
  // Releases `mu` while waiting for a Signal.
  void Wait(Mutex* mu) {
    mu->Released();
    cv_.Wait(&mu->mu_);
    mu->Acquired();
  }
  // Releases `mu` while waiting; true when the timeout passed first.
  bool WaitWithTimeout(Mutex* mu, absl::Duration timeout) {
    mu->Released();
    const bool timed_out = cv_.WaitWithTimeout(&mu->mu_, timeout);
    mu->Acquired();
    return timed_out;
  }
  void Signal() { cv_.Signal(); }
  void SignalAll() { cv_.SignalAll(); }

 private:
  absl::CondVar cv_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_COMMON_MUTEX_H_
