// NcclKvTransport: KV between GPUs over NCCL point-to-point sends, one communicator per
// prefill-decode pair (two ranks: the writer is rank 0, the owner rank 1).
//
// Connecting: on the first Write/Notify to an owner, the writer makes an NCCL unique id and hands
// it to the owner through the `connect` hook (the node wires it to the DecodeNode.ConnectKv RPC,
// whose handler calls the owner's AcceptConnection); both sides then run ncclCommInitRankConfig
// (non-blocking, bounded by connect_timeout), the owner on a thread of its own. Operations queued
// meanwhile wait; a failed connect fails them, and the next operation tries again.
//
// Data: two-sided. For each Write the writer sends fixed-size header frames (nccl_frame.h: the
// coalesced runs' destinations), each followed by one ncclGroupStart/End of one ncclSend per run
// straight from its pool; Notify sends a notice frame. Everything of one communicator goes on
// one stream, in order. The owner's receive loop (one thread per communicator) receives a frame
// into device memory, copies it to the host, and posts one ncclRecv per run straight into its pool;
// a notice frame is delivered once it arrived, which (same stream, in order) is after every run
// before it. `done` of a Write: its sends completed on the writer's stream (the data left this
// GPU; the owner's stream order puts the notice behind it). `done` of a Notify: its frame was sent.
//
// Failure: NCCL cannot cancel a send. An operation past its deadline, or an NCCL error, aborts the
// communicator (ncclCommAbort): every operation on it fails, nothing reads the pool after, and the
// next operation reconnects. The owner's loop ends when its communicator fails or the writer
// reconnects with the same incarnation; a writer that vanished without either leaves an idle
// receive thread until NCCL reports the broken connection or the owner shuts down.
//
// NCCL cannot put two ranks on one GPU: this transport needs the writer and owner on different
// GPUs (one machine with two GPUs, or two machines). One GPU shared by prefill and decode is
// CudaKvTransport's direct (IPC) path.
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_NCCL_TRANSPORT_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_NCCL_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/transport/cuda/nccl_connect.h"
#include "common/transport/kv_transport.h"
#include "common/util/clock.h"

namespace tandem {

struct NcclKvTransportOptions {
  int cuda_device = 0;
  // Owner: where writers reach this node's ConnectKv (the decode node's gRPC address). Published
  // as address() in handoffs.
  std::string address;
  // Writer: how a unique id reaches the owner (required to write); the nodes use
  // GrpcNcclConnectHook() (nccl_connect.h).
  NcclConnectHook connect;
  // Bound on connecting (the hook plus communicator initialization).
  absl::Duration connect_timeout = absl::Seconds(30);
  // Header frame size; both sides must agree. Holds (frame_bytes - 20) / 16 runs or a notice of
  // frame_bytes - 20 bytes.
  size_t frame_bytes = 8192;
  // Frames in flight per communicator (the writer's ring of frame buffers).
  int frames_in_flight = 64;
  // How often in-flight operations are polled.
  absl::Duration poll_interval = absl::Microseconds(20);
  // The clock operations' deadlines are read on (borrowed; the callers' deadlines come from it).
  // Connecting a communicator is bounded in real time (connect_timeout): NCCL's handshake is.
  Clock* clock = Clock::Real();
};

class NcclKvTransport : public KvTransport {
 public:
  // Unavailable without a usable CUDA device; InvalidArgument for bad options.
  static absl::StatusOr<std::unique_ptr<NcclKvTransport>> Create(NcclKvTransportOptions options);
  // Fails pending operations (Cancelled), aborts every communicator, joins its threads (a connect
  // in progress may take until its hook returns).
  ~NcclKvTransport() override;

  NcclKvTransport(const NcclKvTransport&) = delete;
  NcclKvTransport& operator=(const NcclKvTransport&) = delete;

  std::string_view name() const override { return "nccl"; }
  // Unimplemented: NCCL moves device memory (RegisterDevicePool).
  absl::Status RegisterPool(void* base, size_t bytes) override;
  absl::Status RegisterDevicePool(void* base, size_t bytes, int cuda_device) override;
  std::string address() const override;
  // An NcclPoolKey (nccl_frame.h).
  std::string pool_remote_key() const override;
  uint64_t pool_base() const override;
  uint64_t incarnation() const override;
  void SetNoticeHandler(NoticeHandler handler) override;
  void Write(const KvTarget& target, std::vector<KvCopy> copies, absl::Time deadline,
             TransferDone done) override;
  void Notify(const KvTarget& target, std::string payload, absl::Time deadline,
              TransferDone done) override;

  // Owner: the ConnectKv handler's call. Starts this side of the communicator whose unique id the
  // writer made, and its receive loop, on a new thread; returns at once. An earlier communicator
  // of the same writer incarnation is aborted first. FailedPrecondition before RegisterDevicePool;
  // InvalidArgument for an id of the wrong size.
  absl::Status AcceptConnection(std::string_view nccl_unique_id, uint64_t writer_incarnation);

  // Owner: communicators with a running receive loop.
  int num_connections() const;

  class Impl;

 private:
  explicit NcclKvTransport(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_NCCL_TRANSPORT_H_
