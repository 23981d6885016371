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

void StagedSends::Start(Peer* peer, uint64_t number, const std::vector<KvCopy>& copies,
                        absl::Time deadline, TransferDone done) {
  auto send = std::make_shared<StagedSend>();
  send->transfer = next_transfer_++;
  send->number = number;
  send->peer = peer;
  send->inbox = peer->inbox();
  send->chunks = PlanStagedChunks(
      copies, std::min<uint64_t>(ctx_.options.chunk_bytes, peer->descriptor.slot_bytes));
  send->deadline = deadline;
  send->done = std::move(done);
  sends_[send->transfer] = send;
  StagedMessage request;
  request.type = StagedMessageType::kRequest;
  request.transfer = send->transfer;
  request.chunks = static_cast<uint32_t>(send->chunks.size());
  request.time_left_ms = ToMillisCeil(deadline - ctx_.Now());
  SendToOwner(send, std::move(request));
  PumpStaging();
}

void StagedSends::SendToOwner(const std::shared_ptr<StagedSend>& send, StagedMessage m) {
  std::weak_ptr<StagedSend> weak = send;
  const StagedMessageType type = m.type;
  ctx_.SendMessage(send->inbox, std::move(m), send->deadline, [this, weak, type](absl::Status s) {
    if (s.ok()) return;
    ctx_.loop.Post([this, weak, type, s](bool cancelled) {
      std::shared_ptr<StagedSend> send = weak.lock();
      if (cancelled || send == nullptr) return;
      Finish(send,
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
    for (auto& [transfer, entry] : sends_) {
      const std::shared_ptr<StagedSend> send = entry;  // Finish may erase `entry`
      if (send->state != SendState::kActive || send->next_stage >= send->chunks.size()) continue;
      if (send->staging + send->ready.size() >= send->grants.size()) continue;
      const std::optional<int> buffer = ring_.Take();
      if (!buffer.has_value()) return;
      if (!StageNext(send, *buffer)) return;  // sends_ changed
      progress = true;
    }
  }
}

bool StagedSends::StageNext(const std::shared_ptr<StagedSend>& send, int buffer) {
  const size_t index = send->next_stage++;
  const StagedChunk& chunk = send->chunks[index];
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
    Finish(send, s, /*return_grants=*/true);
    return false;
  }
  ++send->staging;
  fences_.push_back({*fence, send, index, buffer, s});
  return true;
}

void StagedSends::FreeStagingBuffer(int buffer) {
  ring_.Free(buffer);
  PumpStaging();
}

void StagedSends::OnStaged(const StageFence& f, const absl::Status& status) {
  StagedSend& send = *f.send;
  --send.staging;
  if (!status.ok() || send.state == SendState::kEnded) {
    if (send.state == SendState::kActive) Finish(f.send, status, /*return_grants=*/true);
    FreeStagingBuffer(f.buffer);
    return;
  }
  send.ready.push_back({f.chunk, f.buffer});
  SendReadyChunks(f.send);
}

void StagedSends::SendReadyChunks(const std::shared_ptr<StagedSend>& send) {
  while (send->state == SendState::kActive && !send->ready.empty() && !send->grants.empty()) {
    const StagedSend::Ready ready = send->ready.front();
    send->ready.pop_front();
    const SlotGrant grant = send->grants.front();
    send->grants.pop_front();
    PutChunk(send, ready, grant);
  }
}

void StagedSends::PutChunk(const std::shared_ptr<StagedSend>& send, const StagedSend::Ready& ready,
                           const SlotGrant& grant) {
  const StagedChunk& chunk = send->chunks[ready.chunk];
  const KvCopy put{static_cast<uint64_t>(ready.buffer) * ctx_.options.chunk_bytes,
                   static_cast<uint64_t>(grant.slot) * send->peer->descriptor.slot_bytes,
                   chunk.bytes};
  std::weak_ptr<StagedSend> weak = send;
  const int buffer = ready.buffer;
  ctx_.inner->Write(send->inbox, {put}, send->deadline, [this, weak, buffer](absl::Status s) {
    ctx_.loop.Post([this, weak, buffer, s](bool cancelled) {
      if (cancelled) return;
      // The put no longer reads the buffer.
      std::shared_ptr<StagedSend> send = weak.lock();
      if (!s.ok() && send != nullptr) {
        Finish(send, absl::Status(s.code(), absl::StrCat("cuda transport: put: ", s.message())),
               /*return_grants=*/true);
      }
      FreeStagingBuffer(buffer);
    });
  });
  StagedMessage m;
  m.type = StagedMessageType::kChunk;
  m.transfer = send->transfer;
  m.grants = {grant};
  for (const KvCopy& piece : chunk.pieces) m.segments.push_back({piece.dst_offset, piece.bytes});
  SendToOwner(send, std::move(m));
  ctx_.published.Count([](CudaKvTransportStats& s) { ++s.chunks_sent; });
}

void StagedSends::Finish(const std::shared_ptr<StagedSend>& send, const absl::Status& status,
                         bool return_grants) {
  if (send->state == SendState::kEnded) return;
  send->state = SendState::kEnded;
  sends_.erase(send->transfer);
  if (return_grants) {
    for (const SlotGrant& g : send->grants) ReturnGrant(send->inbox, g);
  }
  send->grants.clear();
  std::deque<StagedSend::Ready> ready;
  ready.swap(send->ready);
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
  auto it = sends_.find(m.transfer);
  if (it == sends_.end()) {
    // The send ended: give the slots back.
    const KvTarget owner = peers_.InboxOf(m.reply_address);
    for (const SlotGrant& g : m.grants) ReturnGrant(owner, g);
    return;
  }
  std::shared_ptr<StagedSend> send = it->second;
  for (const SlotGrant& g : m.grants) send->grants.push_back(g);
  SendReadyChunks(send);
  PumpStaging();
}

void StagedSends::OnChunkDone(const StagedMessage& m) {
  auto it = sends_.find(m.transfer);
  if (it == sends_.end()) return;  // ended already
  std::shared_ptr<StagedSend> send = it->second;
  if (!m.status.ok()) {
    Finish(send,
           absl::Status(m.status.code(), absl::StrCat("cuda transport: the owner refused a chunk: ",
                                                      m.status.message())),
           /*return_grants=*/true);
    return;
  }
  if (++send->acknowledged == send->chunks.size()) {
    Finish(send, absl::OkStatus(), /*return_grants=*/true);
  }
}

void StagedSends::Poll() {
  for (size_t i = 0; i < fences_.size();) {
    absl::StatusOr<bool> passed = ctx_.copier->Poll(fences_[i].fence);
    if (passed.ok() && !*passed) {
      ++i;
      continue;
    }
    StageFence f = std::move(fences_[i]);
    fences_.erase(fences_.begin() + static_cast<ptrdiff_t>(i));
    absl::Status s = passed.status();
    if (s.ok()) s = f.queue_error;
    OnStaged(f, s);  // may append fences; `i` now names the next one
  }
}

absl::Time StagedSends::NextDeadline() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [transfer, send] : sends_) next = std::min(next, send->deadline);
  return next;
}

void StagedSends::ExpireDeadlines(absl::Time now) {
  std::vector<std::shared_ptr<StagedSend>> expired;
  for (const auto& [transfer, send] : sends_) {
    if (now >= send->deadline) expired.push_back(send);
  }
  for (const auto& send : expired) {
    Finish(send,
           absl::DeadlineExceededError(absl::StrCat("cuda transport: staged write to ",
                                                    send->peer->tag, " ran past its deadline")),
           /*return_grants=*/true);
  }
}

void StagedSends::CancelAll(const absl::Status& status) {
  std::vector<std::shared_ptr<StagedSend>> sends;
  for (const auto& [transfer, send] : sends_) sends.push_back(send);
  for (const auto& send : sends) Finish(send, status, /*return_grants=*/false);
}

}  // namespace tandem::cuda_internal
