// Issuing, advancing, failing and deleting Write/Notify operations (see ucx_ops.h). Owns the
// operations; touches the endpoint cache and the worker's put/flush/am_send calls. Progress thread
// only.
#include "common/transport/ucx_ops.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/transport/ucx_notice_receiver.h"
#include "spdlog/spdlog.h"

namespace tandem {

void UcxOps::StartWrite(const KvTarget& target, const std::vector<KvCopy>& copies,
                        absl::Time deadline, TransferDone done, const Pool& pool,
                        std::optional<KvByteFlip> flip) {
  if (pool.base == nullptr) {
    done(absl::FailedPreconditionError("ucx write: no pool registered"));
    return;
  }
  for (const KvCopy& c : copies) {
    if (c.src_offset > pool.bytes || c.bytes > pool.bytes - c.src_offset) {
      done(absl::InvalidArgumentError(absl::StrCat("ucx write: source range [", c.src_offset, ", +",
                                                   c.bytes, ") is outside the ", pool.bytes,
                                                   "-byte pool")));
      return;
    }
  }
  UcxOp* op = NewOp(target.address, deadline, done, UcxOpKind::kWrite);
  if (op == nullptr) return;
  absl::StatusOr<ucp_rkey_h> rkey = endpoints_->GetRkey(op->ep, target.remote_key);
  if (!rkey.ok()) {
    op->status = rkey.status();
  } else {
    IssuePuts(op, target, copies, *rkey, pool, flip);
    if (op->status.ok()) IssueFlush(op);
  }
  Advance(op);
}

void UcxOps::StartNotify(const KvTarget& target, std::string payload, absl::Time deadline,
                         TransferDone done) {
  UcxOp* op = NewOp(target.address, deadline, done, UcxOpKind::kNotify);
  if (op == nullptr) return;
  op->payload = std::move(payload);
  IssueFlush(op);  // the notice follows every earlier write to this peer
  Advance(op);
}

UcxOp* UcxOps::NewOp(const std::string& address, absl::Time deadline, TransferDone& done,
                     UcxOpKind kind) {
  const bool notify = kind == UcxOpKind::kNotify;
  if (clock_->Now() >= deadline) {
    done(absl::DeadlineExceededError(notify ? "ucx notice: deadline passed before sending"
                                            : "ucx write: deadline passed before issuing"));
    return nullptr;
  }
  absl::StatusOr<UcxEndpoint*> ep = endpoints_->Get(address);
  if (!ep.ok()) {
    done(ep.status());
    return nullptr;
  }
  auto op = std::make_unique<UcxOp>();
  op->owner = this;
  op->ep = *ep;
  op->kind = kind;
  op->state = notify ? UcxOpState::kFlushingEarlier : UcxOpState::kWriting;
  op->deadline = deadline;
  op->done = std::move(done);
  UcxOp* raw = op.get();
  (*ep)->ops.insert(raw);
  ops_.insert(std::move(op));
  return raw;
}

void UcxOps::IssuePuts(UcxOp* op, const KvTarget& target, const std::vector<KvCopy>& copies,
                       ucp_rkey_h rkey, const Pool& pool, std::optional<KvByteFlip> flip) {
  ucp_request_param_t p{};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMH;
  p.cb.send = &UcxOps::PutCb;
  p.user_data = op;
  p.memh = pool.memh;
  // The test hook's byte goes from op->flipped_byte, not from the pool: no memory handle.
  ucp_request_param_t unregistered = p;
  unregistered.op_attr_mask &= ~UCP_OP_ATTR_FIELD_MEMH;
  auto put = [&](uint64_t src, uint64_t dst, uint64_t bytes) {
    if (bytes == 0) return true;
    return Track(
        op, ucp_put_nbx(op->ep->ep, pool.base + src, bytes, target.remote_base + dst, rkey, &p),
        op->puts_outstanding, "ucp_put_nbx");
  };
  for (size_t i = 0; i < copies.size(); ++i) {
    const KvCopy& c = copies[i];
    if (!flip.has_value() || flip->copy != i) {
      if (!put(c.src_offset, c.dst_offset, c.bytes)) return;
      continue;
    }
    const uint64_t at = flip->offset;
    op->flipped_byte = static_cast<uint8_t>(pool.base[c.src_offset + at]) ^ KvByteFlip::kMask;
    if (!put(c.src_offset, c.dst_offset, at)) return;
    if (!Track(op,
               ucp_put_nbx(op->ep->ep, &op->flipped_byte, 1, target.remote_base + c.dst_offset + at,
                           rkey, &unregistered),
               op->puts_outstanding, "ucp_put_nbx")) {
      return;
    }
    if (!put(c.src_offset + at + 1, c.dst_offset + at + 1, c.bytes - at - 1)) return;
  }
}

void UcxOps::IssueFlush(UcxOp* op) {
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  p.cb.send = &UcxOps::OtherCb;
  p.user_data = op;
  Track(op, ucp_ep_flush_nbx(op->ep->ep, &p), op->other_outstanding, "ucp_ep_flush_nbx");
}

void UcxOps::IssueNotice(UcxOp* op) {
  ucp_request_param_t p{};
  p.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  p.cb.send = &UcxOps::OtherCb;
  p.user_data = op;
  switch (protocol_) {
    case UcxTransportOptions::NoticeProtocol::kAuto:
      p.flags = 0;
      break;
    case UcxTransportOptions::NoticeProtocol::kEager:
      p.flags = UCP_AM_SEND_FLAG_EAGER;
      break;
    case UcxTransportOptions::NoticeProtocol::kRendezvous:
      p.flags = UCP_AM_SEND_FLAG_RNDV;
      break;
  }
  ucs_status_ptr_t r = ucp_am_send_nbx(op->ep->ep, kUcxNoticeAmId, nullptr, 0, op->payload.data(),
                                       op->payload.size(), &p);
  Track(op, r, op->other_outstanding, "ucp_am_send_nbx");
}

bool UcxOps::Track(UcxOp* op, ucs_status_ptr_t r, int& outstanding, const char* call) {
  if (r == nullptr) return true;
  if (UCS_PTR_IS_ERR(r)) {
    op->status.Update(UcsStatus(UCS_PTR_STATUS(r), absl::StrCat(call, " to ", op->ep->tag)));
    return false;
  }
  ++outstanding;
  op->requests.emplace(r);
  return true;
}

void UcxOps::Advance(UcxOp* op) {
  if (op->outstanding() > 0) return;
  if (op->state == UcxOpState::kFlushingEarlier && op->status.ok() && !op->ep->failed()) {
    op->state = UcxOpState::kNoticeSent;
    IssueNotice(op);
    if (op->status.ok()) IssueFlush(op);
    if (op->outstanding() > 0) return;
  }
  if (op->state != UcxOpState::kDone && op->status.ok() && op->ep->failed()) {
    op->status = op->ep->error;
  }
  Finish(op);
  op->ep->ops.erase(op);
  ops_.erase(op);  // deletes it
}

void UcxOps::Finish(UcxOp* op) {
  if (op->state == UcxOpState::kDone) return;
  op->state = UcxOpState::kDone;
  TransferDone done = std::move(op->done);
  done(op->status);
}

void UcxOps::MarkReady(UcxOp* op) {
  if (op->outstanding() > 0 || !queued_.insert(op).second) return;
  ready_.push_back(op);
}

void UcxOps::AdvanceReady() {
  while (!ready_.empty()) {
    UcxOp* op = ready_.back();
    ready_.pop_back();
    queued_.erase(op);
    Advance(op);
  }
}

void UcxOps::RetireFailedEndpoints() {
  while (UcxEndpoint* ep = endpoints_->PopFailed()) {
    spdlog::warn("ucx transport: {}", std::string(ep->error.message()));
    Retire(ep);
  }
}

void UcxOps::Retire(UcxEndpoint* ep) {
  endpoints_->Uncache(ep);
  for (UcxOp* op : ep->ops) {
    if (op->state != UcxOpState::kDone) op->status.Update(ep->error);
    if (!ep->peer_errors()) Finish(op);
    MarkReady(op);
  }
  endpoints_->Close(ep);
}

void UcxOps::CheckDeadlines(absl::Time now) {
  std::vector<UcxOp*> expired;
  for (const auto& op : ops_) {
    if (op->state != UcxOpState::kDone && now >= op->deadline) expired.push_back(op.get());
  }
  for (UcxOp* op : expired) {
    if (op->state == UcxOpState::kDone) continue;  // finished by an earlier one's Retire
    absl::Status deadline = absl::DeadlineExceededError(
        absl::StrCat(op->kind == UcxOpKind::kNotify ? "ucx notice to " : "ucx write to ",
                     op->ep->tag, " ran past its deadline"));
    op->status = deadline;
    if (op->puts_outstanding > 0 && !op->ep->failed()) {
      // Puts may still read the caller's memory: stop them all by closing the endpoint (for an
      // endpoint without peer error handling, abandon it: see Retire).
      UcxEndpointCache::Fail(op->ep, absl::UnavailableError(absl::StrCat(
                                         "connection to ", op->ep->tag,
                                         " closed: a write to it ran past its deadline")));
      Retire(op->ep);
      op->status = deadline;
    } else if (op->puts_outstanding == 0) {
      Finish(op);  // only flushes or the notice left: nothing reads local memory
    }
  }
}

size_t UcxOps::NumActive() const {
  size_t n = 0;
  for (const auto& op : ops_) n += op->state == UcxOpState::kDone ? 0 : 1;
  return n;
}

std::optional<absl::Time> UcxOps::EarliestDeadline() const {
  std::optional<absl::Time> earliest;
  for (const auto& op : ops_) {
    if (op->state == UcxOpState::kDone) continue;
    if (!earliest || op->deadline < *earliest) earliest = op->deadline;
  }
  return earliest;
}

void UcxOps::FinishAll(const absl::Status& status) {
  for (const auto& op : ops_) {
    op->status.Update(status);
    Finish(op.get());
  }
}

void UcxOps::ReleaseRequests() {
  for (const auto& op : ops_) op->requests.clear();
}

void UcxOps::Clear() {
  ready_.clear();
  queued_.clear();
  ops_.clear();
}

void UcxOps::PutCb(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<UcxOp*>(user_data);
  FreeCompleted(op->requests, request);
  --op->puts_outstanding;
  if (status != UCS_OK) {
    op->status.Update(UcsStatus(status, absl::StrCat("put to ", op->ep->tag)));
  }
  op->owner->MarkReady(op);
}

void UcxOps::OtherCb(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<UcxOp*>(user_data);
  FreeCompleted(op->requests, request);
  --op->other_outstanding;
  if (status != UCS_OK) {
    op->status.Update(UcsStatus(
        status,
        absl::StrCat(op->kind == UcxOpKind::kNotify ? "notice to " : "flush to ", op->ep->tag)));
  }
  op->owner->MarkReady(op);
}

}  // namespace tandem
