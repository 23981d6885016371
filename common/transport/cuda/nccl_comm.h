// What both sides of NcclKvTransport share: CUDA and NCCL results as Status, the current device
// for a scope, the polling backoff, and making and waiting on non-blocking communicators. Every
// NCCL call goes through the NcclApi table (nccl_api.h).
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_NCCL_COMM_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_NCCL_COMM_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/transport/cuda/nccl_api.h"

namespace tandem::nccl_internal {

// OK for cudaSuccess; Unavailable for no device or driver; Internal otherwise.
absl::Status CudaError(cudaError_t error, std::string_view what);

// OK for ncclSuccess; Unavailable for remote and system errors; InvalidArgument for invalid
// arguments and usage; Internal otherwise.
absl::Status NcclError(const NcclApi& nccl, ncclResult_t r, std::string_view what);

// Makes `device` current for the guard's lifetime and restores the caller's device after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int device_;
  int previous_ = -1;
};

// Sleeps a little longer the longer nothing happened: quick answers while busy, little CPU idle.
class Backoff {
 public:
  explicit Backoff(absl::Duration first) : first_(first) {}
  void Wait();

 private:
  absl::Duration first_;
  int spins_ = 0;
};

// Waits while a non-blocking communicator is still busy with its last call. OK when done;
// the communicator's error; DeadlineExceeded at `deadline`; Cancelled when `stop` turns true.
absl::Status WaitComm(const NcclApi& nccl, ncclComm_t comm, absl::Time deadline,
                      const std::atomic<bool>* stop, absl::Duration poll, std::string_view what);

// An NCCL call on a non-blocking communicator: its immediate result `r`, then the wait.
absl::Status CallComm(const NcclApi& nccl, ncclResult_t r, ncclComm_t comm, absl::Time deadline,
                      const std::atomic<bool>* stop, absl::Duration poll, std::string_view what);

// Makes a communicator of 2 ranks (non-blocking) and waits until it is ready; aborts it on failure.
absl::StatusOr<ncclComm_t> InitComm(const NcclApi& nccl, const ncclUniqueId& id, int rank,
                                    absl::Time deadline, const std::atomic<bool>* stop,
                                    absl::Duration poll);

}  // namespace tandem::nccl_internal

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_NCCL_COMM_H_
