// StagedOwner (cuda_kv_transport_owner.h): landing slots, fills into the pool, replies, notices.
// Touches the copier, the landing slots of the host region, the inner transport (replies), the
// published handler and the counters.
#include "common/transport/cuda/cuda_kv_transport_owner.h"

#include <algorithm>
#include <cstddef>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace tandem::cuda_internal {

void StagedOwner::OnRequest(const StagedMessage& m) {
  if (!ctx_.host) {
    ReplyChunkDone(m.reply_address, m.transfer, 0,
                   absl::FailedPreconditionError("cuda transport owner: no pool registered"));
    return;
  }
  const absl::Time expires = ctx_.Now() + absl::Milliseconds(std::max<int64_t>(0, m.time_left_ms)) +
                             ctx_.options.grant_grace;
  slots_.AddDemand(m.writer_id, m.reply_address, m.transfer, m.chunks, expires);
  GrantSlots();
}

void StagedOwner::OnReturn(const StagedMessage& m) {
  for (const SlotGrant& g : m.grants) slots_.Return(m.writer_id, g);
  GrantSlots();
}

void StagedOwner::Deliver(const std::string& payload) {
  NoticeHandler handler = ctx_.published.HandlerForNotice();
  if (handler) {
    handler(payload);
  } else {
    spdlog::warn("cuda transport: notice of {} bytes dropped: no handler", payload.size());
  }
}

void StagedOwner::GrantSlots() {
  for (LandingSlots::GrantBatch& b : slots_.Grant()) {
    StagedMessage g;
    g.type = StagedMessageType::kGrant;
    g.transfer = b.transfer;
    g.grants = std::move(b.grants);
    SendToWriter(b.reply_address, std::move(g));
  }
}

void StagedOwner::SendToWriter(const std::string& address, StagedMessage m) {
  if (!ctx_.loop.issuing()) return;
  KvTarget writer;
  writer.address = address;
  const std::string type = StagedMessageTypeName(m.type);
  // The message carries the owner's address, for returning grants.
  ctx_.SendMessage(writer, std::move(m), ctx_.Now() + ctx_.options.control_timeout,
                   [tag = PeerTag(address), type](absl::Status s) {
                     if (!s.ok()) {
                       // The writer's own deadline fails its transfer; slots come back at expiry.
                       spdlog::warn("cuda transport: {} to writer {} failed: {}", type, tag,
                                    s.ToString());
                     }
                   });
}

void StagedOwner::ReplyChunkDone(const std::string& address, uint64_t transfer, uint32_t slot,
                                 absl::Status status) {
  StagedMessage done;
  done.type = StagedMessageType::kChunkDone;
  done.transfer = transfer;
  done.grants = {SlotGrant{slot, 0}};
  done.status = std::move(status);
  SendToWriter(address, std::move(done));
}

void StagedOwner::OnChunk(const StagedMessage& m) {
  if (m.grants.size() != 1) {
    ReplyChunkDone(m.reply_address, m.transfer, 0,
                   absl::InvalidArgumentError("chunk message without exactly one slot"));
    return;
  }
  const SlotGrant g = m.grants[0];
  absl::Status s = slots_.BeginFill(m.writer_id, m.transfer, g);
  if (!s.ok()) {
    ReplyChunkDone(m.reply_address, m.transfer, g.slot, s);
    return;
  }
  // Check the segments against the slot and the pool before copying anything.
  Fill(m, g.slot, CheckSegments(m));
}

absl::Status StagedOwner::CheckSegments(const StagedMessage& m) const {
  uint64_t total = 0;
  for (const StagedSegment& seg : m.segments) {
    if (seg.dst_offset > ctx_.pool_bytes || seg.bytes > ctx_.pool_bytes - seg.dst_offset) {
      return absl::InvalidArgumentError(absl::StrCat("chunk segment [", seg.dst_offset, ", +",
                                                     seg.bytes, ") is outside the ",
                                                     ctx_.pool_bytes, "-byte pool"));
    }
    total += seg.bytes;
    if (total > ctx_.options.chunk_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("chunk of more than ", ctx_.options.chunk_bytes, " bytes"));
    }
  }
  return absl::OkStatus();
}

void StagedOwner::Fill(const StagedMessage& m, uint32_t slot, absl::Status status) {
  const char* src = ctx_.landing_slot(slot);
  uint64_t at = 0;
  for (size_t i = 0; status.ok() && i < m.segments.size(); ++i) {
    status = ctx_.copier->Copy(ctx_.pool + m.segments[i].dst_offset, src + at, m.segments[i].bytes);
    at += m.segments[i].bytes;
  }
  absl::StatusOr<uint64_t> fence = ctx_.copier->Fence();
  if (!fence.ok()) {
    // No way to know when the copies end: keep the slot out of use.
    spdlog::error("cuda transport: landing slot {} lost: {}", slot, fence.status().ToString());
    ReplyChunkDone(m.reply_address, m.transfer, slot, fence.status());
    return;
  }
  fills_.push_back({*fence, slot, m.writer_id, m.reply_address, m.transfer, std::move(status)});
  ctx_.published.Count([](CudaKvTransportStats& st) { ++st.chunks_received; });
}

void StagedOwner::Poll() {
  EndPassedFences(*ctx_.copier, fills_, [this](const FillFence& f, const absl::Status& s) {
    ReplyChunkDone(f.reply_address, f.transfer, f.slot, s);
    slots_.Release(f.slot);
    GrantSlots();
  });
}

void StagedOwner::ExpireGrants(absl::Time now) {
  if (!holds_slots()) return;
  const int taken = slots_.Expire(now);
  if (taken > 0) {
    spdlog::warn("cuda transport: took back {} landing slots unfilled past their deadline", taken);
    ctx_.published.Count([taken](CudaKvTransportStats& s) { s.grants_reclaimed += taken; });
    GrantSlots();
  }
}

}  // namespace tandem::cuda_internal
