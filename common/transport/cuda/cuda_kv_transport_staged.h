// The writer's staged path (protocol: staged_messages.h): each Write asks the owner for landing
// slots (kRequest), stages chunks device to host into the ring of staging buffers only against
// grants in hand (so buffers and slots cannot deadlock), puts each staged chunk into a granted
// slot and tells the owner (kChunk), and ends when every chunk is acknowledged (kChunkDone). Owns
// the sends, their staging fences and the staging ring; touches the copier, the inner transport
// (puts, messages), the peers' write numbering and the counters.
//
// A send is owned by the table (unique_ptr, by transfer number) while it is active: it takes
// grants and acknowledgements, stages and puts chunks. Finish() is its one end (every chunk
// acknowledged, an error, its deadline, shutdown): `done` runs once and the send is destroyed.
// What arrives later for it (a staging fence, a put's or a message's outcome, a grant, an
// acknowledgement) finds no send under its transfer number and only gives its buffer or grant
// back.
//
// Each chunk of an active send moves through the counters below, in order:
//   planned (index >= next_stage) -> staging (`staging`: a StageFence holds its buffer)
//   -> ready (`ready`: staged, its buffer held, waiting for a grant) -> put (the buffer comes back
//   when the put completes) -> acknowledged (`acknowledged`).
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_STAGED_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_STAGED_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/transport/cuda/copy_plan.h"
#include "common/transport/cuda/cuda_kv_transport_context.h"
#include "common/transport/cuda/cuda_kv_transport_peers.h"
#include "common/transport/cuda/staged_messages.h"
#include "common/transport/kv_transport.h"

namespace tandem::cuda_internal {

// Which of the writer's staging buffers are free.
class StagingRing {
 public:
  // `buffers` buffers, all free.
  void Reset(int buffers) { free_.assign(buffers, true); }
  // The lowest free buffer, now taken; nullopt when none is free.
  std::optional<int> Take();
  void Free(int buffer) { free_[buffer] = true; }

 private:
  std::vector<bool> free_;
};

// One staged Write.
struct StagedSend {
  struct Ready {
    size_t chunk;
    int buffer;
  };

  uint64_t transfer = 0;  // this writer's number for it in messages
  uint64_t number = 0;    // the write's number at its peer
  Peer* peer = nullptr;
  KvTarget inbox;  // the owner's landing region through the inner transport
  std::vector<StagedChunk> chunks;
  size_t next_stage = 0;         // next chunk to copy into a staging buffer
  size_t staging = 0;            // chunks being copied into staging buffers
  std::deque<Ready> ready;       // staged, waiting for a grant
  std::deque<SlotGrant> grants;  // granted, not used yet
  size_t acknowledged = 0;
  absl::Time deadline;
  TransferDone done;
};

class StagedSends {
 public:
  StagedSends(TransportContext& ctx, PeerTable& peers) : ctx_(ctx), peers_(peers) {}

  StagedSends(const StagedSends&) = delete;
  StagedSends& operator=(const StagedSends&) = delete;

  // The pool was registered: `buffers` staging buffers, all free.
  void ResetStaging(int buffers) { ring_.Reset(buffers); }
  // Starts write `number` (coalesced `copies`, non-empty) to `peer`: asks for slots.
  void Start(Peer* peer, uint64_t number, const std::vector<KvCopy>& copies, absl::Time deadline,
             TransferDone done);
  // The owner's replies.
  void OnGrant(const StagedMessage& m);
  void OnChunkDone(const StagedMessage& m);

  bool has_fences() const { return !fences_.empty(); }
  // Handles the staging copies that ended.
  void Poll();
  // The earliest deadline of an active send (InfiniteFuture when none).
  absl::Time NextDeadline() const;
  // Fails sends past their deadline.
  void ExpireDeadlines(absl::Time now);
  // Shutdown: fails every active send with `status`, returning no grants.
  void CancelAll(const absl::Status& status);

 private:
  // A device-to-host copy of one chunk into a staging buffer.
  struct StageFence {
    uint64_t fence;
    uint64_t transfer;
    size_t chunk;
    int buffer;
    absl::Status queue_error;  // an error queuing its copies
  };

  // The active send of `transfer`; null when it ended.
  StagedSend* Find(uint64_t transfer);
  // Sends a writer-to-owner message for `send`; a failure fails the send.
  void SendToOwner(const StagedSend& send, StagedMessage m);
  // Starts staging copies into free buffers, one chunk per send per round, for sends holding a
  // grant no staged chunk has claimed yet.
  void PumpStaging();
  // Queues `send`'s next chunk into `buffer`. False when that failed and ended the send.
  bool StageNext(StagedSend& send, int buffer);
  void FreeStagingBuffer(int buffer);
  // A chunk finished staging (`status`: how).
  void OnStaged(const StageFence& f, const absl::Status& status);
  // Puts staged chunks into granted slots and tells the owner.
  void SendReadyChunks(StagedSend& send);
  void PutChunk(const StagedSend& send, const StagedSend::Ready& ready, const SlotGrant& grant);
  // Ends the send of `transfer` (no-op when it ended): reports, gives unused grants back when
  // `return_grants`, frees the staging buffers of its ready chunks, destroys it.
  void Finish(uint64_t transfer, const absl::Status& status, bool return_grants);
  void ReturnGrant(const KvTarget& inbox, const SlotGrant& g);

  TransportContext& ctx_;
  PeerTable& peers_;
  StagingRing ring_;
  std::map<uint64_t, std::unique_ptr<StagedSend>> sends_;  // active only, by transfer
  uint64_t next_transfer_ = 1;
  std::vector<StageFence> fences_;
};

}  // namespace tandem::cuda_internal

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_STAGED_H_
