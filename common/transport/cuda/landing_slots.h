// The owner side of CudaKvTransport's staged path: which landing slot belongs to whom.
//
// Writers ask for slots per transfer (AddDemand); Grant() hands free slots out round robin over
// the waiting transfers, at most `max_per_transfer` held by one transfer at a time, each grant
// with a number never used before. A chunk put into a slot is accepted only under the grant it
// was given (BeginFill); the slot is free again once its bytes were copied out (Release) or the
// writer gave it back (Return). A granted slot not filled by the transfer's expiry is taken back
// (Expire). Plain data structure, no threads, no clock of its own.
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_LANDING_SLOTS_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_LANDING_SLOTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/transport/cuda/staged_messages.h"

namespace tandem {

class LandingSlots {
 public:
  LandingSlots(int num_slots, int max_per_transfer);

  // Transfer `transfer` of writer `writer_id` wants `chunks` more slots until `expires`.
  void AddDemand(uint64_t writer_id, const std::string& reply_address, uint64_t transfer,
                 uint32_t chunks, absl::Time expires);

  struct GrantBatch {
    uint64_t writer_id = 0;
    std::string reply_address;
    uint64_t transfer = 0;
    std::vector<SlotGrant> grants;
  };
  // Gives free slots to waiting transfers; one batch per transfer that got any.
  std::vector<GrantBatch> Grant();

  // A chunk of `transfer` arrived in `grant.slot`: OK when that slot is granted to it under
  // `grant.grant` (the slot is then filling until Release); else FailedPrecondition saying why.
  absl::Status BeginFill(uint64_t writer_id, uint64_t transfer, const SlotGrant& grant);
  // The filling slot's bytes were copied out (or given up on): the slot is free.
  void Release(uint32_t slot);
  // The writer gives an unfilled slot back because its transfer ended: the transfer gets no more
  // grants. False when the slot was not granted under that grant.
  bool Return(uint64_t writer_id, const SlotGrant& grant);
  // Takes back granted, unfilled slots whose transfer expired before `now`, and forgets expired
  // demand. Returns the number of slots taken back.
  int Expire(absl::Time now);

  int num_slots() const { return static_cast<int>(slots_.size()); }
  int free_slots() const;
  // Transfers with demand or slots held.
  int transfers() const { return static_cast<int>(demands_.size()); }

 private:
  enum class SlotState { kFree, kGranted, kFilling };
  struct Slot {
    SlotState state = SlotState::kFree;
    uint64_t grant = 0;
    uint64_t writer_id = 0;
    uint64_t transfer = 0;
    absl::Time expires;
  };
  struct Demand {
    uint64_t writer_id = 0;
    std::string reply_address;
    uint64_t transfer = 0;
    uint32_t wanted = 0;  // slots still to grant
    int held = 0;         // slots granted or filling
    absl::Time expires;
  };

  Demand* FindDemand(uint64_t writer_id, uint64_t transfer);
  // A slot of (writer, transfer) is free again: updates its demand, drops it when finished.
  void Unhold(uint64_t writer_id, uint64_t transfer);
  void Free(uint32_t slot);

  const int max_per_transfer_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;   // free slot indices (a stack)
  std::vector<Demand> demands_;  // in arrival order
  size_t next_demand_ = 0;       // round-robin start
  uint64_t next_grant_ = 1;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_LANDING_SLOTS_H_
