// StagedSends (cuda_kv_transport_staged.h): the writer's staged path. Touches the copier, the
// inner transport (puts, messages), the peers' write numbering and the counters.
#include "common/transport/cuda/cuda_kv_transport_staged.h"

#include <algorithm>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace tandem::cuda_internal {

namespace {

int64_t ToMillisCeil(absl::Duration d) {
  return absl::ToInt64Milliseconds(absl::Ceil(d, absl::Milliseconds(1)));
}

}  // namespace

std::optional<int> StagingRing::Take() {
  for (size_t i = 0; i < free_.size(); ++i) {
    if (free_[i]) {
      free_[i] = false;
      return static_cast<int>(i);
    }
  }
  return std::nullopt;
}

StagedSend* StagedSends::Find(uint64_t transfer) {
  auto it = sends_.find(transfer);
  return it == sends_.end() ? nullptr : it->second.get();
}

void StagedSends::Start(Peer* peer, uint64_t number, const std::vector<KvCopy>& copies,
                        absl::Time deadline, TransferDone done) {
  auto owned = std::make_unique<StagedSend>();
  StagedSend& send = *owned;
  send.transfer = next_transfer_++;
  send.number = number;
  send.peer = peer;
  send.inbox = peer->inbox();
  send.chunks = PlanStagedChunks(
      copies, std::min<uint64_t>(ctx_.options.chunk_bytes, peer->descriptor.slot_bytes));
  send.deadline = deadline;
  send.done = std::move(done);
  sends_[send.transfer] = std::move(owned);
  StagedMessage request;
  request.type = StagedMessageType::kRequest;
  request.transfer = send.transfer;
  request.chunks = static_cast<uint32_t>(send.chunks.size());
  request.time_left_ms = ToMillisCeil(deadline - ctx_.Now());
  SendToOwner(send, std::move(request));
  PumpStaging();
}

void StagedSends::SendToOwner(const StagedSend& send, StagedMessage m) {
  const uint64_t transfer = send.transfer;
  const StagedMessageType type = m.type;
  ctx_.SendMessage(send.inbox, std::move(m), send.deadline, [this, transfer, type](absl::Status s) {
    if (s.ok()) return;
    ctx_.loop.Post([this, transfer, type, s](bool cancelled) {
      if (cancelled) return;
      Finish(transfer,
             absl::Status(s.code(),
                          absl::StrCat("cuda transport: sending a ", StagedMessageTypeName(type),
                                       " message: ", s.message())),
             /*return_grants=*/true);
    });
  });
}

// Staging only against grants keeps the two resources from deadlocking: a staging buffer never
// waits for a landing slot.
void StagedSends::PumpStaging() {
  if (!ctx_.loop.issuing()) return;
  bool progress = true;
  while (progress) {
    progress = false;
    for (auto& [transfer, send] : sends_) {
      if (send->next_stage >= send->chunks.size()) continue;
      if (send->staging + send->ready.size() >= send->grants.size()) continue;
      const std::optional<int> buffer = ring_.Take();
      if (!buffer.has_value()) return;
      if (!StageNext(*send, *buffer)) return;  // the send ended: sends_ changed
      progress = true;
    }
  }
}

bool StagedSends::StageNext(StagedSend& send, int buffer) {
  const size_t index = send.next_stage++;
  const StagedChunk& chunk = send.chunks[index];
  char* dst = ctx_.staging_buffer(buffer);
  absl::Status s;
  uint64_t at = 0;
  for (const KvCopy& piece : chunk.pieces) {
    s = ctx_.copier->Copy(dst + at, ctx_.pool + piece.src_offset, piece.bytes);
    if (!s.ok()) break;
    at += piece.bytes;
  }
  absl::StatusOr<uint64_t> fence = ctx_.copier->Fence();
  if (!fence.ok()) {
    if (s.ok()) s = fence.status();
    ring_.Free(buffer);  // no fence: nothing we queued can be waited for
    Finish(send.transfer, s, /*return_grants=*/true);
    return false;
  }
  ++send.staging;
  fences_.push_back({*fence, send.transfer, index, buffer, s});
  return true;
}

void StagedSends::FreeStagingBuffer(int buffer) {
  ring_.Free(buffer);
  PumpStaging();
}

void StagedSends::OnStaged(const StageFence& f, const absl::Status& status) {
  StagedSend* send = Find(f.transfer);
  if (send != nullptr) --send->staging;
  if (!status.ok() || send == nullptr) {
    if (send != nullptr) Finish(f.transfer, status, /*return_grants=*/true);
    FreeStagingBuffer(f.buffer);
    return;
  }
  send->ready.push_back({f.chunk, f.buffer});
  SendReadyChunks(*send);
}

void StagedSends::SendReadyChunks(StagedSend& send) {
  while (!send.ready.empty() && !send.grants.empty()) {
    const StagedSend::Ready ready = send.ready.front();
    send.ready.pop_front();
    const SlotGrant grant = send.grants.front();
    send.grants.pop_front();
    PutChunk(send, ready, grant);
  }
}

void StagedSends::PutChunk(const StagedSend& send, const StagedSend::Ready& ready,
                           const SlotGrant& grant) {
  const StagedChunk& chunk = send.chunks[ready.chunk];
  const KvCopy put{static_cast<uint64_t>(ready.buffer) * ctx_.options.chunk_bytes,
                   static_cast<uint64_t>(grant.slot) * send.peer->descriptor.slot_bytes,
                   chunk.bytes};
  const uint64_t transfer = send.transfer;
  const int buffer = ready.buffer;
  ctx_.inner->Write(send.inbox, {put}, send.deadline, [this, transfer, buffer](absl::Status s) {
    ctx_.loop.Post([this, transfer, buffer, s](bool cancelled) {
      if (cancelled) return;
      // The put no longer reads the buffer.
      if (!s.ok()) {
        Finish(transfer, absl::Status(s.code(), absl::StrCat("cuda transport: put: ", s.message())),
               /*return_grants=*/true);
      }
      FreeStagingBuffer(buffer);
    });
  });
  StagedMessage m;
  m.type = StagedMessageType::kChunk;
  m.transfer = send.transfer;
  m.grants = {grant};
  for (const KvCopy& piece : chunk.pieces) m.segments.push_back({piece.dst_offset, piece.bytes});
  SendToOwner(send, std::move(m));
  ctx_.published.Count([](CudaKvTransportStats& s) { ++s.chunks_sent; });
}

void StagedSends::Finish(uint64_t transfer, const absl::Status& status, bool return_grants) {
  auto node = sends_.extract(transfer);
  if (node.empty()) return;  // ended already
  const std::unique_ptr<StagedSend> send = std::move(node.mapped());
  if (return_grants) {
    for (const SlotGrant& g : send->grants) ReturnGrant(send->inbox, g);
  }
  const std::deque<StagedSend::Ready> ready = std::move(send->ready);
  TransferDone done = std::move(send->done);
  peers_.WriteEnded(send->peer, send->number);
  done(status);
  for (const StagedSend::Ready& r : ready) ring_.Free(r.buffer);
  if (!ready.empty()) PumpStaging();
}

void StagedSends::ReturnGrant(const KvTarget& inbox, const SlotGrant& g) {
  if (!ctx_.loop.issuing()) return;
  StagedMessage m;
  m.type = StagedMessageType::kReturn;
  m.grants = {g};
  ctx_.SendMessage(inbox, std::move(m), ctx_.Now() + ctx_.options.control_timeout,
                   [](absl::Status) {});  // best effort: the owner takes it back at expiry
}

void StagedSends::OnGrant(const StagedMessage& m) {
  StagedSend* send = Find(m.transfer);
  if (send == nullptr) {
    // The send ended: give the slots back.
    const KvTarget owner = peers_.InboxOf(m.reply_address);
    for (const SlotGrant& g : m.grants) ReturnGrant(owner, g);
    return;
  }
  for (const SlotGrant& g : m.grants) send->grants.push_back(g);
  SendReadyChunks(*send);
  PumpStaging();
}

void StagedSends::OnChunkDone(const StagedMessage& m) {
  StagedSend* send = Find(m.transfer);
  if (send == nullptr) return;  // ended already
  if (!m.status.ok()) {
    Finish(m.transfer,
           absl::Status(m.status.code(), absl::StrCat("cuda transport: the owner refused a chunk: ",
                                                      m.status.message())),
           /*return_grants=*/true);
    return;
  }
  if (++send->acknowledged == send->chunks.size()) {
    Finish(m.transfer, absl::OkStatus(), /*return_grants=*/true);
  }
}

void StagedSends::Poll() {
  // OnStaged may append fences; they are polled in this round too.
  EndPassedFences(*ctx_.copier, fences_,
                  [this](const StageFence& f, const absl::Status& s) { OnStaged(f, s); });
}

absl::Time StagedSends::NextDeadline() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [transfer, send] : sends_) next = std::min(next, send->deadline);
  return next;
}

void StagedSends::ExpireDeadlines(absl::Time now) {
  std::vector<uint64_t> expired;
  for (const auto& [transfer, send] : sends_) {
    if (now >= send->deadline) expired.push_back(transfer);
  }
  for (uint64_t transfer : expired) {
    const StagedSend* send = Find(transfer);
    if (send == nullptr) continue;  // ended meanwhile
    Finish(transfer,
           absl::DeadlineExceededError(absl::StrCat("cuda transport: staged write to ",
                                                    send->peer->tag, " ran past its deadline")),
           /*return_grants=*/true);
  }
}

void StagedSends::CancelAll(const absl::Status& status) {
  std::vector<uint64_t> transfers;
  for (const auto& [transfer, send] : sends_) transfers.push_back(transfer);
  for (uint64_t transfer : transfers) Finish(transfer, status, /*return_grants=*/false);
}

}  // namespace tandem::cuda_internal
