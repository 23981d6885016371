// Conversions between the KV handoff's wire form (tandem.v1 KvHandoff, KvLayoutDescriptor,
// KvCompletion) and the plain structs engines and transports use, with the checks both node
// roles share: layout compatibility, block ids inside the pool, cached tokens on block bounds.
#ifndef TANDEM_COMMON_HANDOFF_HANDOFF_CODEC_H_
#define TANDEM_COMMON_HANDOFF_HANDOFF_CODEC_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/engine/request.h"
#include "common/kv/kv_dtype.h"
#include "common/kv/kv_layout.h"
#include "common/transport/kv_transport.h"
#include "tandem/v1/node.pb.h"

namespace tandem {

tandem::v1::KvLayoutDescriptor KvLayoutToProto(const KvLayout& layout);
// InvalidArgument for an unknown dtype or a non-positive dimension.
absl::StatusOr<KvLayout> KvLayoutFromProto(const tandem::v1::KvLayoutDescriptor& proto);

// OK when KV written with `local`'s geometry can be read with `remote`'s: everything but
// num_blocks equal (dtype and, for fp8, the scales' fingerprint included). Otherwise
// InvalidArgument naming the first field that differs and both values.
absl::Status CheckLayoutsCompatible(const KvLayout& local, const KvLayout& remote);

// Where and what one request's KV goes to: a handoff, decoded.
struct KvWriteTarget {
  KvTarget target;
  KvLayout layout;  // the decode node's pool
  // block_ids[i] holds prompt positions [i * block_size, (i + 1) * block_size).
  std::vector<int32_t> block_ids;
  int32_t num_cached_tokens = 0;  // a whole number of blocks the writer skips
  RequestId decode_request_id = 0;
  uint64_t decode_incarnation = 0;
  // The reservation's epoch and checksum key (kv_checksum.h); an empty key: no checksums.
  uint64_t epoch = 0;
  std::string checksum_key;
};

// What a decode node binds to one reservation for the integrity checks (kv_checksum.h).
struct KvSeal {
  uint64_t epoch = 0;
  std::string checksum_key;  // empty: this node does not verify checksums
};

// Checks the target alone: non-empty address and key, block ids inside the remote pool,
// num_cached_tokens a whole number of blocks no larger than the blocks given, a checksum key of
// kKvChecksumKeyBytes or none.
absl::Status ValidateKvWriteTarget(const KvWriteTarget& target);

// Decode node: the handoff for `reservation`, publishing `transport`'s address and pool, sealed
// with `seal`.
tandem::v1::KvHandoff MakeKvHandoff(const KvReservation& reservation, const KvTransport& transport,
                                    const KvLayout& layout, uint64_t decode_incarnation,
                                    int64_t lease_remaining_ms, const KvSeal& seal);

// Prefill node: decodes and validates a handoff. `transport_name` is the local transport's
// name(): a handoff for another kind of transport is FailedPrecondition.
absl::StatusOr<KvWriteTarget> KvWriteTargetFromHandoff(const tandem::v1::KvHandoff& handoff,
                                                       std::string_view transport_name);
// The time by which the writes and the completion must be done: `received_at` plus the lease
// time the handoff had left.
absl::Time HandoffDeadline(const tandem::v1::KvHandoff& handoff, absl::Time received_at);

// The notice a writer sends when it is done with `target`: ok with the first token (and
// rng_counter) and the written blocks' checksums, or not ok with `status`'s message. Carries
// target.epoch.
tandem::v1::KvCompletion MakeKvCompletion(const KvWriteTarget& target, uint64_t prefill_incarnation,
                                          const absl::Status& status,
                                          const GenerationEvent* first_token, uint64_t rng_counter,
                                          std::span<const uint64_t> block_checksums = {});

// Decode node: parses a notice payload (InvalidArgument when it is not a KvCompletion).
absl::StatusOr<tandem::v1::KvCompletion> ParseKvCompletion(std::string_view payload);
// The engine's view of a successful completion.
ImportedPrefill ImportedPrefillFromCompletion(const tandem::v1::KvCompletion& completion);

}  // namespace tandem

#endif  // TANDEM_COMMON_HANDOFF_HANDOFF_CODEC_H_
