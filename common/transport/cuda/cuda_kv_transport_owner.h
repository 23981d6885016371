// The owner's side of CudaKvTransport (protocol: staged_messages.h): grants its landing slots to
// writers' transfers (LandingSlots), copies each chunk put into a slot host to device into the
// pool and acknowledges it, takes back slots left unfilled past their transfer's deadline plus
// grant_grace, and delivers notices to the handler. Owns the slot table and the fill fences;
// touches the copier, the landing slots of the host region, the inner transport (replies), the
// published handler and the counters. Slot states: landing_slots.h.
#ifndef TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_OWNER_H_
#define TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_OWNER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/transport/cuda/cuda_kv_transport_context.h"
#include "common/transport/cuda/landing_slots.h"
#include "common/transport/cuda/staged_messages.h"

namespace tandem::cuda_internal {

class StagedOwner {
 public:
  explicit StagedOwner(TransportContext& ctx)
      : ctx_(ctx), slots_(ctx.options.landing_slots, ctx.options.max_slots_per_transfer) {}

  StagedOwner(const StagedOwner&) = delete;
  StagedOwner& operator=(const StagedOwner&) = delete;

  // Writers' messages.
  void OnRequest(const StagedMessage& m);
  void OnChunk(const StagedMessage& m);
  void OnReturn(const StagedMessage& m);
  void Deliver(const std::string& payload);

  bool has_fences() const { return !fills_.empty(); }
  // Acknowledges the chunks whose copy into the pool ended, and grants their slots again.
  void Poll();
  // Some transfer holds or wants slots (grants may expire).
  bool holds_slots() const { return slots_.transfers() > 0; }
  // Takes back granted slots whose transfer expired, and grants them again.
  void ExpireGrants(absl::Time now);

 private:
  // A copy of a landing slot into the pool.
  struct FillFence {
    uint64_t fence;
    uint32_t slot;
    uint64_t writer_id;
    std::string reply_address;
    uint64_t transfer;
    absl::Status queue_error;  // an error queuing its copies
  };

  // OK when `m`'s segments fit the slot and the pool.
  absl::Status CheckSegments(const StagedMessage& m) const;
  // Queues the copies of slot `slot`'s segments into the pool and their fence; answers at once
  // when no fence could be had (the slot then stays out of use).
  void Fill(const StagedMessage& m, uint32_t slot, absl::Status status);
  void GrantSlots();
  void SendToWriter(const std::string& address, StagedMessage m);
  void ReplyChunkDone(const std::string& address, uint64_t transfer, uint32_t slot,
                      absl::Status status);

  TransportContext& ctx_;
  LandingSlots slots_;
  std::vector<FillFence> fills_;
};

}  // namespace tandem::cuda_internal

#endif  // TANDEM_COMMON_TRANSPORT_CUDA_CUDA_KV_TRANSPORT_OWNER_H_
