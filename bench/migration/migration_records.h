// tandem-bench-migration's records (migration_bench.cc): each client stream's token times, and
// each request's moves as the router's log tells them (a recompute after a failure, or a live
// move with its KV), with the helpers that read them.
#ifndef TANDEM_BENCH_MIGRATION_MIGRATION_RECORDS_H_
#define TANDEM_BENCH_MIGRATION_MIGRATION_RECORDS_H_

#include <atomic>
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/support/status.h"

namespace tandem::migration_bench {

// One client stream, written only by its own thread until that thread is joined; `tokens` is
// read by the main thread while it waits for the moment to signal.
struct StreamRecord {
  std::string request_id;  // the router's id, from the first response
  absl::Time started;
  std::vector<absl::Time> token_times;
  std::string finish_reason;
  grpc::Status status;
  std::atomic<int> tokens{0};
};

// One move of a request to another decode node, as the router's log tells it.
enum class MoveKind {
  kRecompute,  // "ID: decode side failed after N tokens (REASON), migrating ..."
  kLive,       // "ID: moved with its KV from A to B after N tokens (PAUSE pause)"
};

struct Move {
  MoveKind kind = MoveKind::kRecompute;
  int tokens_before = 0;        // output tokens generated before the move
  std::string reason;           // kRecompute: why the decode side failed
  double router_pause_ms = -1;  // kLive: pause to the destination's first token, router-side
  std::string from, to;         // kLive
};

// The router's record of one request: its moves in log order, and live moves it gave up.
struct RouterRecord {
  std::vector<Move> moves;
  int live_moves_dropped = 0;  // "ID: live KV move from A to B dropped, ..."
};

int CountMoves(const RouterRecord& r, MoveKind kind);

// Every request the router's log (at `path`) names as moved, by request id.
std::map<std::string, RouterRecord> ParseRouterLog(const std::string& path);

// The token ids of stream prompt `salt`: `n` ordinary tokens, different for every salt.
std::vector<int> Prompt(int n, int salt);

double Ms(absl::Duration d);

// The gap (ms) before token `n` (0-based), the first one from the node a move went to; -1 if the
// stream has no such token.
double GapBefore(const StreamRecord& r, int n);

// The stream's inter-token gaps (ms), appended to *gaps; returns the largest (0 if none).
double Gaps(const StreamRecord& r, std::vector<double>* gaps);

}  // namespace tandem::migration_bench

#endif  // TANDEM_BENCH_MIGRATION_MIGRATION_RECORDS_H_
