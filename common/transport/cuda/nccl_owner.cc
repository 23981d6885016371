#include "common/transport/cuda/nccl_owner.h"

#include <cuda_runtime_api.h>

#include <cstring>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/transport/cuda/nccl_comm.h"
#include "common/transport/cuda/nccl_frame.h"
#include "spdlog/spdlog.h"

namespace tandem::nccl_internal {

NcclOwner::NcclOwner(const NcclApi& nccl, const NcclKvTransportOptions& options,
                     const NcclLocalPool& pool)
    : nccl_(nccl), options_(options), pool_(pool) {}

void NcclOwner::SetNoticeHandler(NoticeHandler handler) {
  absl::MutexLock lock(&handler_mu_);
  handler_ = std::move(handler);
}

void NcclOwner::Shutdown() {
  std::vector<std::unique_ptr<Receiver>> receivers;
  {
    absl::MutexLock lock(&receivers_mu_);
    stop_receivers_ = true;
    receivers.swap(receivers_);
  }
  for (auto& r : receivers) r->stop.store(true);
  for (auto& r : receivers) r->thread.join();
}

absl::Status NcclOwner::AcceptConnection(std::string_view unique_id, uint64_t writer_incarnation) {
  if (unique_id.size() != sizeof(ncclUniqueId)) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL unique id of ", unique_id.size(),
                                                   " bytes, expected ", sizeof(ncclUniqueId)));
  }
  if (pool_.Get().base == nullptr) {
    return absl::FailedPreconditionError("nccl transport: no pool registered");
  }
  auto receiver = std::make_unique<Receiver>();
  receiver->writer_incarnation = writer_incarnation;
  std::memcpy(&receiver->id, unique_id.data(), sizeof(ncclUniqueId));
  std::vector<std::unique_ptr<Receiver>> old;
  {
    absl::MutexLock lock(&receivers_mu_);
    if (stop_receivers_) return absl::CancelledError("nccl transport stopped");
    for (auto it = receivers_.begin(); it != receivers_.end();) {
      if ((*it)->writer_incarnation == writer_incarnation || (*it)->finished.load()) {
        (*it)->stop.store(true);
        old.push_back(std::move(*it));
        it = receivers_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& r : old) r->thread.join();
  // Started and listed under one lock, after checking again for a Shutdown that came while the old
  // receivers were joined: a receiver Shutdown does not see would never be joined.
  absl::MutexLock lock(&receivers_mu_);
  if (stop_receivers_) return absl::CancelledError("nccl transport stopped");
  Receiver* raw = receiver.get();
  raw->thread = std::thread([this, raw] { ReceiveLoop(raw); });
  receivers_.push_back(std::move(receiver));
  return absl::OkStatus();
}

int NcclOwner::num_connections() const {
  absl::MutexLock lock(&receivers_mu_);
  int n = 0;
  for (const auto& r : receivers_) n += r->finished.load() ? 0 : 1;
  return n;
}

void NcclOwner::ReceiveLoop(Receiver* r) {
  cudaSetDevice(options_.cuda_device);
  const std::string tag = absl::StrCat("writer ", absl::Hex(r->writer_incarnation));
  absl::Status s = RunReceiver(r, tag);
  if (!s.ok() && s.code() != absl::StatusCode::kCancelled) {
    spdlog::warn("nccl transport: receiving from {} ended: {}", tag, s.ToString());
  }
  r->finished.store(true);
}

absl::Status NcclOwner::RunReceiver(Receiver* r, const std::string& tag) {
  const NcclLocalPool::View local = pool_.Get();
  char* const pool = local.base;
  const size_t pool_bytes = local.bytes;
  const absl::Duration poll = options_.poll_interval;
  absl::StatusOr<ncclComm_t> comm =
      InitComm(nccl_, r->id, 1, absl::Now() + options_.connect_timeout, &r->stop, poll);
  if (!comm.ok()) return comm.status();
  spdlog::info("nccl transport: {} connected", tag);
  cudaStream_t stream = nullptr;
  char* device_frame = nullptr;
  char* host_frame = nullptr;
  cudaEvent_t event = nullptr;
  absl::Status s = CudaError(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                             "cudaStreamCreateWithFlags");
  if (s.ok()) {
    s = CudaError(cudaMalloc(reinterpret_cast<void**>(&device_frame), options_.frame_bytes),
                  "cudaMalloc of a frame");
  }
  if (s.ok()) {
    s = CudaError(cudaHostAlloc(reinterpret_cast<void**>(&host_frame), options_.frame_bytes,
                                cudaHostAllocDefault),
                  "cudaHostAlloc of a frame");
  }
  if (s.ok()) {
    s = CudaError(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  }
  uint64_t sequence = 0;
  const absl::Time forever = absl::InfiniteFuture();
  while (s.ok()) {
    s = CallComm(nccl_, nccl_.Recv(device_frame, options_.frame_bytes, ncclUint8, 0, *comm, stream),
                 *comm, forever, &r->stop, poll, "ncclRecv of a frame");
    if (!s.ok()) break;
    s = CudaError(cudaMemcpyAsync(host_frame, device_frame, options_.frame_bytes,
                                  cudaMemcpyDeviceToHost, stream),
                  "cudaMemcpyAsync of a frame");
    if (s.ok()) s = CudaError(cudaEventRecord(event, stream), "cudaEventRecord");
    if (!s.ok()) break;
    // Wait for the frame (and with it every receive before it), watching for a failed peer.
    Backoff backoff(poll);
    while (true) {
      const cudaError_t e = cudaEventQuery(event);
      if (e == cudaSuccess) break;
      if (e != cudaErrorNotReady) {
        s = CudaError(e, "receiving a frame");
        break;
      }
      if (r->stop.load()) {
        s = absl::CancelledError("nccl transport stopped");
        break;
      }
      ncclResult_t state = ncclSuccess;
      nccl_.CommGetAsyncError(*comm, &state);
      if (state != ncclSuccess && state != ncclInProgress) {
        s = NcclError(nccl_, state, "the communicator");
        break;
      }
      backoff.Wait();
    }
    if (!s.ok()) break;
    absl::StatusOr<NcclFrame> frame =
        DecodeNcclFrame(std::string_view(host_frame, options_.frame_bytes));
    if (!frame.ok()) {
      s = frame.status();
      break;
    }
    if (frame->sequence != sequence) {
      s = absl::DataLossError(
          absl::StrCat("frame ", frame->sequence, " arrived, expected ", sequence));
      break;
    }
    ++sequence;
    if (frame->type == NcclFrameType::kNotice) {
      Deliver(frame->payload);
      continue;
    }
    for (const NcclRun& run : frame->runs) {
      if (run.dst_offset > pool_bytes || run.bytes > pool_bytes - run.dst_offset) {
        s = absl::InvalidArgumentError(absl::StrCat("run [", run.dst_offset, ", +", run.bytes,
                                                    ") is outside the ", pool_bytes, "-byte pool"));
        break;
      }
    }
    if (!s.ok()) break;
    if (frame->runs.empty()) continue;
    s = NcclError(nccl_, nccl_.GroupStart(), "ncclGroupStart");
    ncclResult_t rr = ncclSuccess;
    for (size_t i = 0;
         s.ok() && (rr == ncclSuccess || rr == ncclInProgress) && i < frame->runs.size(); ++i) {
      rr = nccl_.Recv(pool + frame->runs[i].dst_offset, frame->runs[i].bytes, ncclUint8, 0, *comm,
                      stream);
    }
    if (rr != ncclSuccess && rr != ncclInProgress) {
      nccl_.GroupEnd();
      s = NcclError(nccl_, rr, "ncclRecv");
      break;
    }
    if (s.ok())
      s = CallComm(nccl_, nccl_.GroupEnd(), *comm, forever, &r->stop, poll, "ncclGroupEnd");
  }
  nccl_.CommAbort(*comm);
  if (stream != nullptr) {
    cudaStreamSynchronize(stream);
    cudaStreamDestroy(stream);
  }
  if (event != nullptr) cudaEventDestroy(event);
  if (device_frame != nullptr) cudaFree(device_frame);
  if (host_frame != nullptr) cudaFreeHost(host_frame);
  return s;
}

void NcclOwner::Deliver(const std::string& payload) {
  NoticeHandler handler;
  {
    absl::MutexLock lock(&handler_mu_);
    handler = handler_;
  }
  // One notice at a time, whichever communicator it came from.
  absl::MutexLock lock(&deliver_mu_);
  if (handler) {
    handler(payload);
  } else {
    spdlog::warn("nccl transport: notice of {} bytes dropped: no handler", payload.size());
  }
}

}  // namespace tandem::nccl_internal
