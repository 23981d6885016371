// The device pool an NcclKvTransport moves KV out of (writer) and into (owner): registered once
// (RegisterDevicePool), then read by the writer's loop and the owner's receive loops.
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_NCCL_LOCAL_POOL_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_NCCL_LOCAL_POOL_H_

#include <cstddef>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace tandem::nccl_internal {

class NcclLocalPool {
 public:
  struct View {
    char* base = nullptr;  // null before registration
    size_t bytes = 0;
  };

  // FailedPrecondition when a pool is already set.
  absl::Status Set(char* base, size_t bytes) {
    absl::MutexLock lock(&mu_);
    if (view_.base != nullptr) return absl::FailedPreconditionError("pool already registered");
    view_ = {base, bytes};
    return absl::OkStatus();
  }

  View Get() const {
    absl::MutexLock lock(&mu_);
    return view_;
  }

 private:
  mutable absl::Mutex mu_;
  View view_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::nccl_internal

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_NCCL_LOCAL_POOL_H_
