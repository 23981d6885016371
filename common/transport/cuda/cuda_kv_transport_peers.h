// The writer's view of the owners it writes to (by inner address): which path each takes, the
// owner's pool mapped here for the direct path, the numbering of writes, and the notices held back
// until the writes before them ended. Owns the peers and their mappings; touches the copier
// (Import/Close), the inner transport (notices) and the counters through the context. Direct and
// staged writes hold Peer pointers (stable: a peer is forgotten only when nothing refers to it).
//
// A peer's path (PeerPath; every transition in PeerTable::ForWrite):
//
//   path        | meaning                                          | moves out when
//   ------------+--------------------------------------------------+-----------------------------
//   kUndecided  | known from a notice only, or a key that failed   | a write with a decodable key:
//               | to decode                                        |   -> kDirect or kStaged
//   kDirect     | same host, its pool opened here: device copies   | a write names another key
//   kStaged     | chunks through landing slots (other host, no     |   (the owner restarted):
//   decided
//               | handle, or a handle that would not open)         |   again -> kDirect or kStaged
//   (any)       | forgotten (mapping closed) after                 |
//               | import_idle_close with nothing open              |
//
// The mapping outlives kDirect while direct copies on it are in flight (copies_in_flight): a peer
// re-decided meanwhile goes staged and its old mapping is closed once idle.
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_PEERS_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_PEERS_H_

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/transport/cuda/cuda_kv_transport_context.h"
#include "common/transport/cuda/cuda_kv_transport_handles.h"
#include "common/transport/cuda/device_pool_descriptor.h"
#include "common/transport/kv_transport.h"

namespace tandem::cuda_internal {

enum class PeerPath { kUndecided, kDirect, kStaged };

struct PendingNotice {
  uint64_t barrier = 0;  // waits for every write to the peer numbered <= barrier
  std::string payload;
  absl::Time deadline;
  TransferDone done;
};

// What this writer knows about one owner.
struct Peer {
  // The owner's landing region through the inner transport (staged chunks, every message).
  KvTarget inbox() const;

  std::string address;
  std::string tag;
  std::string remote_key;  // the descriptor the path was decided with
  DevicePoolDescriptor descriptor;
  PeerPath path = PeerPath::kUndecided;
  ImportedPool imported;     // the owner's pool mapped here (direct path)
  int copies_in_flight = 0;  // direct fences not passed yet (the mapping must stay)
  absl::Time last_used;
  uint64_t last_write = 0;         // number of the latest write to this peer
  std::set<uint64_t> open_writes;  // writes whose `done` has not run
  std::deque<PendingNotice> notices;
};

class PeerTable {
 public:
  explicit PeerTable(TransportContext& ctx) : ctx_(ctx) {}

  PeerTable(const PeerTable&) = delete;
  PeerTable& operator=(const PeerTable&) = delete;

  // The peer `target` names, its path decided on first use or when its key changed. Errors: an
  // empty address, an undecodable key, a peer neither direct nor with landing slots.
  absl::StatusOr<Peer*> ForWrite(const KvTarget& target);
  // Numbers a new write to `peer`; notices queued from now on wait for it.
  uint64_t WriteStarted(Peer* peer);
  // Write `number` to `peer` ended (its `done` runs now): notices waiting for it may go.
  void WriteEnded(Peer* peer, uint64_t number);
  // Queues a notice behind every write to the target started so far.
  void Notify(const KvTarget& target, std::string payload, absl::Time deadline, TransferDone done);
  // The inbox of the owner at `address` (only the address when it is not a known peer).
  KvTarget InboxOf(const std::string& address) const;

  // The earliest deadline of a queued notice (InfiniteFuture when none).
  absl::Time NextNoticeDeadline() const;
  // Fails notices past their deadline.
  void ExpireNotices(absl::Time now);
  // Closes the mappings of, and forgets, peers with nothing open for import_idle_close.
  void ForgetIdle(absl::Time now);

  // Shutdown: fails every queued notice with `status`; closes every mapping (after the copier
  // drained).
  void CancelNotices(const absl::Status& status);
  void CloseMappings();

 private:
  Peer& Find(const std::string& address);
  // Decides `peer`'s path for a new descriptor `d` (its key `remote_key`).
  absl::Status Decide(Peer& peer, const std::string& remote_key, const DevicePoolDescriptor& d);
  // Maps the same-host owner's pool; on failure the peer stays staged (logged and counted).
  void TryOpen(Peer& peer);
  // Sends `peer`'s notices, in order, whose earlier writes have all ended.
  void SendNotices(Peer* peer);

  TransportContext& ctx_;
  std::map<std::string, Peer> peers_;  // by inner address; stable element addresses
};

}  // namespace tandem::cuda_internal

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_PEERS_H_
