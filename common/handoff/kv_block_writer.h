// The prefill node's KvExporter for one request: ships each block the engine finishes into the
// decode node's reserved blocks over a KvTransport, then sends the KvCompletion notice.
//
// Block i of the prompt (engine block blocks[j], i = first_index + j) goes to the target's
// block_ids[i]; blocks below num_cached_tokens / block_size are skipped (the decode node has
// them). Runs where both local and remote ids are consecutive become one KvCopy per
// (layer, K|V, run); each OnBlocksReady call is one transport Write, and several may be in flight.
//
// Outcomes, each exactly once:
//  - success: OnPrefillDone and every write done -> release_blocks(id), notice ok=true with the
//    first token, then on_finished(result) when the notice is delivered (an error if it is not).
//  - failure (OnAborted, a write error, the deadline, a remote block index out of range): no
//    more writes; once in-flight writes have ended, a notice ok=false with the error is sent
//    (best effort, bounded by the deadline) and on_finished(error) runs after it;
//    release_blocks(id) runs once the engine has called OnPrefillDone or OnAborted and no write
//    reads local memory any more.
// The writer has no timer: it checks the deadline when the engine calls it, and the transport
// fails writes and notices that run past it.
//
// Integrity (kv_checksum.h): when the handoff carries a checksum key, the writer hashes each block
// it hands to the transport (from its own pool, on the calling engine thread, while the write is
// under way) and the ok notice carries the checksums, in prompt order, and the handoff's epoch.
// That needs a pool the transport reads on the host (KvTransport::host_pool): a device pool with a
// checksum key is refused at Create.
//
// Engine-thread entry points never block: transport calls only queue. release_blocks and
// on_finished may run on the engine thread or the transport's thread, never under the writer's
// lock; they must be quick.
#ifndef TANDEM_COMMON_HANDOFF_KV_BLOCK_WRITER_H_
#define TANDEM_COMMON_HANDOFF_KV_BLOCK_WRITER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/engine/kv_exporter.h"
#include "common/engine/request.h"
#include "common/handoff/handoff_codec.h"
#include "common/handoff/kv_checksum.h"
#include "common/kv/kv_layout.h"
#include "common/transport/handoff_auth.h"
#include "common/transport/kv_transport.h"
#include "common/util/clock.h"

namespace tandem {

struct KvWriteResult {
  TokenId first_token = -1;
  float logprob = 0.0f;
  std::vector<TokenLogprob> top_logprobs;
  uint64_t rng_counter = 0;
  int64_t bytes = 0;                 // written (cached blocks excluded)
  int32_t num_writes = 0;            // KvCopy (RMA writes) after coalescing
  int32_t num_transport_writes = 0;  // KvTransport::Write calls
  int32_t num_blocks_written = 0;
  int32_t num_blocks_skipped = 0;  // below num_cached_tokens
  int64_t checksum_nanos = 0;      // hashing the written blocks (0 without a checksum key)
  // InfinitePast when it did not happen (no blocks to write).
  absl::Time prefill_done = absl::InfinitePast();  // OnPrefillDone (the first token sampled)
  absl::Time first_write_issued = absl::InfinitePast();
  absl::Time last_write_done = absl::InfinitePast();
  absl::Time completion_sent = absl::InfinitePast();
};

struct KvBlockWriterOptions {
  KvTransport* transport = nullptr;
  KvLayout local_layout;  // this node's pool (the one registered with `transport`)
  KvWriteTarget target;
  absl::Time deadline = absl::InfiniteFuture();  // on `clock`
  // The clock the deadline and the result's timestamps are read on (borrowed).
  Clock* clock = Clock::Real();
  uint64_t local_incarnation = 0;  // goes into the notice as prefill_incarnation
  // Signs the completion notice (the decode node drops unsigned ones when it checks); borrowed;
  // null: unsigned.
  const HandoffAuthenticator* auth = nullptr;
  // Wired to Engine::ReleaseExportedBlocks. Called exactly once with the engine's request id.
  std::function<void(RequestId)> release_blocks;
  std::function<void(absl::StatusOr<KvWriteResult>)> on_finished;
};

class KvBlockWriter : public KvExporter, public std::enable_shared_from_this<KvBlockWriter> {
 public:
  // Errors (nothing written, nothing called): a layout mismatch naming the field, an invalid
  // target, a missing transport or callback, a checksum key for a pool not readable on the host.
  static absl::StatusOr<std::shared_ptr<KvBlockWriter>> Create(KvBlockWriterOptions options);

  // Sends `target` a notice ok=false with `status` without a writer (a request refused before it
  // reached the engine). `done` as for KvTransport::Notify.
  static void NotifyFailure(KvTransport* transport, const KvWriteTarget& target,
                            uint64_t local_incarnation, const HandoffAuthenticator* auth,
                            const absl::Status& status, absl::Time deadline, TransferDone done);

  void OnBlocksReady(RequestId id, int32_t first_index, std::span<const int32_t> blocks) override;
  void OnPrefillDone(const GenerationEvent& first_token, uint64_t rng_counter) override;
  void OnAborted(RequestId id, const absl::Status& status) override;

  // The copies for blocks [first_index, first_index + blocks.size()) of the prompt: skips cached
  // blocks, coalesces consecutive runs. OutOfRange when a block index has no remote block.
  // Exposed for tests and benchmarks.
  static absl::StatusOr<std::vector<KvCopy>> PlanCopies(const KvLayout& local,
                                                        const KvWriteTarget& target,
                                                        int32_t first_index,
                                                        std::span<const int32_t> blocks,
                                                        int32_t* num_skipped);

 private:
  KvBlockWriter(KvBlockWriterOptions options, std::optional<KvBlockHasher> hasher,
                uint64_t notice_epoch);

  // Hashes the written blocks among `blocks` (prompt blocks from `first_index`) and appends their
  // checksums. Engine thread, outside the lock.
  void HashWrittenBlocks(int32_t first_index, std::span<const int32_t> blocks);

  // What to do outside the lock.
  struct Actions {
    bool release = false;
    RequestId release_id = 0;
    bool notify = false;
    std::string notice;
    bool report = false;
    absl::StatusOr<KvWriteResult> result = absl::UnknownError("unset");
  };

  void OnWriteDone(const absl::Status& status, int64_t bytes);
  void OnNoticeDone(const absl::Status& status);
  void Fail(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Decides the next steps after any change.
  Actions Progress() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Run(Actions actions);

  const KvBlockWriterOptions options_;
  // Set when the handoff carries a checksum key.
  const std::optional<KvBlockHasher> hasher_;
  // The epoch the notice carries: the handoff's (a test hook may make it stale, kv_checksum.h).
  const uint64_t notice_epoch_;

  absl::Mutex mu_;
  RequestId engine_id_ ABSL_GUARDED_BY(mu_) = 0;
  bool engine_done_ ABSL_GUARDED_BY(mu_) = false;  // OnPrefillDone or OnAborted
  bool prefill_done_ ABSL_GUARDED_BY(mu_) = false;
  GenerationEvent first_token_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool notice_started_ ABSL_GUARDED_BY(mu_) = false;
  bool notice_done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status notice_status_ ABSL_GUARDED_BY(mu_);
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  bool reported_ ABSL_GUARDED_BY(mu_) = false;
  KvWriteResult result_ ABSL_GUARDED_BY(mu_);
  // One per written block, in prompt order.
  std::vector<uint64_t> checksums_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_COMMON_HANDOFF_KV_BLOCK_WRITER_H_
