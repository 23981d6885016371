// What happened to one attempt at a request, and what the runner does about it: one pure function
// over plain facts (no gRPC calls, no clock), so every ending is unit-tested on its own
// (tests/router/attempt_verdict_test.cc). RequestRunner gathers the facts from its node calls,
// asks JudgeAttempt, and carries out the verdict: Cancel RPCs, marking nodes down, retrying
// elsewhere or ending the request.
#ifndef TANDEM_ROUTER_ATTEMPT_VERDICT_H_
#define TANDEM_ROUTER_ATTEMPT_VERDICT_H_

#include <cstdint>
#include <string>

#include "grpcpp/support/status.h"
#include "router/placement.h"
#include "router/router_counters.h"

namespace tandem {

// How reading one decode node stream ended.
struct StreamOutcome {
  bool stopped = false;   // a stop string ended the output; the router cancelled the stream
  bool finished = false;  // the last response (finish_reason set) went to the client
  grpc::Status status;    // the node stream's status
};

// How DecodeNode.Reserve's stream began (disaggregated attempts).
enum class ReserveEnd {
  kHandoff,    // its first event carried the handoff: prefill ran and the stream was read
  kNoEvent,    // the stream ended before any event (reserve_status says why)
  kNoHandoff,  // its first event had no handoff (a broken node)
};

// How the PrefillNode.Prefill call ended (disaggregated attempts with a handoff).
enum class PrefillEnd {
  kOk,                 // answered OK
  kFailed,             // answered with an error the router did not cause (prefill_status)
  kCancelledByRouter,  // the router cancelled it (the stream ended first), answered or not: not
                       // the node's fault
};

struct AttemptFacts {
  PlacementKind kind = PlacementKind::kDisaggregated;
  std::string decode_name;   // "decode node ADDRESS"
  std::string prefill_name;  // "prefill node ADDRESS" (disaggregated)
  int64_t first_token_timeout_ms = 0;

  ReserveEnd reserve = ReserveEnd::kHandoff;
  grpc::Status reserve_status;
  PrefillEnd prefill = PrefillEnd::kOk;
  grpc::Status prefill_status;
  // The decode stream (Reserve's after the handoff, or Generate's).
  StreamOutcome stream;

  bool client_gone = false;        // a write to the client failed
  bool client_cancelled = false;   // the client went away (the watchdog saw it)
  bool timed_out = false;          // the request's deadline passed
  bool attempt_timed_out = false;  // no first token within first_token_timeout_ms
  bool sent_tokens = false;        // tokens of this request reached the client
};

struct AttemptVerdict {
  grpc::Status status;  // OK: the request is done
  bool retry = false;   // another pair may succeed (the runner also checks tokens and limits)
  RetryReason reason = RetryReason::kDecodeFailed;
  // Tokens already reached the client and the decode side failed: another decode node may go on
  // from them (request migration; the runner checks --migration-limit).
  bool migrate = false;
  MigrationReason migration_reason = MigrationReason::kStreamFailed;
  // Nodes this request should not use again if it can avoid them.
  bool blame_decode = false;
  bool blame_prefill = false;
  // Calls answered UNAVAILABLE: the node looks unreachable (NodeDirectory::ReportFailure).
  bool decode_unreachable = false;
  bool prefill_unreachable = false;
  // Send Cancel to free what the attempt may still hold on the node.
  bool cancel_decode = false;
  bool cancel_prefill = false;
  bool stop_string_hit = false;
};

AttemptVerdict JudgeAttempt(const AttemptFacts& facts);

// OK unless the node found the request itself bad (another node would too).
bool RetryableCode(grpc::StatusCode code);

}  // namespace tandem

#endif  // TANDEM_ROUTER_ATTEMPT_VERDICT_H_
