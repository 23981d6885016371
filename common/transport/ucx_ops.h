// The UCX transport's operations in flight: each Write and Notify from the moment the progress
// thread takes it to the moment its last UCX request completes, which may be after its `done` ran
// (a deadline that passed while only a flush was pending).
//
// Write = one ucp_put_nbx per copy, then ucp_ep_flush_nbx; `done` runs when the flush completes.
// Notify = a flush of the earlier writes to the target, then the notice (an active message), then
// a flush. Deadlines: an operation past its deadline fails with DeadlineExceeded; if any of its
// puts may still read local memory, its endpoint is retired (closed by force) first.
//
// Owns the operations (and through them their UCX requests) and the list of those ready to move
// on. Touches the endpoint cache (to find, fail and retire endpoints) and the worker only through
// ucp_put/flush/am_send calls. Progress thread only; `done` runs here.
#ifndef TANDEM_COMMON_TRANSPORT_UCX_OPS_H_
#define TANDEM_COMMON_TRANSPORT_UCX_OPS_H_

#include <ucp/api/ucp.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/transport/kv_transport.h"
#include "common/transport/kv_write_corruption.h"
#include "common/transport/ucx_endpoint_cache.h"
#include "common/transport/ucx_handles.h"
#include "common/transport/ucx_transport.h"
#include "common/util/clock.h"

namespace tandem {

class UcxOps;

enum class UcxOpKind { kWrite, kNotify };

// An operation's life. An operation is advanced (Advance) whenever none of its requests is
// outstanding; it is deleted when advanced in kDone.
//
//   state             what it waits for                   what moves it on
//   kWriting          (write) its puts and their flush    all completed -> kDone
//   kFlushingEarlier  (notify) the flush of earlier       all completed, no error and the endpoint
//                     writes to the target                open -> kNoticeSent; else -> kDone
//   kNoticeSent       (notify) the notice and its flush   all completed -> kDone
//   kDone             `done` ran; requests UCX still      the last completes -> deleted
//                     holds, if any
// Any state but kDone also -> kDone (running `done`) at its deadline when no put of it is
// outstanding, when its endpoint fails without peer error handling, or when the transport stops.
enum class UcxOpState { kWriting, kFlushingEarlier, kNoticeSent, kDone };

struct UcxOp {
  UcxOps* owner = nullptr;  // for UCX's callbacks
  UcxEndpoint* ep = nullptr;
  UcxOpKind kind = UcxOpKind::kWrite;
  UcxOpState state = UcxOpState::kWriting;
  absl::Time deadline;
  TransferDone done;
  std::string payload;        // the notice
  uint8_t flipped_byte = 0;   // the test hook's corrupted byte, put from here
  int puts_outstanding = 0;   // requests that may still read local memory
  int other_outstanding = 0;  // flushes and the notice
  absl::Status status;
  UcsRequestSet requests;  // outstanding (freed at teardown if UCX never completes them)

  int outstanding() const { return puts_outstanding + other_outstanding; }
};

class UcxOps {
 public:
  // The registered pool as a write reads it (base null: none registered).
  struct Pool {
    char* base = nullptr;
    size_t bytes = 0;
    ucp_mem_h memh = nullptr;
  };

  // `clock` (borrowed) is the deadlines' clock; `endpoints` (borrowed) the endpoint cache.
  UcxOps(Clock* clock, UcxTransportOptions::NoticeProtocol protocol, UcxEndpointCache* endpoints)
      : clock_(clock), protocol_(protocol), endpoints_(endpoints) {}

  UcxOps(const UcxOps&) = delete;
  UcxOps& operator=(const UcxOps&) = delete;

  // Start an operation, or run `done` at once with why it cannot start.
  // With `flip` (a test hook, kv_write_corruption.h), that byte is put from a flipped copy.
  void StartWrite(const KvTarget& target, const std::vector<KvCopy>& copies, absl::Time deadline,
                  TransferDone done, const Pool& pool, std::optional<KvByteFlip> flip = {});
  void StartNotify(const KvTarget& target, std::string payload, absl::Time deadline,
                   TransferDone done);

  // Something for RetireFailedEndpoints or AdvanceReady to do.
  bool has_work() const { return !ready_.empty() || endpoints_->has_failed(); }
  // Retires the endpoints UCX reported failed.
  void RetireFailedEndpoints();
  // Advances the operations whose requests all completed.
  void AdvanceReady();
  // Takes a failed `ep` out of the cache, fails its operations with its error and closes it. With
  // peer error handling its operations finish when the forced close has completed their
  // requests. Without, UCX cannot cancel them: the operations finish now, their requests stay
  // with UCX (completing if the peer resumes, released at teardown).
  void Retire(UcxEndpoint* ep);
  // Fails the operations past their deadline (`now` on the deadlines' clock).
  void CheckDeadlines(absl::Time now);

  // Operations whose `done` has not run, and the earliest of their deadlines.
  size_t NumActive() const;
  std::optional<absl::Time> EarliestDeadline() const;

  // Teardown: runs `done` of every active operation with `status` (if it is still OK).
  void FinishAll(const absl::Status& status);
  // Teardown, before the worker goes: frees the requests UCX still holds.
  void ReleaseRequests();
  // Teardown, after the worker went: deletes every operation.
  void Clear();

 private:
  // Common start of Write/Notify: deadline and endpoint. Returns the op registered with its
  // endpoint, or runs `done` with the error and returns null.
  UcxOp* NewOp(const std::string& address, absl::Time deadline, TransferDone& done, UcxOpKind kind);
  void IssuePuts(UcxOp* op, const KvTarget& target, const std::vector<KvCopy>& copies,
                 ucp_rkey_h rkey, const Pool& pool, std::optional<KvByteFlip> flip);
  void IssueFlush(UcxOp* op);
  void IssueNotice(UcxOp* op);
  // Takes what a ucp_*_nbx `call` returned for `op`: nothing to wait for (null), an error (into
  // the op's status; false), or a request to wait for (counted in `outstanding`).
  bool Track(UcxOp* op, ucs_status_ptr_t r, int& outstanding, const char* call);
  // Moves `op` on once none of its requests is outstanding: a notice whose earlier writes are
  // flushed gets sent; anything else finishes and is deleted.
  void Advance(UcxOp* op);
  // -> kDone, running `done` (once).
  static void Finish(UcxOp* op);
  void MarkReady(UcxOp* op);

  static void PutCb(void* request, ucs_status_t status, void* user_data);
  static void OtherCb(void* request, ucs_status_t status, void* user_data);

  Clock* const clock_;
  const UcxTransportOptions::NoticeProtocol protocol_;
  UcxEndpointCache* const endpoints_;
  absl::flat_hash_set<std::unique_ptr<UcxOp>> ops_;
  // Operations with no request outstanding, to advance (last in, first out), and the same set.
  std::vector<UcxOp*> ready_;
  absl::flat_hash_set<UcxOp*> queued_;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_UCX_OPS_H_
