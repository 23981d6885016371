// tandem-bench-migration: the pause a client's stream sees when its decode node goes away and the
// router moves the request to another decode node (README: "Request migration", "Live KV
// migration"), and the streams of a cluster under steady load while its nodes restart.
//
// --signal kill (default) or term. Against a running router with two decode nodes, it opens
// --streams concurrent greedy streams through the router's gRPC Generate (token-id prompts of
// --prompt-tokens, exactly --max-tokens output tokens each) and records the arrival time of every
// token. Once every stream has received --kill-at tokens it sends SIGKILL (or SIGTERM) to
// --kill-pid (one of the decode nodes; the caller started it) and lets the streams run to their
// end. The streams that were on that node are the ones the router's log names:
//   - "ID: decode side failed after N tokens (REASON), migrating ..." — request migration: the
//     new node recomputes prompt + N (what SIGKILL causes);
//   - "ID: moved with its KV from A to B after N tokens (PAUSE pause)" — live KV migration: the
//     draining node paused the stream and its KV blocks moved to B (what SIGTERM causes when the
//     decode nodes share a cluster secret).
// For each such stream the pause is the inter-token gap before the new node's first token
// (token N of the router's line; after SIGKILL that is the gap the signal falls in, after SIGTERM
// one a step or so later, when the draining node has paused the stream). The other streams'
// inter-token gaps are the comparison, and their largest gap after the signal shows what the move
// costs them. Every stream must end with "length", no error and exactly --max-tokens tokens; one
// that does not is counted as failed and described.
//
// --signal none: load only. Keeps --streams streams going (each one, when it ends, followed by
// the next) for --duration-s or until --stop-file exists, then lets the running ones finish and
// reports every stream: completed, failed (any client-visible error), interrupted (it had tokens
// and did not get all of them), and which the router moved (live or by recomputing) with the
// pauses. rolling_restart.sh restarts the decode nodes meanwhile.
//
//   tandem-bench-migration --router ADDR --kill-pid PID --router-log FILE [--signal kill|term]
//       [--streams 16] [--prompt-tokens 128] [--max-tokens 200] [--kill-at 40] [--json out.json]
//   tandem-bench-migration --router ADDR --router-log FILE --signal none [--duration-s 60]
//       [--stop-file PATH] [--stagger-ms 0] [--streams 16] ... [--json out.json]
#include <signal.h>
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/migration/migration_records.h"
#include "bench/serve/serving_metrics.h"
#include "common/util/cli_flags.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "tandem/v1/generate.grpc.pb.h"

namespace {

using tandem::bench::Percentile;
using namespace tandem::migration_bench;  // NOLINT: this tool's own records

// What the bench does to the decode node once the streams are under way.
enum class Signal { kKill, kTerm, kNone };

struct Options {
  std::string router;
  Signal signal = Signal::kKill;
  int kill_pid = 0;
  std::string router_log;
  int streams = 16;
  int prompt_tokens = 128;
  int max_tokens = 200;
  int kill_at = 40;
  double timeout_s = 120;  // per stream, and the wait for --kill-at
  double duration_s = 60;  // --signal none: start streams for this long
  std::string stop_file;   // --signal none: ... or until this file exists
  double stagger_ms = 0;   // --signal none: stream slot i starts i * this after the first
  int salt = 0;            // varies the prompts between runs
  std::string label;
  std::string json;
};

const char* SignalName(Signal s) {
  switch (s) {
    case Signal::kKill:
      return "kill";
    case Signal::kTerm:
      return "term";
    case Signal::kNone:
      return "none";
  }
  return "?";
}

void RunStream(tandem::v1::Generation::Stub& stub, const Options& o, int prompt_salt,
               StreamRecord* record) {
  tandem::v1::GenerateRequest req;
  const std::vector<int> prompt = Prompt(o.prompt_tokens, prompt_salt);
  req.mutable_token_ids()->mutable_ids()->Assign(prompt.begin(), prompt.end());
  tandem::v1::SamplingParams* s = req.mutable_sampling();
  s->set_temperature(0);
  s->set_max_tokens(o.max_tokens);
  s->set_ignore_eos(true);
  // No request_id: the responses then carry the router's own id, the one its log names.
  grpc::ClientContext ctx;
  record->started = absl::Now();
  ctx.set_deadline(absl::ToChronoTime(record->started + absl::Seconds(o.timeout_s)));
  auto reader = stub.Generate(&ctx, req);
  tandem::v1::GenerateResponse m;
  while (reader->Read(&m)) {
    const absl::Time now = absl::Now();
    if (record->request_id.empty()) record->request_id = m.request_id();
    for (int i = 0; i < m.tokens_size(); ++i) record->token_times.push_back(now);
    if (!m.finish_reason().empty()) record->finish_reason = m.finish_reason();
    record->tokens.store(static_cast<int>(record->token_times.size()));
  }
  record->status = reader->Finish();
}

// What happened to the signal: it is the moment every pause is measured around.
enum class KillOutcome { kSent, kStreamsEndedFirst, kTimedOut, kKillFailed };

std::string KillOutcomeName(KillOutcome k, Signal s) {
  switch (k) {
    case KillOutcome::kSent:
      return s == Signal::kKill ? "killed" : "terminated";
    case KillOutcome::kStreamsEndedFirst:
      return "a stream ended before every stream reached --kill-at";
    case KillOutcome::kTimedOut:
      return "timed out waiting for --kill-at";
    case KillOutcome::kKillFailed:
      return "kill() failed";
  }
  return "?";
}

// Waits (polling every millisecond, at most --timeout-s) until every stream has --kill-at tokens,
// then signals the decode node. Returns the outcome and the time of the signal.
std::pair<KillOutcome, absl::Time> SignalWhenUnderWay(const Options& o,
                                                      const std::vector<StreamRecord>& records,
                                                      const std::vector<std::atomic<bool>>& done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(o.timeout_s);
  while (absl::Now() < deadline) {
    bool all_there = true;
    for (size_t i = 0; i < records.size(); ++i) {
      if (records[i].tokens.load() >= o.kill_at) continue;
      if (done[i].load()) return {KillOutcome::kStreamsEndedFirst, absl::Now()};
      all_there = false;
    }
    if (all_there) {
      const absl::Time at = absl::Now();
      const int sig = o.signal == Signal::kKill ? SIGKILL : SIGTERM;
      if (kill(o.kill_pid, sig) != 0) return {KillOutcome::kKillFailed, at};
      return {KillOutcome::kSent, at};
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return {KillOutcome::kTimedOut, absl::Now()};
}

nlohmann::json P50Max(const std::vector<double>& v) {
  return {{"p50", Percentile(v, 50)}, {"max", Percentile(v, 100)}, {"n", v.size()}};
}

// "" when the stream ended as asked (no error, "length", exactly --max-tokens tokens), else what
// went wrong.
std::string Failure(const Options& o, const StreamRecord& r) {
  if (!r.status.ok()) {
    return absl::StrCat("grpc ", static_cast<int>(r.status.error_code()), ": ",
                        r.status.error_message());
  }
  if (static_cast<int>(r.token_times.size()) != o.max_tokens) {
    return absl::StrCat(r.token_times.size(), " tokens, expected ", o.max_tokens);
  }
  if (r.finish_reason != "length") {
    return absl::StrCat("finish_reason \"", r.finish_reason, "\", expected \"length\"");
  }
  return "";
}

// --- --signal kill|term ---------------------------------------------------------------------

// One stream's verdict, from its token times alone (plus the router's record of it).
nlohmann::json JudgeStream(const Options& o, const StreamRecord& r, const RouterRecord* router,
                           absl::Time kill_time, std::vector<double>* gaps_ms) {
  nlohmann::json j;
  j["request_id"] = r.request_id;
  j["tokens"] = r.token_times.size();
  j["finish_reason"] = r.finish_reason;
  const std::string failure = Failure(o, r);
  j["failed"] = !failure.empty();
  if (!failure.empty()) j["failure"] = failure;
  // The largest gap ending after the signal.
  double max_gap_after_kill = 0;
  const double max_gap = Gaps(r, gaps_ms);
  for (size_t i = 1; i < r.token_times.size(); ++i) {
    if (r.token_times[i] <= kill_time) continue;
    max_gap_after_kill = std::max(max_gap_after_kill, Ms(r.token_times[i] - r.token_times[i - 1]));
  }
  size_t at_kill = 0;  // tokens received before the signal
  while (at_kill < r.token_times.size() && r.token_times[at_kill] <= kill_time) ++at_kill;
  j["tokens_before_kill"] = at_kill;
  j["max_gap_ms"] = max_gap;
  j["max_gap_after_kill_ms"] = max_gap_after_kill;
  // The arrival times around the signal, in ms from it (0.01 ms resolution).
  const size_t first = at_kill > 10 ? at_kill - 10 : 0;
  nlohmann::json times = nlohmann::json::array();
  for (size_t i = first; i < std::min(r.token_times.size(), at_kill + 30); ++i) {
    times.push_back(std::round(Ms(r.token_times[i] - kill_time) * 100) / 100);
  }
  j["tokens_around_kill"] = {{"first_token", first}, {"ms_from_kill", std::move(times)}};
  const bool migrated = router != nullptr && !router->moves.empty();
  j["migrated"] = migrated;
  if (router != nullptr) j["live_moves_dropped"] = router->live_moves_dropped;
  if (migrated) {
    const Move& m = router->moves.front();  // the first move is the one the signal caused
    j["moved_live"] = m.kind == MoveKind::kLive;
    j["router_tokens_before"] = m.tokens_before;
    j["moves"] = router->moves.size();
    if (m.kind == MoveKind::kLive) {
      j["from"] = m.from;
      j["to"] = m.to;
      j["router_pause_ms"] = m.router_pause_ms;
    } else {
      j["reason"] = m.reason;
      j["tokens_recomputed"] = o.prompt_tokens + m.tokens_before;
    }
    // The pause is the gap before the first token from the new node: token N, where N is the
    // router's "after N tokens" (the signal's gap when the log does not place it). After SIGKILL
    // that is the gap the signal falls in; after SIGTERM the node pauses the stream a few tokens
    // later, once its step is done.
    size_t resumed_at = at_kill;
    if (m.tokens_before >= 1 && static_cast<size_t>(m.tokens_before) < r.token_times.size()) {
      resumed_at = static_cast<size_t>(m.tokens_before);
    }
    if (resumed_at > 0 && resumed_at < r.token_times.size()) {
      j["pause_ms"] = Ms(r.token_times[resumed_at] - r.token_times[resumed_at - 1]);
      // From the signal to the new node's first token (after SIGKILL, the part of the pause
      // after the signal: the rest is the wait for a token that never came).
      j["kill_to_next_token_ms"] = Ms(r.token_times[resumed_at] - kill_time);
    }
  }
  return j;
}

nlohmann::json AnalyzeSignalled(const Options& o, const std::vector<StreamRecord>& records,
                                const std::map<std::string, RouterRecord>& router, KillOutcome kill,
                                absl::Time kill_time) {
  nlohmann::json out;
  out["label"] = o.label;
  out["signal"] = SignalName(o.signal);
  out["streams"] = o.streams;
  out["prompt_tokens"] = o.prompt_tokens;
  out["max_tokens"] = o.max_tokens;
  out["kill_at"] = o.kill_at;
  out["kill"] = KillOutcomeName(kill, o.signal);
  out["kill_unix_ms"] = absl::ToUnixMicros(kill_time) / 1000.0;
  std::vector<double> pauses, after_kill, recomputed, router_pauses, other_gaps, other_max;
  int failed = 0, migrated = 0, moved_live = 0, live_moves_dropped = 0;
  nlohmann::json per_stream = nlohmann::json::array();
  for (const StreamRecord& r : records) {
    auto it = router.find(r.request_id);
    const RouterRecord* rr = it == router.end() ? nullptr : &it->second;
    std::vector<double> gaps;
    nlohmann::json j = JudgeStream(o, r, rr, kill_time, &gaps);
    if (j["failed"].get<bool>()) ++failed;
    if (rr != nullptr) live_moves_dropped += rr->live_moves_dropped;
    if (j["migrated"].get<bool>()) {
      ++migrated;
      if (j["moved_live"].get<bool>()) {
        ++moved_live;
        router_pauses.push_back(j["router_pause_ms"].get<double>());
      } else {
        recomputed.push_back(j["tokens_recomputed"].get<double>());
      }
      if (j.contains("pause_ms")) {  // else the stream failed before resuming
        pauses.push_back(j["pause_ms"].get<double>());
        after_kill.push_back(j["kill_to_next_token_ms"].get<double>());
      }
    } else {
      other_gaps.insert(other_gaps.end(), gaps.begin(), gaps.end());
      other_max.push_back(j["max_gap_after_kill_ms"].get<double>());
    }
    per_stream.push_back(std::move(j));
  }
  double recomputed_mean = 0;
  for (double v : recomputed) recomputed_mean += v / static_cast<double>(recomputed.size());
  out["migrated"] = migrated;
  out["moved_live"] = moved_live;
  out["recomputed"] = migrated - moved_live;
  out["live_moves_dropped"] = live_moves_dropped;
  out["failed"] = failed;
  out["tokens_recomputed_mean"] = recomputed_mean;  // 0 when every move was live
  out["pause_ms"] = {{"p50", Percentile(pauses, 50)}, {"max", Percentile(pauses, 100)}};
  out["kill_to_next_token_ms"] = {{"p50", Percentile(after_kill, 50)},
                                  {"max", Percentile(after_kill, 100)}};
  out["router_pause_ms"] = {{"p50", Percentile(router_pauses, 50)},
                            {"max", Percentile(router_pauses, 100)}};
  out["normal_gap_ms"] = {{"p50", Percentile(other_gaps, 50)},
                          {"p99", Percentile(other_gaps, 99)},
                          {"others_max_after_kill", Percentile(other_max, 100)}};
  out["per_stream"] = std::move(per_stream);
  return out;
}

int RunSignalled(const Options& o, tandem::v1::Generation::Stub& stub) {
  std::vector<StreamRecord> records(o.streams);
  std::vector<std::atomic<bool>> done(o.streams);
  std::vector<std::thread> threads;
  for (int i = 0; i < o.streams; ++i) {
    threads.emplace_back([&, i] {
      RunStream(stub, o, o.salt * 1000 + i, &records[i]);
      done[i].store(true);
    });
  }
  const auto [kill, kill_time] = SignalWhenUnderWay(o, records, done);
  for (auto& t : threads) t.join();  // each stream ends by its deadline

  nlohmann::json out = AnalyzeSignalled(o, records, ParseRouterLog(o.router_log), kill, kill_time);
  std::printf(
      "%s: prompt %d, %d streams, SIG%s: %s; moved %d (%d with their KV, %d recomputing %.0f "
      "tokens mean), pause p50 %.1f / max %.1f ms, normal gap p50 %.2f ms, failed %d\n",
      o.label.c_str(), o.prompt_tokens, o.streams, o.signal == Signal::kKill ? "KILL" : "TERM",
      out["kill"].get<std::string>().c_str(), out["migrated"].get<int>(),
      out["moved_live"].get<int>(), out["recomputed"].get<int>(),
      out["tokens_recomputed_mean"].get<double>(), out["pause_ms"]["p50"].get<double>(),
      out["pause_ms"]["max"].get<double>(), out["normal_gap_ms"]["p50"].get<double>(),
      out["failed"].get<int>());
  for (const auto& s : out["per_stream"]) {
    if (s["failed"].get<bool>()) {
      std::printf("  failed %s: %s\n", s["request_id"].get<std::string>().c_str(),
                  s["failure"].get<std::string>().c_str());
    }
  }
  if (!o.json.empty()) std::ofstream(o.json) << out.dump(2) << "\n";
  return kill == KillOutcome::kSent ? 0 : 1;
}

// --- --signal none: steady load -------------------------------------------------------------

// Keeps one stream slot busy: stream after stream until `stop`. Only this slot's thread touches
// `records` until it is joined. Every stream of the run takes the next number of `next` for its
// prompt, so no two share a prefix (the first 20000 of a run: Prompt's ids are mod 20000) and no
// prefix cache shortens a move.
void RunSlot(tandem::v1::Generation::Stub& stub, const Options& o, int slot,
             const std::atomic<bool>& stop, std::atomic<int>& next,
             std::vector<std::unique_ptr<StreamRecord>>* records) {
  absl::SleepFor(absl::Milliseconds(o.stagger_ms * slot));
  for (int k = 0; k < 1'000'000 && !stop.load(); ++k) {
    records->push_back(std::make_unique<StreamRecord>());
    RunStream(stub, o, o.salt * 1'000'003 + next.fetch_add(1), records->back().get());
  }
}

nlohmann::json AnalyzeLoad(const Options& o,
                           const std::vector<std::vector<std::unique_ptr<StreamRecord>>>& slots,
                           const std::map<std::string, RouterRecord>& router, absl::Time start,
                           absl::Time stopped) {
  int started = 0, completed = 0, failed = 0, interrupted = 0, failed_before_tokens = 0;
  int moved_live = 0, live_moves = 0, recomputed = 0, recompute_moves = 0, dropped = 0;
  std::vector<double> router_pauses, client_live_pauses, client_recompute_pauses, other_gaps,
      other_max_gap;
  nlohmann::json notable = nlohmann::json::array();  // streams that moved, dropped or failed
  for (const auto& slot : slots) {
    for (const auto& rp : slot) {
      const StreamRecord& r = *rp;
      ++started;
      auto it = router.find(r.request_id);
      const RouterRecord* rr = it == router.end() ? nullptr : &it->second;
      const std::string failure = Failure(o, r);
      const bool ok = failure.empty();
      const bool cut = !ok && !r.token_times.empty();  // had tokens, did not get them all
      completed += ok;
      failed += !ok;
      interrupted += cut;
      failed_before_tokens += !ok && r.token_times.empty();
      std::vector<double> gaps;
      const double max_gap = Gaps(r, &gaps);
      const int live = rr == nullptr ? 0 : CountMoves(*rr, MoveKind::kLive);
      const int recompute = rr == nullptr ? 0 : CountMoves(*rr, MoveKind::kRecompute);
      const int drops = rr == nullptr ? 0 : rr->live_moves_dropped;
      live_moves += live;
      recompute_moves += recompute;
      dropped += drops;
      moved_live += live > 0;
      recomputed += recompute > 0;
      if (rr != nullptr) {
        for (const Move& m : rr->moves) {
          const double gap = GapBefore(r, m.tokens_before);
          if (m.kind == MoveKind::kLive) {
            router_pauses.push_back(m.router_pause_ms);
            if (gap >= 0) client_live_pauses.push_back(gap);
          } else if (gap >= 0) {
            client_recompute_pauses.push_back(gap);
          }
        }
      }
      if (live + recompute == 0) {
        other_gaps.insert(other_gaps.end(), gaps.begin(), gaps.end());
        other_max_gap.push_back(max_gap);
      }
      if (ok && live + recompute + drops == 0) continue;
      nlohmann::json j;
      j["request_id"] = r.request_id;
      j["started_ms"] = std::round(Ms(r.started - start));
      j["tokens"] = r.token_times.size();
      j["finish_reason"] = r.finish_reason;
      if (!ok) j["failure"] = failure;
      j["interrupted"] = cut;
      j["live_moves"] = live;
      j["recompute_moves"] = recompute;
      j["live_moves_dropped"] = drops;
      j["max_gap_ms"] = max_gap;
      if (rr != nullptr) {
        nlohmann::json moves = nlohmann::json::array();
        for (const Move& m : rr->moves) {
          nlohmann::json mj = {{"kind", m.kind == MoveKind::kLive ? "live" : "recompute"},
                               {"after_tokens", m.tokens_before},
                               {"client_gap_ms", GapBefore(r, m.tokens_before)}};
          if (m.kind == MoveKind::kLive) {
            mj["from"] = m.from;
            mj["to"] = m.to;
            mj["router_pause_ms"] = m.router_pause_ms;
          } else {
            mj["reason"] = m.reason;
          }
          moves.push_back(std::move(mj));
        }
        j["moves"] = std::move(moves);
      }
      notable.push_back(std::move(j));
    }
  }
  nlohmann::json out;
  out["label"] = o.label;
  out["signal"] = "none";
  out["slots"] = o.streams;
  out["prompt_tokens"] = o.prompt_tokens;
  out["max_tokens"] = o.max_tokens;
  out["start_unix_ms"] = absl::ToUnixMicros(start) / 1000.0;
  out["load_s"] = absl::ToDoubleSeconds(stopped - start);
  out["started"] = started;
  out["completed"] = completed;
  out["failed"] = failed;
  out["failed_before_first_token"] = failed_before_tokens;
  out["interrupted"] = interrupted;
  out["streams_moved_live"] = moved_live;
  out["live_moves"] = live_moves;
  out["streams_recomputed"] = recomputed;
  out["recompute_moves"] = recompute_moves;
  out["live_moves_dropped"] = dropped;
  // Per live move: router-side (pause to the destination's first token), and the client's gap
  // before that token; per recompute move, the client's gap.
  out["router_pause_ms"] = P50Max(router_pauses);
  out["client_live_pause_ms"] = P50Max(client_live_pauses);
  out["client_recompute_pause_ms"] = P50Max(client_recompute_pauses);
  out["normal_gap_ms"] = {{"p50", Percentile(other_gaps, 50)},
                          {"p99", Percentile(other_gaps, 99)},
                          {"unmoved_streams_max_gap", Percentile(other_max_gap, 100)}};
  out["notable_streams"] = std::move(notable);
  return out;
}

int RunLoad(const Options& o, tandem::v1::Generation::Stub& stub) {
  std::atomic<bool> stop{false};
  std::atomic<int> next{0};
  std::vector<std::vector<std::unique_ptr<StreamRecord>>> slots(o.streams);
  std::vector<std::thread> threads;
  const absl::Time start = absl::Now();
  for (int i = 0; i < o.streams; ++i) {
    threads.emplace_back([&, i] { RunSlot(stub, o, i, stop, next, &slots[i]); });
  }
  const absl::Time end = start + absl::Seconds(o.duration_s);
  while (absl::Now() < end && (o.stop_file.empty() || !std::filesystem::exists(o.stop_file))) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  const absl::Time stopped = absl::Now();
  stop.store(true);
  for (auto& t : threads) t.join();  // each running stream ends by its deadline

  nlohmann::json out = AnalyzeLoad(o, slots, ParseRouterLog(o.router_log), start, stopped);
  std::printf(
      "%s: %d slots for %.1f s: started %d, completed %d, failed %d (%d before a token), "
      "interrupted %d; moved with KV %d streams (%d moves, %d dropped), recomputed %d streams; "
      "live-move pause p50 %.1f / max %.1f ms (router: %.1f / %.1f); normal gap p50 %.2f ms\n",
      o.label.c_str(), o.streams, out["load_s"].get<double>(), out["started"].get<int>(),
      out["completed"].get<int>(), out["failed"].get<int>(),
      out["failed_before_first_token"].get<int>(), out["interrupted"].get<int>(),
      out["streams_moved_live"].get<int>(), out["live_moves"].get<int>(),
      out["live_moves_dropped"].get<int>(), out["streams_recomputed"].get<int>(),
      out["client_live_pause_ms"]["p50"].get<double>(),
      out["client_live_pause_ms"]["max"].get<double>(), out["router_pause_ms"]["p50"].get<double>(),
      out["router_pause_ms"]["max"].get<double>(), out["normal_gap_ms"]["p50"].get<double>());
  for (const auto& s : out["notable_streams"]) {
    if (s.contains("failure")) {
      std::printf("  failed %s (%s tokens): %s\n", s["request_id"].get<std::string>().c_str(),
                  s["tokens"].dump().c_str(), s["failure"].get<std::string>().c_str());
    }
  }
  if (!o.json.empty()) std::ofstream(o.json) << out.dump(2) << "\n";
  return out["started"].get<int>() > 0 ? 0 : 1;
}

constexpr char kIntro[] =
    R"(Usage: tandem-bench-migration --router ADDR --kill-pid PID --router-log FILE [options]
       tandem-bench-migration --router ADDR --router-log FILE --signal none [options]

Opens concurrent greedy streams through the router, SIGKILLs (or SIGTERMs) one decode node once
every stream is under way, and reports the pause each moved stream sees (recomputed, or moved
with its KV) against the other streams' normal inter-token gap. migration_pause.sh starts the
cluster. --signal none keeps the streams going for a while instead and reports every stream
(rolling_restart.sh restarts the nodes meanwhile).
)";

void AddBenchFlags(tandem::FlagSet& flags, Options* o) {
  flags.String("router", &o->router, {"ADDR", "the router's gRPC address (required)"});
  flags.Custom("signal",
               {"kill|term|none",
                "what the decode node gets once the streams are under way: SIGKILL "
                "(default), SIGTERM (a drain: live KV migration), or nothing (load only)"},
               [o](std::string_view v) -> std::string {
                 if (v == "kill") {
                   o->signal = Signal::kKill;
                 } else if (v == "term") {
                   o->signal = Signal::kTerm;
                 } else if (v == "none") {
                   o->signal = Signal::kNone;
                 } else {
                   return absl::StrCat("expects kill, term or none, got '", std::string(v), "'");
                 }
                 return "";
               });
  flags.Number("kill-pid", &o->kill_pid,
               {"PID", "the decode node to signal (required unless --signal none)"});
  flags.String("router-log", &o->router_log,
               {"FILE", "the router's log: names the moved requests (required)"});
  flags.Number("streams", &o->streams,
               {"N", "concurrent streams (default 16; --signal none: stream slots)"});
  flags.Number("prompt-tokens", &o->prompt_tokens, {"N", "tokens per prompt (default 128)"});
  flags.Number("max-tokens", &o->max_tokens, {"N", "output tokens per stream (default 200)"});
  flags.Number("kill-at", &o->kill_at,
               {"N", "signal once every stream has received N tokens (default 40)"});
  flags.Number("timeout-s", &o->timeout_s,
               {"S", "deadline of each stream, and of the wait to signal (default 120)"});
  flags.Number("duration-s", &o->duration_s,
               {"S", "--signal none: start streams for S seconds (default 60)"});
  flags.String("stop-file", &o->stop_file,
               {"PATH", "--signal none: ... or until PATH exists; running streams finish"});
  flags.Number("stagger-ms", &o->stagger_ms,
               {"MS", "--signal none: slot i starts i * MS after the first (default 0)"});
  flags.Number("salt", &o->salt, {"N", "varies the prompts (default 0)"});
  flags.String("label", &o->label, {"TEXT", "a name for this run in the JSON"});
  flags.String("json", &o->json, {"PATH", "write the results as JSON"});
}

std::string ValidateOptions(const Options& o) {
  if (o.router.empty() || o.router_log.empty()) return "--router and --router-log are required";
  if (o.signal != Signal::kNone && o.kill_pid <= 0) {
    return "--kill-pid is required unless --signal none";
  }
  if (o.streams < 1 || o.streams > 4096 || o.prompt_tokens < 1 || o.timeout_s <= 0) {
    return "--streams in [1, 4096], --prompt-tokens >= 1, --timeout-s > 0";
  }
  if (o.signal == Signal::kNone) {
    if (o.max_tokens < 1 || o.duration_s <= 0 || o.stagger_ms < 0) {
      return "--max-tokens >= 1, --duration-s > 0, --stagger-ms >= 0";
    }
  } else if (o.streams < 2 || o.kill_at < 2 || o.max_tokens <= o.kill_at + 1) {
    return "--streams >= 2, --kill-at >= 2, --max-tokens > --kill-at + 1";
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  tandem::FlagSet flags;
  AddBenchFlags(flags, &o);
  bool help = false;
  std::string error = flags.Parse(argc, argv, &help);
  if (help) {
    std::fputs(flags.Help(kIntro).c_str(), stdout);
    return 0;
  }
  if (error.empty()) error = ValidateOptions(o);
  if (!error.empty()) {
    std::fprintf(stderr, "tandem-bench-migration: %s\n", error.c_str());
    return 2;
  }
  auto stub = tandem::v1::Generation::NewStub(
      grpc::CreateChannel(o.router, grpc::InsecureChannelCredentials()));
  return o.signal == Signal::kNone ? RunLoad(o, *stub) : RunSignalled(o, *stub);
}
