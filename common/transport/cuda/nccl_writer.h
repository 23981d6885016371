// The writer side of NcclKvTransport (rank 0 of each communicator; nccl_transport.h describes the
// protocol). One loop thread owns every connection: it takes Write/Notify operations in order,
// connects on first use (the connect hook and communicator initialization on a connector thread
// per connection), issues each operation's header frames and grouped sends on the connection's
// stream while frame buffers are free, polls what is in flight, and fails or aborts on deadlines
// and NCCL errors. Everything but Write/Notify/Shutdown runs on the loop thread.
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_NCCL_WRITER_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_NCCL_WRITER_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/transport/cuda/nccl_api.h"
#include "common/transport/cuda/nccl_frame.h"
#include "common/transport/cuda/nccl_local_pool.h"
#include "common/transport/cuda/nccl_transport.h"

namespace tandem::nccl_internal {

class NcclWriter {
 public:
  // `nccl`, `options` and `pool` must outlive the writer.
  NcclWriter(const NcclApi& nccl, const NcclKvTransportOptions& options, uint64_t incarnation,
             const NcclLocalPool& pool);
  ~NcclWriter() { Shutdown(); }

  NcclWriter(const NcclWriter&) = delete;
  NcclWriter& operator=(const NcclWriter&) = delete;

  // Starts the loop thread.
  void Start();
  // Fails pending operations (Cancelled), aborts every communicator, joins the loop and the
  // connectors. Idempotent.
  void Shutdown();

  void Write(const KvTarget& target, std::vector<KvCopy> copies, absl::Time deadline,
             TransferDone done);
  void Notify(const KvTarget& target, std::string payload, absl::Time deadline, TransferDone done);

 private:
  using Task = std::function<void(bool cancelled)>;

  struct Op {
    bool notify = false;
    std::vector<KvCopy> copies;
    std::string payload;
    absl::Time deadline;
    TransferDone done;
    // Issued:
    std::vector<int> slots;  // frame buffers it holds
    cudaEvent_t event = nullptr;
    bool finished = false;
  };

  struct Connection {
    std::string key;
    std::string address;
    std::string tag;
    uint64_t remote_pool_bytes = 0;
    bool ready = false;
    bool broken = false;  // failed; closed by whoever noticed, outside iteration
    std::thread connector;
    std::atomic<bool> cancel{false};
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
    char* device_frames = nullptr;
    char* host_frames = nullptr;
    std::vector<int> free_slots;
    std::vector<cudaEvent_t> spare_events;
    uint64_t next_sequence = 0;
    std::deque<std::shared_ptr<Op>> waiting;    // not issued yet, in order
    std::deque<std::shared_ptr<Op>> in_flight;  // issued, in order
  };
  using Connections = std::map<std::string, std::unique_ptr<Connection>>;

  // Runs `task` on the loop thread, or at once with cancelled=true after Shutdown.
  void Post(Task task);
  // Runs what was posted, cancelled (Shutdown).
  void RunQueued();
  void Loop();
  void Queue(const KvTarget& target, std::shared_ptr<Op> op);

  // Runs the connect hook and the communicator's initialization on a thread of its own.
  void StartConnect(Connection* c);
  void OnConnected(const std::string& key, const absl::Status& status, ncclComm_t comm);

  // Issues waiting operations in order while frame buffers are free. An error fails the
  // connection and marks it broken (the caller closes it).
  void Issue(Connection& c);
  absl::Status IssueOp(Connection& c, Op& op, const std::vector<NcclFrame>& frames);

  // Polls in-flight operations, checks communicators and deadlines, issues what can go.
  void Progress();

  // Aborts the communicator and fails every operation on it: `culprit` with `status`, the rest
  // Unavailable (or Cancelled when `status` is).
  void FailConnection(Connection& c, const absl::Status& status, Op* culprit);
  // Removes a connection: fails what it still has with `status` (when not OK), frees its
  // resources, joins its connector.
  void CloseConnection(Connections::iterator it, const absl::Status& status);

  const NcclApi& nccl_;
  const NcclKvTransportOptions& options_;
  const uint64_t incarnation_;
  const NcclLocalPool& pool_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};

  absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;

  // The loop thread only.
  Connections connections_;
};

}  // namespace tandem::nccl_internal

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_NCCL_WRITER_H_
