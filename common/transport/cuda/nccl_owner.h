// The owner side of NcclKvTransport (rank 1 of each communicator; nccl_transport.h describes the
// protocol). Each accepted connection gets a receiver thread: it initializes the communicator from
// the writer's unique id, then receives a header frame into device memory, copies it to the host,
// checks it, and posts the runs' receives straight into the pool as one group, or delivers a
// notice. A receiver ends when its communicator fails, the same writer reconnects, or Shutdown.
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_NCCL_OWNER_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_NCCL_OWNER_H_

#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/transport/cuda/nccl_api.h"
#include "common/transport/cuda/nccl_local_pool.h"
#include "common/transport/cuda/nccl_transport.h"

namespace tandem::nccl_internal {

class NcclOwner {
 public:
  // `nccl`, `options` and `pool` must outlive the owner.
  NcclOwner(const NcclApi& nccl, const NcclKvTransportOptions& options, const NcclLocalPool& pool);
  ~NcclOwner() { Shutdown(); }

  NcclOwner(const NcclOwner&) = delete;
  NcclOwner& operator=(const NcclOwner&) = delete;

  void SetNoticeHandler(NoticeHandler handler);

  // NcclKvTransport::AcceptConnection: starts a receiver for the writer's unique id on a new
  // thread; an earlier receiver of the same writer incarnation (and any that finished) is stopped
  // and joined first.
  absl::Status AcceptConnection(std::string_view unique_id, uint64_t writer_incarnation);

  // Receivers still running.
  int num_connections() const;

  // Stops and joins every receiver; AcceptConnection fails (Cancelled) after. Idempotent.
  void Shutdown();

 private:
  struct Receiver {
    uint64_t writer_incarnation = 0;
    ncclUniqueId id;
    std::thread thread;
    std::atomic<bool> stop{false};
    std::atomic<bool> finished{false};
  };

  void ReceiveLoop(Receiver* r);
  absl::Status RunReceiver(Receiver* r, const std::string& tag);
  // Hands a notice to the handler, one at a time whichever communicator it came from.
  void Deliver(const std::string& payload);

  const NcclApi& nccl_;
  const NcclKvTransportOptions& options_;
  const NcclLocalPool& pool_;

  mutable absl::Mutex handler_mu_;
  NoticeHandler handler_ ABSL_GUARDED_BY(handler_mu_);

  absl::Mutex deliver_mu_;

  mutable absl::Mutex receivers_mu_;
  std::vector<std::unique_ptr<Receiver>> receivers_ ABSL_GUARDED_BY(receivers_mu_);
  bool stop_receivers_ ABSL_GUARDED_BY(receivers_mu_) = false;
};

}  // namespace tandem::nccl_internal

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_NCCL_OWNER_H_
