#include "common/transport/cuda/nccl_comm.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace tandem::nccl_internal {

absl::Status CudaError(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  std::string message = absl::StrCat(std::string(what), ": CUDA error ", cudaGetErrorName(error),
                                     " (", cudaGetErrorString(error), ")");
  if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver) {
    return absl::UnavailableError(message);
  }
  return absl::InternalError(message);
}

absl::Status NcclError(const NcclApi& nccl, ncclResult_t r, std::string_view what) {
  if (r == ncclSuccess) return absl::OkStatus();
  std::string message = absl::StrCat(std::string(what), ": NCCL error ", static_cast<int>(r), " (",
                                     nccl.GetErrorString(r), ")");
  if (r == ncclRemoteError || r == ncclSystemError) return absl::UnavailableError(message);
  if (r == ncclInvalidArgument || r == ncclInvalidUsage) return absl::InvalidArgumentError(message);
  return absl::InternalError(message);
}

DeviceGuard::DeviceGuard(int device) : device_(device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
  if (previous_ != device_) cudaSetDevice(device_);
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0 && previous_ != device_) cudaSetDevice(previous_);
}

void Backoff::Wait() {
  const absl::Duration d = std::min(absl::Milliseconds(1), first_ * (1 << std::min(spins_, 6)));
  ++spins_;
  absl::SleepFor(d);
}

absl::Status WaitComm(const NcclApi& nccl, ncclComm_t comm, absl::Time deadline,
                      const std::atomic<bool>* stop, absl::Duration poll, std::string_view what) {
  Backoff backoff(poll);
  while (true) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = nccl.CommGetAsyncError(comm, &state);
    if (r != ncclSuccess) return NcclError(nccl, r, what);
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) return NcclError(nccl, state, what);
    if (stop != nullptr && stop->load()) return absl::CancelledError("nccl transport stopped");
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(std::string(what), ": timed out"));
    }
    backoff.Wait();
  }
}

absl::Status CallComm(const NcclApi& nccl, ncclResult_t r, ncclComm_t comm, absl::Time deadline,
                      const std::atomic<bool>* stop, absl::Duration poll, std::string_view what) {
  if (r != ncclSuccess && r != ncclInProgress) return NcclError(nccl, r, what);
  return WaitComm(nccl, comm, deadline, stop, poll, what);
}

absl::StatusOr<ncclComm_t> InitComm(const NcclApi& nccl, const ncclUniqueId& id, int rank,
                                    absl::Time deadline, const std::atomic<bool>* stop,
                                    absl::Duration poll) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = nccl.CommInitRankConfig(&comm, 2, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (comm != nullptr) nccl.CommAbort(comm);
    return NcclError(nccl, r, "ncclCommInitRankConfig");
  }
  absl::Status s = WaitComm(nccl, comm, deadline, stop, poll, "ncclCommInitRankConfig");
  if (!s.ok()) {
    nccl.CommAbort(comm);
    return s;
  }
  return comm;
}

}  // namespace tandem::nccl_internal
