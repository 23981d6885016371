// tandem-bench-migration: the pause a client's stream sees when its decode node dies and the
// router migrates the request to another decode node (README: "Request migration").
//
// Against a running router with two decode nodes, it opens --streams concurrent greedy streams
// through the router's gRPC Generate (token-id prompts of --prompt-tokens, exactly --max-tokens
// output tokens each) and records the arrival time of every token. Once every stream has
// received --kill-at tokens it SIGKILLs --kill-pid (one of the decode nodes; the caller started
// it) and lets the streams run to their end. The streams that were on the killed node are the
// ones the router's log names as migrated ("ID: decode side failed after N tokens"); for each, the
// pause is the inter-token gap the kill falls in (last token before it to the first after it) and
// the tokens the new node recomputed are prompt + N. The other streams' inter-token gaps are the
// comparison, and their largest gap after the kill shows what the recompute costs them. Every
// stream must end with "length", no error and exactly --max-tokens tokens; one that does not is
// counted as failed and described.
//
//   tandem-bench-migration --router ADDR --kill-pid PID --router-log FILE
//       [--streams 16] [--prompt-tokens 128] [--max-tokens 200] [--kill-at 40] [--json out.json]
#include <signal.h>
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/util/cli_flags.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"
#include "tandem/v1/generate.grpc.pb.h"

namespace {

struct Options {
  std::string router;
  int kill_pid = 0;
  std::string router_log;
  int streams = 16;
  int prompt_tokens = 128;
  int max_tokens = 200;
  int kill_at = 40;
  double timeout_s = 120;  // per stream, and the wait for --kill-at
  int salt = 0;            // varies the prompts between runs
  std::string label;
  std::string json;
};

// One client stream, written only by its own thread until that thread is joined; `tokens` is
// read by the main thread while it waits for the moment to kill.
struct StreamRecord {
  std::string request_id;  // the router's id, from the first response
  std::vector<absl::Time> token_times;
  std::string finish_reason;
  grpc::Status status;
  std::atomic<int> tokens{0};
};

std::vector<int> Prompt(int n, int salt) {
  std::vector<int> ids;
  for (int64_t i = 0; i < n; ++i) {
    ids.push_back(static_cast<int>(1000 + (i * 7919 + int64_t{salt} * 104729) % 20000));
  }
  return ids;
}

void RunStream(tandem::v1::Generation::Stub& stub, const Options& o, int index,
               StreamRecord* record) {
  tandem::v1::GenerateRequest req;
  const std::vector<int> prompt = Prompt(o.prompt_tokens, o.salt * 1000 + index);
  req.mutable_token_ids()->mutable_ids()->Assign(prompt.begin(), prompt.end());
  tandem::v1::SamplingParams* s = req.mutable_sampling();
  s->set_temperature(0);
  s->set_max_tokens(o.max_tokens);
  s->set_ignore_eos(true);
  // No request_id: the responses then carry the router's own id, the one its log names.
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(o.timeout_s)));
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

// What happened to the kill: it is the moment every pause is measured around.
enum class KillOutcome { kKilled, kStreamsEndedFirst, kTimedOut, kKillFailed };

const char* KillOutcomeName(KillOutcome k) {
  switch (k) {
    case KillOutcome::kKilled:
      return "killed";
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
// then SIGKILLs the decode node. Returns the outcome and the time of the kill.
std::pair<KillOutcome, absl::Time> KillWhenUnderWay(const Options& o,
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
      if (kill(o.kill_pid, SIGKILL) != 0) return {KillOutcome::kKillFailed, at};
      return {KillOutcome::kKilled, at};
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return {KillOutcome::kTimedOut, absl::Now()};
}

// The router's record of one migrated request.
struct Migration {
  int tokens_before = 0;  // output tokens generated before the first move
  std::string reason;
  int moves = 0;
};

// Reads the router's log lines "ID: decode side failed after N tokens (REASON), migrating ...".
std::map<std::string, Migration> ParseRouterLog(const std::string& path) {
  std::map<std::string, Migration> out;
  std::ifstream in(path);
  std::string line;
  constexpr std::string_view kMarker = ": decode side failed after ";
  for (int n = 0; n < 10'000'000 && std::getline(in, line); ++n) {
    const size_t at = line.find(kMarker);
    if (at == std::string::npos || line.find("migrating", at) == std::string::npos) continue;
    const size_t id_start = line.rfind(' ', at);
    const std::string id = line.substr(id_start == std::string::npos ? 0 : id_start + 1,
                                       at - (id_start == std::string::npos ? 0 : id_start + 1));
    const std::string rest = line.substr(at + kMarker.size());
    std::vector<std::string> words = absl::StrSplit(rest, ' ');
    Migration& m = out[id];
    if (m.moves++ > 0) continue;  // the first move is the one the kill caused
    if (!words.empty()) (void)absl::SimpleAtoi(words[0], &m.tokens_before);
    const size_t open = rest.find('('), close = rest.find(')');
    if (open != std::string::npos && close != std::string::npos && close > open) {
      m.reason = rest.substr(open + 1, close - open - 1);
    }
  }
  return out;
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(rank);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

// One stream's verdict, from its token times alone (plus the router's migration record).
nlohmann::json JudgeStream(const Options& o, const StreamRecord& r, const Migration* migration,
                           absl::Time kill_time, std::vector<double>* gaps_ms) {
  nlohmann::json j;
  j["request_id"] = r.request_id;
  j["tokens"] = r.token_times.size();
  j["finish_reason"] = r.finish_reason;
  std::string failure;
  if (!r.status.ok()) {
    failure = absl::StrCat("grpc ", static_cast<int>(r.status.error_code()), ": ",
                           r.status.error_message());
  } else if (static_cast<int>(r.token_times.size()) != o.max_tokens) {
    failure = absl::StrCat(r.token_times.size(), " tokens, expected ", o.max_tokens);
  } else if (r.finish_reason != "length") {
    failure = absl::StrCat("finish_reason \"", r.finish_reason, "\", expected \"length\"");
  }
  j["failed"] = !failure.empty();
  if (!failure.empty()) j["failure"] = failure;
  // The gap the kill falls in: from the last token before it to the first after it.
  double max_gap = 0, max_gap_after_kill = 0;
  size_t at_kill = 0;  // tokens received before the kill
  for (size_t i = 1; i < r.token_times.size(); ++i) {
    const double gap = Ms(r.token_times[i] - r.token_times[i - 1]);
    gaps_ms->push_back(gap);
    max_gap = std::max(max_gap, gap);
    if (r.token_times[i] > kill_time) max_gap_after_kill = std::max(max_gap_after_kill, gap);
  }
  while (at_kill < r.token_times.size() && r.token_times[at_kill] <= kill_time) ++at_kill;
  j["tokens_before_kill"] = at_kill;
  j["max_gap_ms"] = max_gap;
  j["max_gap_after_kill_ms"] = max_gap_after_kill;
  // The arrival times around the kill, in ms from it (0.01 ms resolution).
  const size_t first = at_kill > 10 ? at_kill - 10 : 0;
  nlohmann::json times = nlohmann::json::array();
  for (size_t i = first; i < std::min(r.token_times.size(), at_kill + 30); ++i) {
    times.push_back(std::round(Ms(r.token_times[i] - kill_time) * 100) / 100);
  }
  j["tokens_around_kill"] = {{"first_token", first}, {"ms_from_kill", std::move(times)}};
  j["migrated"] = migration != nullptr;
  if (migration != nullptr) {
    j["router_tokens_before"] = migration->tokens_before;
    j["reason"] = migration->reason;
    j["moves"] = migration->moves;
    j["tokens_recomputed"] = o.prompt_tokens + migration->tokens_before;
    if (at_kill > 0 && at_kill < r.token_times.size()) {
      j["pause_ms"] = Ms(r.token_times[at_kill] - r.token_times[at_kill - 1]);
      // The part of the pause after the kill (the rest is the wait for a token that never came).
      j["kill_to_next_token_ms"] = Ms(r.token_times[at_kill] - kill_time);
    }
  }
  return j;
}

nlohmann::json Analyze(const Options& o, const std::vector<StreamRecord>& records,
                       const std::map<std::string, Migration>& migrations, KillOutcome kill,
                       absl::Time kill_time) {
  nlohmann::json out;
  out["label"] = o.label;
  out["streams"] = o.streams;
  out["prompt_tokens"] = o.prompt_tokens;
  out["max_tokens"] = o.max_tokens;
  out["kill_at"] = o.kill_at;
  out["kill"] = KillOutcomeName(kill);
  out["kill_unix_ms"] = absl::ToUnixMicros(kill_time) / 1000.0;
  std::vector<double> pauses, after_kill, recomputed, other_gaps, other_max;
  int failed = 0, migrated = 0;
  nlohmann::json per_stream = nlohmann::json::array();
  for (const StreamRecord& r : records) {
    auto it = migrations.find(r.request_id);
    const Migration* m = it == migrations.end() ? nullptr : &it->second;
    std::vector<double> gaps;
    nlohmann::json j = JudgeStream(o, r, m, kill_time, &gaps);
    if (j["failed"].get<bool>()) ++failed;
    if (m != nullptr) {
      ++migrated;
      recomputed.push_back(j["tokens_recomputed"].get<double>());
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
  out["failed"] = failed;
  out["tokens_recomputed_mean"] = recomputed_mean;
  out["pause_ms"] = {{"p50", Percentile(pauses, 50)}, {"max", Percentile(pauses, 100)}};
  out["kill_to_next_token_ms"] = {{"p50", Percentile(after_kill, 50)},
                                  {"max", Percentile(after_kill, 100)}};
  out["normal_gap_ms"] = {{"p50", Percentile(other_gaps, 50)},
                          {"p99", Percentile(other_gaps, 99)},
                          {"others_max_after_kill", Percentile(other_max, 100)}};
  out["per_stream"] = std::move(per_stream);
  return out;
}

constexpr char kIntro[] =
    R"(Usage: tandem-bench-migration --router ADDR --kill-pid PID --router-log FILE [options]

Opens concurrent greedy streams through the router, SIGKILLs one decode node once every stream
is under way, and reports the pause each migrated stream sees against the other streams' normal
inter-token gap. migration_pause.sh starts the cluster.
)";

void AddBenchFlags(tandem::FlagSet& flags, Options* o) {
  flags.String("router", &o->router, {"ADDR", "the router's gRPC address (required)"});
  flags.Number("kill-pid", &o->kill_pid, {"PID", "the decode node to SIGKILL (required)"});
  flags.String("router-log", &o->router_log,
               {"FILE", "the router's log: names the migrated requests (required)"});
  flags.Number("streams", &o->streams, {"N", "concurrent streams (default 16)"});
  flags.Number("prompt-tokens", &o->prompt_tokens, {"N", "tokens per prompt (default 128)"});
  flags.Number("max-tokens", &o->max_tokens, {"N", "output tokens per stream (default 200)"});
  flags.Number("kill-at", &o->kill_at,
               {"N", "kill once every stream has received N tokens (default 40)"});
  flags.Number("timeout-s", &o->timeout_s,
               {"S", "deadline of each stream, and of the wait to kill (default 120)"});
  flags.Number("salt", &o->salt, {"N", "varies the prompts (default 0)"});
  flags.String("label", &o->label, {"TEXT", "a name for this run in the JSON"});
  flags.String("json", &o->json, {"PATH", "write the results as JSON"});
}

std::string ValidateOptions(const Options& o) {
  if (o.router.empty() || o.kill_pid <= 0 || o.router_log.empty()) {
    return "--router, --kill-pid and --router-log are required";
  }
  if (o.streams < 2 || o.streams > 4096 || o.prompt_tokens < 1 || o.kill_at < 2 ||
      o.max_tokens <= o.kill_at + 1 || o.timeout_s <= 0) {
    return "--streams in [2, 4096], --prompt-tokens >= 1, --kill-at >= 2, "
           "--max-tokens > --kill-at + 1, --timeout-s > 0";
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
  std::vector<StreamRecord> records(o.streams);
  std::vector<std::atomic<bool>> done(o.streams);
  std::vector<std::thread> threads;
  for (int i = 0; i < o.streams; ++i) {
    threads.emplace_back([&, i] {
      RunStream(*stub, o, i, &records[i]);
      done[i].store(true);
    });
  }
  const auto [kill, kill_time] = KillWhenUnderWay(o, records, done);
  for (auto& t : threads) t.join();  // each stream ends by its deadline

  nlohmann::json out = Analyze(o, records, ParseRouterLog(o.router_log), kill, kill_time);
  std::printf(
      "%s: prompt %d, %d streams, kill: %s; migrated %d, recomputed %.0f tokens (mean), "
      "pause p50 %.1f / max %.1f ms, normal gap p50 %.2f ms, failed %d\n",
      o.label.c_str(), o.prompt_tokens, o.streams, out["kill"].get<std::string>().c_str(),
      out["migrated"].get<int>(), out["tokens_recomputed_mean"].get<double>(),
      out["pause_ms"]["p50"].get<double>(), out["pause_ms"]["max"].get<double>(),
      out["normal_gap_ms"]["p50"].get<double>(), out["failed"].get<int>());
  for (const auto& s : out["per_stream"]) {
    if (s["failed"].get<bool>()) {
      std::printf("  failed %s: %s\n", s["request_id"].get<std::string>().c_str(),
                  s["failure"].get<std::string>().c_str());
    }
  }
  if (!o.json.empty()) std::ofstream(o.json) << out.dump(2) << "\n";
  return kill == KillOutcome::kKilled ? 0 : 1;
}
