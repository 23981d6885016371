// ThreadSanitizer annotations for Debian's abseil, which is built without them: absl::Mutex,
// absl::CondVar and absl::Notification live in libabsl_synchronization.so, where TSan cannot see a
// lock taken or released, so every access guarded by an absl::Mutex would be reported as a race.
//
// Linked into every executable of a TSan build (cmake/TandemTsan.cmake), this file defines their
// entry points in the executable, which interpose on the shared library's (for calls from the
// library itself too): each calls the library's own function (dlsym(RTLD_NEXT)) and tells TSan
// what it did, as abseil does when it is built with TSan. Conditions evaluated inside the library
// (by a thread that is unlocking, on behalf of a waiter) are not checked: TSan would otherwise see
// them after the unlock.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

// In TSan's runtime, not in its public header.
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();

#define TANDEM_STR2(x) #x
#define TANDEM_STR(x) TANDEM_STR2(x)

namespace {

// The library's own definition of `suffix` (a mangled name after "_ZN4absl<ns>" or
// "_ZNK4absl<ns>").
template <typename F>
F Real(const char* prefix, const char* suffix) {
  const std::string ns = TANDEM_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name = std::string(prefix) + "4absl" + std::to_string(ns.size()) + ns + suffix;
  void* f = dlsym(RTLD_NEXT, name.c_str());
  if (f == nullptr) {
    std::fprintf(stderr, "tsan_absl_sync: %s not found\n", name.c_str());
    std::abort();
  }
  return reinterpret_cast<F>(f);
}

#define REAL(type, prefix, suffix) static const auto real = Real<type>(prefix, suffix)

// The library's entry points call one another (AwaitWithTimeout calls AwaitWithDeadline through
// the PLT, so it reaches the wrapper too): only the outermost call on a thread is annotated.
thread_local int tls_depth = 0;
class Outermost {
 public:
  Outermost() : outer_(tls_depth++ == 0) {}
  ~Outermost() { --tls_depth; }
  explicit operator bool() const { return outer_; }

 private:
  const bool outer_;
};

// The mutex is held before and after, released while waiting.
void AnnotateWaitBegin(void* mu) {
  __tsan_mutex_pre_unlock(mu, 0);
  __tsan_mutex_post_unlock(mu, 0);
}
void AnnotateWaitEnd(void* mu) {
  __tsan_mutex_pre_lock(mu, 0);
  __tsan_mutex_post_lock(mu, 0, 0);
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  REAL(void (*)(Mutex*), "_ZN", "5Mutex4LockEv");
  const Outermost outer;
  if (outer) __tsan_mutex_pre_lock(this, 0);
  real(this);
  if (outer) __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::Unlock() {
  REAL(void (*)(Mutex*), "_ZN", "5Mutex6UnlockEv");
  const Outermost outer;
  if (outer) __tsan_mutex_pre_unlock(this, 0);
  real(this);
  if (outer) __tsan_mutex_post_unlock(this, 0);
}

bool Mutex::TryLock() {
  REAL(bool (*)(Mutex*), "_ZN", "5Mutex7TryLockEv");
  const Outermost outer;
  if (outer) __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool locked = real(this);
  if (outer)
    __tsan_mutex_post_lock(this,
                           __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed), 0);
  return locked;
}

void Mutex::ReaderLock() {
  REAL(void (*)(Mutex*), "_ZN", "5Mutex10ReaderLockEv");
  const Outermost outer;
  if (outer) __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this);
  if (outer) __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

void Mutex::ReaderUnlock() {
  REAL(void (*)(Mutex*), "_ZN", "5Mutex12ReaderUnlockEv");
  const Outermost outer;
  if (outer) __tsan_mutex_pre_unlock(this, __tsan_mutex_read_lock);
  real(this);
  if (outer) __tsan_mutex_post_unlock(this, __tsan_mutex_read_lock);
}

bool Mutex::ReaderTryLock() {
  REAL(bool (*)(Mutex*), "_ZN", "5Mutex13ReaderTryLockEv");
  const Outermost outer;
  const unsigned flags = __tsan_mutex_read_lock | __tsan_mutex_try_lock;
  if (outer) __tsan_mutex_pre_lock(this, flags);
  const bool locked = real(this);
  if (outer) __tsan_mutex_post_lock(this, flags | (locked ? 0 : __tsan_mutex_try_lock_failed), 0);
  return locked;
}

void Mutex::LockWhen(const Condition& cond) {
  REAL(void (*)(Mutex*, const Condition&), "_ZN", "5Mutex8LockWhenERKNS0_9ConditionE");
  const Outermost outer;
  if (outer) __tsan_mutex_pre_lock(this, 0);
  real(this, cond);
  if (outer) __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  REAL(void (*)(Mutex*, const Condition&), "_ZN", "5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  const Outermost outer;
  if (outer) __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  real(this, cond);
  if (outer) __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  REAL(bool (*)(Mutex*, const Condition&, Duration), "_ZN",
       "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const Outermost outer;
  if (outer) __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, timeout);
  if (outer) __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  REAL(bool (*)(Mutex*, const Condition&, Time), "_ZN",
       "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const Outermost outer;
  if (outer) __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, deadline);
  if (outer) __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

bool Mutex::ReaderLockWhenWithTimeout(const Condition& cond, Duration timeout) {
  REAL(bool (*)(Mutex*, const Condition&, Duration), "_ZN",
       "5Mutex25ReaderLockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const Outermost outer;
  if (outer) __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  const bool met = real(this, cond, timeout);
  if (outer) __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
  return met;
}

bool Mutex::ReaderLockWhenWithDeadline(const Condition& cond, Time deadline) {
  REAL(bool (*)(Mutex*, const Condition&, Time), "_ZN",
       "5Mutex26ReaderLockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const Outermost outer;
  if (outer) __tsan_mutex_pre_lock(this, __tsan_mutex_read_lock);
  const bool met = real(this, cond, deadline);
  if (outer) __tsan_mutex_post_lock(this, __tsan_mutex_read_lock, 0);
  return met;
}

void Mutex::Await(const Condition& cond) {
  REAL(void (*)(Mutex*, const Condition&), "_ZN", "5Mutex5AwaitERKNS0_9ConditionE");
  const Outermost outer;
  if (outer) AnnotateWaitBegin(this);
  real(this, cond);
  if (outer) AnnotateWaitEnd(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  REAL(bool (*)(Mutex*, const Condition&, Duration), "_ZN",
       "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  const Outermost outer;
  if (outer) AnnotateWaitBegin(this);
  const bool met = real(this, cond, timeout);
  if (outer) AnnotateWaitEnd(this);
  return met;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  REAL(bool (*)(Mutex*, const Condition&, Time), "_ZN",
       "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  const Outermost outer;
  if (outer) AnnotateWaitBegin(this);
  const bool met = real(this, cond, deadline);
  if (outer) AnnotateWaitEnd(this);
  return met;
}

void CondVar::Wait(Mutex* mu) {
  REAL(void (*)(CondVar*, Mutex*), "_ZN", "7CondVar4WaitEPNS0_5MutexE");
  const Outermost outer;
  if (outer) AnnotateWaitBegin(mu);
  real(this, mu);
  if (outer) AnnotateWaitEnd(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  REAL(bool (*)(CondVar*, Mutex*, Duration), "_ZN",
       "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  const Outermost outer;
  if (outer) AnnotateWaitBegin(mu);
  const bool timed_out = real(this, mu, timeout);
  if (outer) AnnotateWaitEnd(mu);
  return timed_out;
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  REAL(bool (*)(CondVar*, Mutex*, Time), "_ZN",
       "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  const Outermost outer;
  if (outer) AnnotateWaitBegin(mu);
  const bool timed_out = real(this, mu, deadline);
  if (outer) AnnotateWaitEnd(mu);
  return timed_out;
}

bool Condition::Eval() const {
  REAL(bool (*)(const Condition*), "_ZNK", "9Condition4EvalEv");
  __tsan_ignore_thread_begin();
  const bool value = real(this);
  __tsan_ignore_thread_end();
  return value;
}

// notified_yet_ follows the mutex (notification.h). HasBeenNotified() reads it with an atomic
// acquire in the caller's (instrumented) code; the library's store is made visible to it here.
static_assert(sizeof(Notification) == sizeof(Mutex) + sizeof(void*));

void Notification::Notify() {
  REAL(void (*)(Notification*), "_ZN", "12Notification6NotifyEv");
  __tsan_release(reinterpret_cast<char*>(this) + sizeof(Mutex));
  real(this);
}

ABSL_NAMESPACE_END
}  // namespace absl
