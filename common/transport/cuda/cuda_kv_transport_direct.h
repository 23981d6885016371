// The writer's direct path: one Write's coalesced copies queued device to device into a same-host
// owner's pool mapped here (PeerTable), then a fence; `done` runs when the fence passed. Owns the
// direct operations (unique_ptr each, until their fence passed); touches the copier, the peers'
// in-flight counts and write numbering, and the counters.
//
// A direct operation (DirectOpState; transitions in DirectWrites::Report and Poll):
//
//   state     | meaning                                         | moves out when
//   ----------+-------------------------------------------------+-------------------------------
//   kCopying  | copies queued, `done` not run                   | the fence passed: done(the
//             |                                                 |   copies' outcome), erased;
//             |                                                 | deadline or shutdown:
//             |                                                 |   done(error) -> kReported
//   kReported | `done` ran; the device copy runs on regardless  | the fence passed: erased (the
//             | (the peer's mapping stays open)                 |   mapping may close after)
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_DIRECT_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_DIRECT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/transport/cuda/cuda_kv_transport_context.h"
#include "common/transport/cuda/cuda_kv_transport_peers.h"
#include "common/transport/kv_transport.h"

namespace tandem::cuda_internal {

enum class DirectOpState { kCopying, kReported };

struct DirectOp {
  DirectOpState state = DirectOpState::kCopying;
  uint64_t number = 0;  // the write's number at its peer
  Peer* peer = nullptr;
  uint64_t fence = 0;
  absl::Time deadline;
  TransferDone done;
  absl::Status queue_error;  // an error queuing the copies (reported when the fence passed)
};

class DirectWrites {
 public:
  DirectWrites(TransportContext& ctx, PeerTable& peers) : ctx_(ctx), peers_(peers) {}

  DirectWrites(const DirectWrites&) = delete;
  DirectWrites& operator=(const DirectWrites&) = delete;

  // Queues write `number` (coalesced `copies`, non-empty) to `peer`, whose pool is mapped.
  void Start(Peer* peer, uint64_t number, const std::vector<KvCopy>& copies, absl::Time deadline,
             TransferDone done);

  bool has_fences() const { return !ops_.empty(); }
  // Ends the operations whose fence passed.
  void Poll();
  // Reports operations past their deadline (their copies keep running).
  void ExpireDeadlines(absl::Time now);
  // Shutdown: reports every operation not reported yet with `status`.
  void CancelAll(const absl::Status& status);

 private:
  // Runs `op`'s done once (kCopying -> kReported).
  void Report(DirectOp& op, const absl::Status& status);

  TransportContext& ctx_;
  PeerTable& peers_;
  std::vector<std::unique_ptr<DirectOp>> ops_;  // until their fence passed
};

}  // namespace tandem::cuda_internal

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_DIRECT_H_
