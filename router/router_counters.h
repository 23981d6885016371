// Counts of every decision the router makes (ARCHITECTURE.md: "No silent fallback"): where each
// attempt was placed and why, each retry and its reason, and how requests ended. Plain atomics;
// RouterMetrics exports them.
#ifndef TANDEM_ROUTER_ROUTER_COUNTERS_H_
#define TANDEM_ROUTER_ROUTER_COUNTERS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tandem {

// Live KV migration: who paused the stream, and how its move ended.
enum class KvMoveTrigger {
  kNodePaused,  // its decode node paused it on its own (draining)
  kRebalance,   // this router asked (its node ran out of KV blocks while another had room)
};
inline constexpr int kNumKvMoveTriggers = 2;
enum class KvMoveResult {
  kMoved,     // the destination streams on with the moved KV
  kResumed,   // no destination with room, or the move failed: the source resumed the stream
  kFellBack,  // the source failed during the move: the request migrated by recomputing
};
inline constexpr int kNumKvMoveResults = 3;

inline std::string_view KvMoveTriggerName(KvMoveTrigger trigger) {
  return trigger == KvMoveTrigger::kNodePaused ? "node_paused" : "rebalance";
}
inline std::string_view KvMoveResultName(KvMoveResult result) {
  switch (result) {
    case KvMoveResult::kMoved:
      return "moved";
    case KvMoveResult::kResumed:
      return "resumed";
    case KvMoveResult::kFellBack:
      return "fell_back";
  }
  return "?";
}

enum class RetryReason {
  kReserveFailed,      // DecodeNode.Reserve failed before its handoff event
  kBadHandoff,         // Reserve's first event carried no handoff
  kPrefillFailed,      // PrefillNode.Prefill failed
  kDecodeFailed,       // the decode node's stream failed before the first token
  kFirstTokenTimeout,  // no first token within --first-token-timeout-ms
};
inline constexpr int kNumRetryReasons = 5;

inline std::string_view RetryReasonName(RetryReason reason) {
  switch (reason) {
    case RetryReason::kReserveFailed:
      return "reserve_failed";
    case RetryReason::kBadHandoff:
      return "bad_handoff";
    case RetryReason::kPrefillFailed:
      return "prefill_failed";
    case RetryReason::kDecodeFailed:
      return "decode_failed";
    case RetryReason::kFirstTokenTimeout:
      return "first_token_timeout";
  }
  return "?";
}

// Why a request whose tokens already reached the client moved to another decode node.
enum class MigrationReason {
  kNodeUnreachable,    // the decode node's stream failed UNAVAILABLE (death, restart, network)
  kStreamAborted,      // the node ended the stream CANCELLED/ABORTED (drain timeout, shutdown)
  kStreamFailed,       // any other error status from the node
  kStreamBroken,       // the stream ended OK without a finish reason
  kFirstTokenTimeout,  // a migrated attempt gave no token within --first-token-timeout-ms
};
inline constexpr int kNumMigrationReasons = 5;

inline std::string_view MigrationReasonName(MigrationReason reason) {
  switch (reason) {
    case MigrationReason::kNodeUnreachable:
      return "node_unreachable";
    case MigrationReason::kStreamAborted:
      return "stream_aborted";
    case MigrationReason::kStreamFailed:
      return "stream_failed";
    case MigrationReason::kStreamBroken:
      return "stream_broken";
    case MigrationReason::kFirstTokenTimeout:
      return "first_token_timeout";
  }
  return "?";
}

struct RouterCounters {
  // Requests and how they ended.
  std::atomic<int64_t> requests{0};
  std::atomic<int64_t> requests_ok{0};
  std::atomic<int64_t> requests_invalid{0};    // INVALID_ARGUMENT before placement
  std::atomic<int64_t> requests_refused{0};    // the admission queue was full, or its wait ran out
  std::atomic<int64_t> requests_cancelled{0};  // the client went away
  std::atomic<int64_t> requests_failed{0};     // any other error
  std::atomic<int64_t> failed_after_first_token{0};  // not migrated (limit, or no node)
  std::atomic<int64_t> no_node_available{0};
  // Requests that waited for KV room on the decode nodes, and those that gave up waiting
  // (--kv-wait-timeout-ms or the queue full).
  std::atomic<int64_t> kv_waits{0};
  std::atomic<int64_t> kv_wait_refusals{0};
  // Requests that waited in the admission queue (all --max-concurrent-requests slots taken), and
  // those whose wait ran out (--queue-timeout-ms).
  std::atomic<int64_t> queued{0};
  std::atomic<int64_t> queue_timeouts{0};

  // Placement of attempts.
  std::atomic<int64_t> disaggregated{0};
  std::atomic<int64_t> local_prefill_short_prompt{0};
  std::atomic<int64_t> local_prefill_no_prefill_node{0};
  std::atomic<int64_t> local_prefill_cheaper_local{0};  // the cost policy's choice
  std::atomic<int64_t> local_prefill_migration{0};
  std::atomic<int64_t> colocated{0};

  std::array<std::atomic<int64_t>, kNumRetryReasons> retries{};
  std::array<std::atomic<int64_t>, kNumMigrationReasons> migrations{};
  // Live KV moves by [trigger][result], and the KV bytes they moved.
  std::array<std::array<std::atomic<int64_t>, kNumKvMoveResults>, kNumKvMoveTriggers> kv_moves{};
  std::atomic<int64_t> kv_move_bytes{0};
  std::atomic<int64_t> stop_string_hits{0};
  // Cancel RPCs sent to nodes (client disconnect, stop strings, abandoned attempts).
  std::atomic<int64_t> cancels_sent{0};

  int64_t retries_for(RetryReason reason) const { return retries[static_cast<int>(reason)].load(); }
  void AddRetry(RetryReason reason) { ++retries[static_cast<int>(reason)]; }
  int64_t migrations_for(MigrationReason reason) const {
    return migrations[static_cast<int>(reason)].load();
  }
  void AddMigration(MigrationReason reason) { ++migrations[static_cast<int>(reason)]; }
  int64_t kv_moves_for(KvMoveTrigger trigger, KvMoveResult result) const {
    return kv_moves[static_cast<int>(trigger)][static_cast<int>(result)].load();
  }
  void AddKvMove(KvMoveTrigger trigger, KvMoveResult result) {
    ++kv_moves[static_cast<int>(trigger)][static_cast<int>(result)];
  }

  // (name, value) pairs, e.g. ("retries{reason=prefill_failed}", 1), for logs and tests.
  std::vector<std::pair<std::string, int64_t>> Values() const {
    std::vector<std::pair<std::string, int64_t>> v = {
        {"requests", requests.load()},
        {"requests_ok", requests_ok.load()},
        {"requests_invalid", requests_invalid.load()},
        {"requests_refused", requests_refused.load()},
        {"requests_cancelled", requests_cancelled.load()},
        {"requests_failed", requests_failed.load()},
        {"failed_after_first_token", failed_after_first_token.load()},
        {"no_node_available", no_node_available.load()},
        {"kv_waits", kv_waits.load()},
        {"kv_wait_refusals", kv_wait_refusals.load()},
        {"queued", queued.load()},
        {"queue_timeouts", queue_timeouts.load()},
        {"placements{kind=disaggregated}", disaggregated.load()},
        {"placements{kind=local_prefill,reason=short_prompt}", local_prefill_short_prompt.load()},
        {"placements{kind=local_prefill,reason=no_prefill_node}",
         local_prefill_no_prefill_node.load()},
        {"placements{kind=local_prefill,reason=migration}", local_prefill_migration.load()},
        {"placements{kind=colocated}", colocated.load()},
        {"stop_string_hits", stop_string_hits.load()},
        {"cancels_sent", cancels_sent.load()},
    };
    for (int i = 0; i < kNumRetryReasons; ++i) {
      v.emplace_back(std::string("retries{reason=") +
                         std::string(RetryReasonName(static_cast<RetryReason>(i))) + "}",
                     retries[i].load());
    }
    for (int i = 0; i < kNumMigrationReasons; ++i) {
      v.emplace_back(std::string("migrations{reason=") +
                         std::string(MigrationReasonName(static_cast<MigrationReason>(i))) + "}",
                     migrations[i].load());
    }
    for (int t = 0; t < kNumKvMoveTriggers; ++t) {
      for (int r = 0; r < kNumKvMoveResults; ++r) {
        v.emplace_back(
            std::string("kv_moves{trigger=") +
                std::string(KvMoveTriggerName(static_cast<KvMoveTrigger>(t))) +
                ",result=" + std::string(KvMoveResultName(static_cast<KvMoveResult>(r))) + "}",
            kv_moves[t][r].load());
      }
    }
    v.emplace_back("kv_move_bytes", kv_move_bytes.load());
    return v;
  }
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_ROUTER_COUNTERS_H_
