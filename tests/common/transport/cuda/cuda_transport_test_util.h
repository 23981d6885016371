// Helpers for the device-pool transport tests: one operation's outcome, an owner's notices, and a
// CudaKvTransport over a chosen inner transport with the host-memory copier standing in for a GPU.
#ifndef TANDEM_TESTS_COMMON_TRANSPORT_CUDA_CUDA_TRANSPORT_TEST_UTIL_H_
#define TANDEM_TESTS_COMMON_TRANSPORT_CUDA_CUDA_TRANSPORT_TEST_UTIL_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/transport/kv_transport.h"

namespace tandem::testing {

// Collects one operation's outcome.
class Result {
 public:
  TransferDone Callback() {
    return [this](absl::Status s) {
      absl::MutexLock lock(&mu_);
      ++calls_;
      status_ = s;
      at_ = absl::Now();
    };
  }
  // Waits for the callback; false on timeout.
  bool Wait(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto called = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return calls_ > 0; };
    return mu_.AwaitWithTimeout(absl::Condition(&called), timeout);
  }
  absl::Status status() {
    absl::MutexLock lock(&mu_);
    return status_;
  }
  int calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  absl::Time at() {
    absl::MutexLock lock(&mu_);
    return at_;
  }

 private:
  absl::Mutex mu_;
  int calls_ = 0;
  absl::Status status_;
  absl::Time at_;
};

// Notices received by an owner; `also` runs first, on the transport's thread.
class Inbox {
 public:
  NoticeHandler Handler(std::function<void(std::string_view)> also = nullptr) {
    return [this, also](std::string_view payload) {
      if (also) also(payload);
      absl::MutexLock lock(&mu_);
      payloads_.emplace_back(payload);
    };
  }
  bool WaitFor(size_t n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return payloads_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
  }
  std::vector<std::string> payloads() {
    absl::MutexLock lock(&mu_);
    return payloads_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> payloads_;
};

inline KvTarget TargetOf(const KvTransport& owner) {
  return KvTarget{owner.address(), owner.pool_remote_key(), owner.pool_base(), owner.incarnation()};
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_COMMON_TRANSPORT_CUDA_CUDA_TRANSPORT_TEST_UTIL_H_
