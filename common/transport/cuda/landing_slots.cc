#include "common/transport/cuda/landing_slots.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tandem {

LandingSlots::LandingSlots(int num_slots, int max_per_transfer)
    : max_per_transfer_(std::max(1, max_per_transfer)), slots_(std::max(0, num_slots)) {
  for (int i = num_slots - 1; i >= 0; --i) free_.push_back(static_cast<uint32_t>(i));
}

int LandingSlots::free_slots() const { return static_cast<int>(free_.size()); }

LandingSlots::Demand* LandingSlots::FindDemand(uint64_t writer_id, uint64_t transfer) {
  for (Demand& d : demands_) {
    if (d.writer_id == writer_id && d.transfer == transfer) return &d;
  }
  return nullptr;
}

void LandingSlots::AddDemand(uint64_t writer_id, const std::string& reply_address,
                             uint64_t transfer, uint32_t chunks, absl::Time expires) {
  Demand* d = FindDemand(writer_id, transfer);
  if (d == nullptr) {
    demands_.push_back(Demand{writer_id, reply_address, transfer, 0, 0, expires});
    d = &demands_.back();
  }
  d->wanted += chunks;
  d->expires = std::max(d->expires, expires);
}

std::vector<LandingSlots::GrantBatch> LandingSlots::Grant() {
  std::vector<GrantBatch> batches;
  std::vector<int> batch_of(demands_.size(), -1);
  bool progress = true;
  while (progress && !free_.empty() && !demands_.empty()) {
    progress = false;
    const size_t n = demands_.size();
    for (size_t k = 0; k < n && !free_.empty(); ++k) {
      const size_t i = (next_demand_ + k) % n;
      Demand& d = demands_[i];
      if (d.wanted == 0 || d.held >= max_per_transfer_) continue;
      const uint32_t slot = free_.back();
      free_.pop_back();
      Slot& s = slots_[slot];
      s.state = SlotState::kGranted;
      s.grant = next_grant_++;
      s.writer_id = d.writer_id;
      s.transfer = d.transfer;
      s.expires = d.expires;
      --d.wanted;
      ++d.held;
      if (batch_of[i] < 0) {
        batch_of[i] = static_cast<int>(batches.size());
        batches.push_back(GrantBatch{d.writer_id, d.reply_address, d.transfer, {}});
      }
      batches[batch_of[i]].grants.push_back({slot, s.grant});
      progress = true;
    }
  }
  if (!demands_.empty()) next_demand_ = (next_demand_ + 1) % demands_.size();
  return batches;
}

absl::Status LandingSlots::BeginFill(uint64_t writer_id, uint64_t transfer,
                                     const SlotGrant& grant) {
  if (grant.slot >= slots_.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("landing slot ", grant.slot, " does not exist (", slots_.size(), " slots)"));
  }
  Slot& s = slots_[grant.slot];
  if (s.state != SlotState::kGranted || s.grant != grant.grant || s.writer_id != writer_id ||
      s.transfer != transfer) {
    return absl::FailedPreconditionError(
        absl::StrCat("landing slot ", grant.slot, " is not granted to this transfer under grant ",
                     grant.grant, " (taken back after its deadline?)"));
  }
  s.state = SlotState::kFilling;
  return absl::OkStatus();
}

void LandingSlots::Free(uint32_t slot) {
  Slot& s = slots_[slot];
  const uint64_t writer_id = s.writer_id;
  const uint64_t transfer = s.transfer;
  s = Slot{};
  free_.push_back(slot);
  Unhold(writer_id, transfer);
}

void LandingSlots::Release(uint32_t slot) {
  if (slot >= slots_.size() || slots_[slot].state != SlotState::kFilling) return;
  Free(slot);
}

bool LandingSlots::Return(uint64_t writer_id, const SlotGrant& grant) {
  if (grant.slot >= slots_.size()) return false;
  const Slot& s = slots_[grant.slot];
  if (s.state != SlotState::kGranted || s.grant != grant.grant || s.writer_id != writer_id) {
    return false;
  }
  // Writers give slots back only once their transfer ended: it wants no more.
  if (Demand* d = FindDemand(writer_id, s.transfer)) d->wanted = 0;
  Free(grant.slot);
  return true;
}

void LandingSlots::Unhold(uint64_t writer_id, uint64_t transfer) {
  for (size_t i = 0; i < demands_.size(); ++i) {
    Demand& d = demands_[i];
    if (d.writer_id != writer_id || d.transfer != transfer) continue;
    --d.held;
    if (d.held <= 0 && d.wanted == 0) {
      demands_.erase(demands_.begin() + static_cast<ptrdiff_t>(i));
      if (next_demand_ > i) --next_demand_;
      if (next_demand_ >= demands_.size()) next_demand_ = 0;
    }
    return;
  }
}

int LandingSlots::Expire(absl::Time now) {
  int taken = 0;
  for (uint32_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].state == SlotState::kGranted && slots_[i].expires < now) {
      Free(i);
      ++taken;
    }
  }
  for (size_t i = 0; i < demands_.size();) {
    Demand& d = demands_[i];
    if (d.expires < now) d.wanted = 0;
    if (d.wanted == 0 && d.held <= 0) {
      demands_.erase(demands_.begin() + static_cast<ptrdiff_t>(i));
      if (next_demand_ > i) --next_demand_;
      if (next_demand_ >= demands_.size()) next_demand_ = 0;
    } else {
      ++i;
    }
  }
  return taken;
}

}  // namespace tandem
