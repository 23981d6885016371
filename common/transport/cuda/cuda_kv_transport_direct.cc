// DirectWrites (cuda_kv_transport_direct.h): device-to-device writes into mapped peer pools.
// Touches the copier, the peers' in-flight counts and write numbering, and the counters.
#include "common/transport/cuda/cuda_kv_transport_direct.h"

#include <cstddef>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace tandem::cuda_internal {

void DirectWrites::Start(Peer* peer, uint64_t number, const std::vector<KvCopy>& copies,
                         absl::Time deadline, TransferDone done) {
  auto op = std::make_unique<DirectOp>();
  op->number = number;
  op->peer = peer;
  op->deadline = deadline;
  op->done = std::move(done);
  char* dst = peer->imported.get();
  for (const KvCopy& c : copies) {
    op->queue_error = ctx_.copier->Copy(dst + c.dst_offset, ctx_.pool + c.src_offset, c.bytes);
    if (!op->queue_error.ok()) break;
  }
  // A fence even after an error: copies queued before it may run.
  absl::StatusOr<uint64_t> fence = ctx_.copier->Fence();
  if (!fence.ok()) {
    // Nothing to wait for that we can see; report now.
    peers_.WriteEnded(peer, number);
    op->done(fence.status());
    return;
  }
  op->fence = *fence;
  ++peer->copies_in_flight;
  ops_.push_back(std::move(op));
}

void DirectWrites::Report(DirectOp& op, const absl::Status& status) {
  if (op.state != DirectOpState::kCopying) return;
  op.state = DirectOpState::kReported;
  TransferDone done = std::move(op.done);
  peers_.WriteEnded(op.peer, op.number);
  done(status);
}

void DirectWrites::Poll() {
  for (size_t i = 0; i < ops_.size();) {
    DirectOp& op = *ops_[i];
    absl::StatusOr<bool> passed = ctx_.copier->Poll(op.fence);
    if (passed.ok() && !*passed) {
      ++i;
      continue;
    }
    const absl::Status s = passed.ok() ? op.queue_error : passed.status();
    --op.peer->copies_in_flight;
    op.peer->last_used = ctx_.Now();
    Report(op, s);
    ops_.erase(ops_.begin() + static_cast<ptrdiff_t>(i));
  }
}

void DirectWrites::ExpireDeadlines(absl::Time now) {
  for (auto& op : ops_) {
    if (op->state == DirectOpState::kCopying && now >= op->deadline) {
      // The copy keeps running on the device; its fence is still polled before the mapping may
      // close.
      Report(*op, absl::DeadlineExceededError(absl::StrCat(
                      "cuda transport: direct write to ", op->peer->tag,
                      " ran past its deadline (the device copy finishes regardless)")));
    }
  }
}

void DirectWrites::CancelAll(const absl::Status& status) {
  for (auto& op : ops_) Report(*op, status);
}

}  // namespace tandem::cuda_internal
