#include "router/attempt_verdict.h"

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace {

grpc::Status WithContext(const grpc::Status& status, const std::string& what) {
  return grpc::Status(status.error_code(), absl::StrCat(what, ": ", status.error_message()));
}

bool Unreachable(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE;
}

// The stream went to its end (a stop string also cancels the decode node), or the client went
// away or the request expired (the decode node is cancelled); nullopt when it failed otherwise.
std::optional<AttemptVerdict> EndedWithTheStream(const AttemptFacts& f) {
  AttemptVerdict v;
  // Finished only if the client took the last response (a failed write means it is gone, or the
  // deadline aborted it): then it ends below as cancelled or late, not as OK.
  if (f.stream.finished && !f.client_gone) {
    v.stop_string_hit = f.stream.stopped;
    v.cancel_decode = f.stream.stopped;
    return v;
  }
  if (f.client_gone || f.client_cancelled || f.timed_out) {
    v.cancel_decode = true;
    v.status =
        f.timed_out && !f.client_cancelled
            ? grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "the request ran past its deadline")
            : grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled");
    return v;
  }
  return std::nullopt;
}

// The decode stream's own status; OK without a finish reason is a broken stream.
grpc::Status StreamStatus(const AttemptFacts& f, const char* ok_but_unfinished) {
  return f.stream.status.ok() ? grpc::Status(grpc::StatusCode::INTERNAL, ok_but_unfinished)
                              : f.stream.status;
}

// Tokens reached the client and the decode stream failed: the request may migrate to another
// decode node with them, unless the node found the request itself bad.
void JudgeAfterTokens(const AttemptFacts& f, AttemptVerdict* v) {
  const grpc::Status& status = f.stream.status;
  v->blame_decode = true;
  v->cancel_decode = true;  // whatever the failed stream still holds there
  v->migrate = status.ok() || RetryableCode(status.error_code());
  if (f.attempt_timed_out) {
    v->migration_reason = MigrationReason::kFirstTokenTimeout;
  } else if (status.ok()) {
    v->migration_reason = MigrationReason::kStreamBroken;
  } else if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    v->migration_reason = MigrationReason::kNodeUnreachable;
  } else if (status.error_code() == grpc::StatusCode::CANCELLED ||
             status.error_code() == grpc::StatusCode::ABORTED) {
    v->migration_reason = MigrationReason::kStreamAborted;
  } else {
    v->migration_reason = MigrationReason::kStreamFailed;
  }
}

AttemptVerdict JudgeReserveFailure(const AttemptFacts& f) {
  AttemptVerdict v;
  v.blame_decode = true;
  if (f.reserve == ReserveEnd::kNoEvent) {
    v.status = WithContext(f.reserve_status, absl::StrCat(f.decode_name, ": Reserve"));
    v.retry = RetryableCode(f.reserve_status.error_code());
    v.reason = f.attempt_timed_out ? RetryReason::kFirstTokenTimeout : RetryReason::kReserveFailed;
    v.decode_unreachable = Unreachable(f.reserve_status);
    return v;
  }
  v.cancel_decode = true;
  v.status = grpc::Status(grpc::StatusCode::INTERNAL,
                          absl::StrCat(f.decode_name, ": Reserve's first event has no handoff"));
  v.retry = true;
  v.reason = RetryReason::kBadHandoff;
  return v;
}

AttemptVerdict JudgeDisaggregated(const AttemptFacts& f) {
  if (f.reserve != ReserveEnd::kHandoff) return JudgeReserveFailure(f);
  AttemptVerdict v;
  // A prefill that did not complete may still hold work on P.
  const bool cancel_prefill = f.prefill != PrefillEnd::kOk &&
                              (f.prefill == PrefillEnd::kCancelledByRouter || !f.stream.finished);
  if (std::optional<AttemptVerdict> ended = EndedWithTheStream(f)) {
    ended->cancel_prefill = cancel_prefill;
    return *ended;
  }
  v.cancel_prefill = cancel_prefill;
  if (f.sent_tokens) {
    // Tokens reached the client: no retry from the prompt; a migration, or the node's status.
    const grpc::Status status = StreamStatus(f, "the stream ended without a finish reason");
    v.decode_unreachable = Unreachable(status);
    v.status = WithContext(status, f.decode_name);
    JudgeAfterTokens(f, &v);
    return v;
  }
  // Nothing reached the client: release what this attempt holds, then retry elsewhere.
  v.cancel_decode = true;
  if (f.attempt_timed_out) {
    // The first-token timer cancelled the calls: whatever they answered is not their fault.
    v.status =
        grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                     absl::StrCat("no first token from ", f.decode_name, " (prefill on ",
                                  f.prefill_name, ") within ", f.first_token_timeout_ms, " ms"));
    v.retry = true;
    v.reason = RetryReason::kFirstTokenTimeout;
    v.blame_decode = true;
    v.blame_prefill = true;
    return v;
  }
  if (f.prefill == PrefillEnd::kFailed) {
    v.prefill_unreachable = Unreachable(f.prefill_status);
    v.status = WithContext(f.prefill_status, absl::StrCat(f.prefill_name, ": Prefill"));
    v.retry = RetryableCode(f.prefill_status.error_code());
    v.reason = RetryReason::kPrefillFailed;
    v.blame_prefill = true;
    return v;
  }
  const grpc::Status status = StreamStatus(f, "the stream ended without tokens or a finish reason");
  v.decode_unreachable = Unreachable(status);
  v.status = WithContext(status, f.decode_name);
  v.retry = RetryableCode(status.error_code());
  v.reason = RetryReason::kDecodeFailed;
  v.blame_decode = true;
  return v;
}

AttemptVerdict JudgeLocal(const AttemptFacts& f) {
  if (std::optional<AttemptVerdict> ended = EndedWithTheStream(f)) return *ended;
  AttemptVerdict v;
  const grpc::Status status = StreamStatus(f, "the stream ended without a finish reason");
  v.decode_unreachable = Unreachable(status);
  v.status = WithContext(status, absl::StrCat(f.decode_name, ": Generate"));
  if (f.sent_tokens) {
    JudgeAfterTokens(f, &v);
    return v;
  }
  v.cancel_decode = true;
  v.blame_decode = true;
  if (f.attempt_timed_out) {
    v.status = grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                            absl::StrCat("no first token from ", f.decode_name, " within ",
                                         f.first_token_timeout_ms, " ms"));
    v.retry = true;
    v.reason = RetryReason::kFirstTokenTimeout;
  } else {
    v.retry = RetryableCode(status.error_code());
    v.reason = RetryReason::kDecodeFailed;
  }
  return v;
}

}  // namespace

bool RetryableCode(grpc::StatusCode code) {
  return code != grpc::StatusCode::INVALID_ARGUMENT && code != grpc::StatusCode::OUT_OF_RANGE;
}

AttemptVerdict JudgeAttempt(const AttemptFacts& facts) {
  return facts.kind == PlacementKind::kDisaggregated ? JudgeDisaggregated(facts)
                                                     : JudgeLocal(facts);
}

}  // namespace tandem
