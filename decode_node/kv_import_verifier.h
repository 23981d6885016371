// The decode node's integrity checks between a prefill node's KvCompletion and the engine's
// admission of the request (common/handoff/kv_checksum.h says what is hashed and why).
//
// Each reservation is sealed when its handoff is made (Seal): a fresh epoch, unique per
// reservation on this incarnation (a counter, so a block given to a later reservation always has a
// new one), and — with checksums on and a pool this process reads on the host — a fresh 32-byte
// checksum key. The seal is recorded until its completion is judged or its lease deadline plus
// record_grace has passed.
//
// Judge, for a completion whose MAC and incarnation the service already checked, on the
// verifier's own thread (it reads the landed KV, which must not stall the transport's thread):
//   1. No record (the reservation ended: judged already, or expired): the writer is done, so the
//      engine may free blocks it quarantined for the request (AbortImport); nothing is admitted
//      (a request still awaiting its KV would fail; it cannot, as records outlive leases).
//   2. Its epoch is not the record's: refused (kStaleEpoch). It comes from a writer of another
//      reservation, and the reservation's own writer may still be writing: its blocks go to
//      quarantine (writer_stopped = false), not back to the pool.
//   3. ok=false: passed on (the writer stopped).
//   4. With a checksum key: the completion must carry one checksum per written block
//      (kMissingChecksums otherwise), and each block's landed bytes must hash to it
//      (kChecksumMismatch). The writer finished, so the blocks are freed.
//   5. Admitted.
// A refused import fails the request with DATA_LOSS (the router retries it elsewhere).
//
// Device pools (cuda, nccl transports): host_pool() is empty, so seals carry no key and only the
// epoch is checked; hashing device memory (a kernel, or a staged copy) is not done yet.
#ifndef TANDEM_DECODE_NODE_KV_IMPORT_VERIFIER_H_
#define TANDEM_DECODE_NODE_KV_IMPORT_VERIFIER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/engine/request.h"
#include "common/handoff/handoff_codec.h"
#include "common/kv/kv_layout.h"
#include "common/transport/kv_transport.h"
#include "common/util/clock.h"
#include "common/util/worker_pool.h"
#include "decode_node/decode_metrics.h"
#include "tandem/v1/node.pb.h"

namespace tandem {

struct KvImportVerifierOptions {
  // --kv-checksums: seal reservations with a checksum key and verify the landed KV.
  bool checksums = true;
  // Records outlive their lease deadline by this (completions arriving later are unverifiable).
  absl::Duration record_grace = absl::Minutes(1);
  Clock* clock = Clock::Real();  // borrowed; the engine's (lease deadlines are its nanos)
};

// What the service does with a judged completion.
struct ImportVerdict {
  enum class Kind {
    kAdmit,          // Engine::CompleteImport(prefill)
    kWriterStopped,  // Engine::AbortImport(id, status): the writer stopped, as it said
    kRefused,        // Engine::AbortImport(id, status, writer_stopped), counted by `refusal`
  };
  Kind kind = Kind::kAdmit;
  RequestId id = 0;
  ImportedPrefill prefill;  // kAdmit
  bool verified = false;    // kAdmit: every block checksum matched (false: none to check)
  absl::Status status;      // kWriterStopped, kRefused
  ImportRefusal refusal = ImportRefusal::kChecksumMismatch;  // kRefused
  bool writer_stopped = true;                                // kRefused
};

class KvImportVerifier {
 public:
  // `transport` (borrowed) holds the pool, laid out as `layout`.
  KvImportVerifier(const KvTransport* transport, KvLayout layout, KvImportVerifierOptions options);
  // Runs the completions already queued, then joins its thread.
  ~KvImportVerifier() = default;

  // Thread-safe. The seal for `reservation`'s handoff, recorded.
  KvSeal Seal(const KvReservation& reservation);
  // Thread-safe. Judges `completion` on the verifier's thread, then calls `act` there.
  void Judge(tandem::v1::KvCompletion completion, absl::AnyInvocable<void(ImportVerdict)> act);

  // The judgement itself (Judge's thread; exposed for tests).
  ImportVerdict JudgeNow(const tandem::v1::KvCompletion& completion);

 private:
  struct Record {
    uint64_t epoch = 0;
    std::string checksum_key;
    std::vector<int32_t> written_blocks;  // the blocks the writer writes, in prompt order
    int64_t expires_nanos = 0;
  };
  std::optional<Record> TakeRecord(RequestId id);
  // Drops the records past their expiry, at most once a second.
  void PruneExpired(int64_t now_nanos) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const KvTransport* const transport_;
  const KvLayout layout_;
  const KvImportVerifierOptions options_;

  absl::Mutex mu_;
  uint64_t last_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  bool warned_device_pool_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<RequestId, Record> records_ ABSL_GUARDED_BY(mu_);
  int64_t next_prune_nanos_ ABSL_GUARDED_BY(mu_) = 0;
  // Last: joined first, while the rest is still there.
  WorkerPool worker_{1};
};

}  // namespace tandem

#endif  // TANDEM_DECODE_NODE_KV_IMPORT_VERIFIER_H_
