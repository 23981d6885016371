#include "tools/sim/sim_faults.h"

#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tandem::sim {

absl::StatusOr<std::vector<NodeKill>> ParseNodeKills(const std::string& spec) {
  std::vector<NodeKill> kills;
  if (spec.empty()) return kills;
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    const std::vector<absl::string_view> fields = absl::StrSplit(part, absl::MaxSplits(':', 1));
    NodeKill kill;
    if (fields.size() != 2 || !absl::SimpleAtod(fields[0], &kill.at_s) ||
        !std::isfinite(kill.at_s) || kill.at_s < 0 || fields[1].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--kill-node-at: '", part, "' is not SECONDS:NODE (e.g. 30:decode-0)"));
    }
    kill.node = std::string(fields[1]);
    kills.push_back(std::move(kill));
  }
  return kills;
}

AttemptFacts FactsOfKilledAttempt(const KilledAttempt& a) {
  const grpc::Status died(grpc::StatusCode::UNAVAILABLE, "the node died");
  AttemptFacts f;
  f.kind = a.kind;
  f.decode_name = a.decode_name;
  f.prefill_name = a.prefill_name;
  f.sent_tokens = a.sent_tokens;
  if (a.kind != PlacementKind::kDisaggregated) {
    f.stream.status = died;  // Generate's stream breaks
    return f;
  }
  if (a.decode_died && !a.reserved) {
    f.reserve = ReserveEnd::kNoEvent;  // Reserve's stream broke before its handoff
    f.reserve_status = died;
    return f;
  }
  f.reserve = ReserveEnd::kHandoff;
  if (a.decode_died) {
    // The decode stream broke; a prefill still running is cancelled by the router.
    f.stream.status = died;
    f.prefill = a.prefilled ? PrefillEnd::kOk : PrefillEnd::kCancelledByRouter;
  } else {
    // Prefill failed; the router cancels the decode stream still waiting for the KV.
    f.prefill = PrefillEnd::kFailed;
    f.prefill_status = died;
    f.stream.status = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the router");
  }
  return f;
}

AttemptFacts FactsOfRefusedPrefill(const KilledAttempt& a) {
  AttemptFacts f;
  f.kind = PlacementKind::kDisaggregated;
  f.decode_name = a.decode_name;
  f.prefill_name = a.prefill_name;
  f.sent_tokens = a.sent_tokens;
  f.reserve = ReserveEnd::kHandoff;
  f.prefill = PrefillEnd::kFailed;
  f.prefill_status = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                  "the prompt cannot be scheduled: the KV pool is too small");
  f.stream.status = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the router");
  return f;
}

}  // namespace tandem::sim
