// Issue 16 item 10: a cluster driven at 4x its capacity for a minute stays correct. A real
// cluster on loopback (2 prefill + 2 decode sim-backend nodes standing for H100s serving
// Llama-3.1-8B, slowed down --sim-time-scale times so this machine's CPUs are not the bottleneck,
// and the router with a bounded admission queue) is measured first: the real tandem-bench, closed
// loop at the router's --max-concurrent-requests, gives the capacity in requests/s. Then
// tandem-bench drives it open loop (Poisson arrivals, HTTP, streamed) at 4x that rate for
// TANDEM_OVERLOAD_SECONDS (default 60) of arrivals, and from its per-request records:
//   - every request ended: completed with all its tokens, or HTTP 429 (the queue was full or the
//     wait ran out) or 503 (no KV room in time) with a non-empty reason; nothing else;
//   - no error says a node is not up ("none of the 2 decode nodes is up"): the nodes are busy,
//     never dead, and the router never marked one down;
//   - every request ended within the router's --request-timeout-ms plus a small margin;
//   - a meaningful share completed;
// and once the load is over every node's KV blocks are all free again (GetLoad), within 30 s.
// The capacity is the completion rate while the closed loop is steady (between the first completion
// and the last send). Prints a table and writes build/overload/overload_test.json (plus both runs'
// tandem-bench JSON).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/cluster/local_cluster_fixture.h"
#include "tests/integration/test_dirs.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {
namespace {

using json = nlohmann::json;

// The router's limits. Admitted requests run in ~5 s here (a 256-token prompt, 32 tokens at
// 20 x 6 ms a step), so 64 running is what the two decode nodes carry; 64 more wait at most 5 s.
constexpr int kMaxConcurrent = 64;
constexpr int kMaxQueued = 64;
constexpr int kQueueTimeoutMs = 5000;
constexpr int kRequestTimeoutMs = 20000;
// A request may end this much after the router's timeout (the bench's own clock, the last bytes).
constexpr double kEndMarginS = 2.0;
constexpr int kInputLen = 256;
constexpr int kOutputLen = 32;
constexpr int kCapacityPrompts = 4 * kMaxConcurrent;
constexpr double kOverload = 4.0;
constexpr double kDefaultSeconds = 60;
// Of the requests sent at 4x capacity, at least this share must complete (about 1/4 can).
constexpr double kMinCompletedShare = 0.10;

const std::vector<std::string> kSimArgs = {
    "--backend",      "sim", "--sim-gpu",       "h100", "--sim-model",      "llama-3.1-8b",
    "--sim-kv-scale", "128", "--sim-kv-blocks", "1024", "--sim-time-scale", "20",
    "--max-num-seqs", "64"};

// Seconds of arrivals at 4x: $TANDEM_OVERLOAD_SECONDS when it is a positive number, else 60.
double OverloadSeconds() {
  const char* env = std::getenv("TANDEM_OVERLOAD_SECONDS");
  double seconds = 0;
  if (env != nullptr && absl::SimpleAtod(env, &seconds) && seconds > 0) return seconds;
  return kDefaultSeconds;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs tandem-bench against `http` with `args`, writing its JSON to `out`; returns that JSON.
absl::StatusOr<json> RunBench(const std::string& http, std::vector<std::string> args,
                              const std::string& out, absl::Duration timeout) {
  args.insert(args.end(),
              {"--address", http, "--out", out, "--no-progress", "--random-input-len",
               absl::StrCat(kInputLen), "--random-output-len", absl::StrCat(kOutputLen)});
  CommandResult r = RunCommand(BinaryPath("tandem-bench"), args, {}, timeout);
  if (r.exit_code != 0) {
    return absl::InternalError(absl::StrCat(
        "tandem-bench exited ", r.exit_code, r.timed_out ? " (timed out)" : "", "\nstdout:\n",
        r.stdout_text.substr(0, 4000), "\nstderr:\n", r.stderr_text.substr(0, 4000)));
  }
  json doc = json::parse(ReadFile(out), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("runs") || doc["runs"].size() != 1 ||
      !doc["runs"][0].contains("requests")) {
    return absl::InternalError(absl::StrCat("bad tandem-bench JSON in ", out));
  }
  return doc;
}

// How one request of tandem-bench's records ended.
enum class Ending { kCompleted, kTooManyRequests, kUnavailable, kOther };

struct RecordVerdict {
  Ending ending = Ending::kOther;
  std::string reason;  // the OpenAI error body's message; "" when completed or none was sent
};

// The message of the OpenAI error JSON in `error` ("HTTP 429: {"error":{"message":...}}").
std::string ErrorMessage(const std::string& error) {
  const size_t brace = error.find('{');
  if (brace == std::string::npos) return "";
  json body = json::parse(error.substr(brace), nullptr, /*allow_exceptions=*/false);
  if (!body.is_object() || !body.contains("error") || !body["error"].is_object()) return "";
  const json& message = body["error"]["message"];
  return message.is_string() ? message.get<std::string>() : "";
}

RecordVerdict JudgeRecord(const json& record) {
  RecordVerdict v;
  if (record.value("success", false)) {
    v.ending = record.value("output_tokens", 0) == kOutputLen ? Ending::kCompleted : Ending::kOther;
    return v;
  }
  const std::string error = record.value("error", "");
  v.reason = ErrorMessage(error);
  switch (record.value("http_status", 0)) {
    case 429:
      v.ending = Ending::kTooManyRequests;
      break;
    case 503:
      v.ending = Ending::kUnavailable;
      break;
    default:
      v.ending = Ending::kOther;
      if (v.reason.empty()) v.reason = error;
  }
  return v;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t i = static_cast<size_t>(std::ceil(p * static_cast<double>(values.size()))) - 1;
  return values[std::min(i, values.size() - 1)];
}

// What a run's per-request records came to.
struct Tally {
  int total = 0;
  int completed = 0;
  int too_many = 0;     // 429
  int unavailable = 0;  // 503
  int other = 0;
  int without_reason = 0;  // 429 / 503 with an empty message
  int over_deadline = 0;   // ended later than the router's timeout + margin
  double max_e2e_s = 0;
  double p99_e2e_s = 0;             // of the completed requests
  double p99_refused_e2e_s = 0;     // of the 429s and 503s
  std::vector<std::string> is_up;   // errors that say a node is not up (the first few)
  std::vector<std::string> others;  // the first few "other" endings
};

Tally TallyRecords(const json& requests) {
  Tally t;
  std::vector<double> completed_e2e;
  std::vector<double> refused_e2e;
  for (const json& record : requests) {
    ++t.total;
    const double e2e = record.value("e2e_s", 0.0);
    t.max_e2e_s = std::max(t.max_e2e_s, e2e);
    if (e2e > kRequestTimeoutMs / 1000.0 + kEndMarginS) ++t.over_deadline;
    const std::string error = record.value("error", "");
    if (absl::StrContains(error, "is up") && t.is_up.size() < 5) t.is_up.push_back(error);
    const RecordVerdict v = JudgeRecord(record);
    switch (v.ending) {
      case Ending::kCompleted:
        ++t.completed;
        completed_e2e.push_back(e2e);
        break;
      case Ending::kTooManyRequests:
        ++t.too_many;
        refused_e2e.push_back(e2e);
        if (v.reason.empty()) ++t.without_reason;
        break;
      case Ending::kUnavailable:
        ++t.unavailable;
        refused_e2e.push_back(e2e);
        if (v.reason.empty()) ++t.without_reason;
        break;
      case Ending::kOther:
        ++t.other;
        if (t.others.size() < 5) t.others.push_back(record.dump());
        break;
    }
  }
  t.p99_e2e_s = Percentile(completed_e2e, 0.99);
  t.p99_refused_e2e_s = Percentile(refused_e2e, 0.99);
  return t;
}

// Requests completed per second while the load was steady: the completed requests that ended
// between the first completion and the last send, over that span (a closed loop ramps up before
// the one and drains after the other). 0 when the span is empty.
double SteadyThroughput(const json& requests) {
  double first_end = std::numeric_limits<double>::infinity();
  double last_start = 0;
  std::vector<double> ends;
  for (const json& record : requests) {
    const double start = record.value("start_s", 0.0);
    last_start = std::max(last_start, start);
    if (JudgeRecord(record).ending != Ending::kCompleted) continue;
    ends.push_back(start + record.value("e2e_s", 0.0));
    first_end = std::min(first_end, ends.back());
  }
  if (!(last_start > first_end)) return 0;
  const auto in_span = std::count_if(
      ends.begin(), ends.end(), [&](double end) { return end > first_end && end <= last_start; });
  return static_cast<double>(in_span) / (last_start - first_end);
}

json TallyJson(const Tally& t, double offered_rate) {
  return {{"offered_rate", offered_rate},       {"requests", t.total},
          {"completed", t.completed},           {"http_429", t.too_many},
          {"http_503", t.unavailable},          {"other", t.other},
          {"without_reason", t.without_reason}, {"over_deadline", t.over_deadline},
          {"p99_e2e_s", t.p99_e2e_s},           {"p99_refused_e2e_s", t.p99_refused_e2e_s},
          {"max_e2e_s", t.max_e2e_s},           {"is_up_errors", t.is_up},
          {"other_examples", t.others}};
}

// The value of `series` (the whole name with labels, as /metrics writes it) in a scrape; -1 when
// it is missing.
double MetricValue(const std::string& scrape, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(scrape, '\n')) {
    if (!absl::StartsWith(line, series) || line.size() <= series.size() ||
        line[series.size()] != ' ') {
      continue;
    }
    double value = 0;
    if (absl::SimpleAtod(line.substr(series.size() + 1), &value)) return value;
  }
  return -1;
}

// The router's series the test reads.
constexpr char kPrefillUp[] = "tandem_router_nodes{role=\"prefill\",state=\"up\"}";
constexpr char kDecodeUp[] = "tandem_router_nodes{role=\"decode\",state=\"up\"}";
constexpr char kMarkedDown[] = "tandem_router_node_marked_down_total";
constexpr char kNoNodeAvailable[] = "tandem_router_no_node_available_total";
const std::vector<std::string> kRouterSeries = {
    kPrefillUp,
    kDecodeUp,
    kMarkedDown,
    kNoNodeAvailable,
    "tandem_router_node_slow_checks_total",
    "tandem_router_kv_waits_total",
    "tandem_router_kv_wait_refusals_total",
    "tandem_router_requests_total{api=\"completions\",status=\"ok\"}",
    "tandem_router_requests_total{api=\"completions\",status=\"resource_exhausted\"}",
    "tandem_router_requests_total{api=\"completions\",status=\"unavailable\"}"};

bool AllBlocksFree(const v1::NodeLoad& load) {
  return load.num_free_kv_blocks() == load.num_kv_blocks() && load.num_held_kv_blocks() == 0 &&
         load.num_awaiting_kv() == 0 && load.num_running() == 0;
}

json LoadJson(const v1::NodeLoad& load) {
  return {{"role", load.role()},
          {"num_kv_blocks", load.num_kv_blocks()},
          {"num_free_kv_blocks", load.num_free_kv_blocks()},
          {"num_held_kv_blocks", load.num_held_kv_blocks()},
          {"num_awaiting_kv", load.num_awaiting_kv()},
          {"num_running", load.num_running()},
          {"num_waiting", load.num_waiting()},
          {"num_finished_requests", load.num_finished_requests()}};
}

TEST(OverloadTest, FourTimesCapacityForAMinuteEndsEveryRequestAndFreesEveryBlock) {
  ASSERT_EQ(MissingBinaries({"tandem-bench", "tandem-router", "tandem-prefill", "tandem-decode"}),
            "");
  const double seconds = OverloadSeconds();
  const std::string out_dir = TestBinaryDir() + "/overload";
  std::filesystem::create_directories(out_dir);

  LocalCluster cluster;
  ClusterSpec spec;
  spec.model_dir = TestModelDir("llama3.2");
  spec.num_prefill = 2;
  spec.num_decode = 2;
  spec.node_args = kSimArgs;
  spec.router_args = {"--request-timeout-ms",      absl::StrCat(kRequestTimeoutMs),
                      "--max-concurrent-requests", absl::StrCat(kMaxConcurrent),
                      "--max-queued-requests",     absl::StrCat(kMaxQueued),
                      "--queue-timeout-ms",        absl::StrCat(kQueueTimeoutMs)};
  ASSERT_NO_FATAL_FAILURE(cluster.Start(spec));
  const std::string http = cluster.router_http_address();
  ASSERT_FALSE(http.empty());
  // Every node up in the router's view before the first request.
  const absl::Time up_by = absl::Now() + absl::Seconds(30);
  std::string scrape;
  for (;;) {
    scrape = ScrapeMetrics(cluster.router_metrics_address()).value_or("");
    if (MetricValue(scrape, kPrefillUp) == 2 && MetricValue(scrape, kDecodeUp) == 2) {
      break;
    }
    ASSERT_LT(absl::Now(), up_by) << "the router never saw 2 + 2 nodes up:\n" << scrape;
    absl::SleepFor(absl::Milliseconds(100));
  }

  // 1. The capacity: closed loop at the router's concurrency limit, so nothing waits or is refused.
  absl::StatusOr<json> capacity_doc = RunBench(
      http,
      {"--num-prompts", absl::StrCat(kCapacityPrompts), "--request-rate", "inf",
       "--max-concurrency", absl::StrCat(kMaxConcurrent), "--seed", "1", "--timeout-s", "60"},
      out_dir + "/bench_capacity.json", absl::Seconds(120));
  ASSERT_TRUE(capacity_doc.ok()) << capacity_doc.status() << cluster.Logs();
  const Tally capacity_tally = TallyRecords((*capacity_doc)["runs"][0]["requests"]);
  ASSERT_EQ(capacity_tally.completed, kCapacityPrompts)
      << TallyJson(capacity_tally, 0).dump(1) << cluster.Logs();
  const double capacity = SteadyThroughput((*capacity_doc)["runs"][0]["requests"]);
  const double capacity_whole_run =
      (*capacity_doc)["runs"][0]["summary"]["request_throughput"].get<double>();
  ASSERT_GT(capacity, 0.5) << "the cluster barely serves: " << cluster.Logs();

  // 2. 4x that, open loop, for `seconds` of arrivals. The bench's own timeout is well past the
  // router's, so a request the router failed to end shows up as one that ended too late.
  const double rate = std::round(kOverload * capacity * 10) / 10;
  const int expected = static_cast<int>(std::ceil(rate * seconds));
  const absl::Time load_start = absl::Now();
  absl::StatusOr<json> load_doc =
      RunBench(http,
               {"--num-prompts", absl::StrCat(expected + 1), "--request-rates", absl::StrCat(rate),
                "--run-duration-s", absl::StrCat(seconds), "--seed", "2", "--timeout-s",
                absl::StrCat(kRequestTimeoutMs / 1000 + 30)},
               out_dir + "/bench_overload.json", absl::Seconds(seconds + 120));
  const double load_wall_s = absl::ToDoubleSeconds(absl::Now() - load_start);
  ASSERT_TRUE(load_doc.ok()) << load_doc.status() << cluster.Logs();
  const json& requests = (*load_doc)["runs"][0]["requests"];
  const Tally tally = TallyRecords(requests);
  const double served = SteadyThroughput(requests);

  // 3. Every node's KV blocks all free again (bounded wait), and the router's view of the nodes.
  const absl::Time kv_start = absl::Now();
  const absl::Time kv_deadline = kv_start + absl::Seconds(30);
  json nodes = json::array();
  bool all_free = true;
  for (int decode = 1; decode >= 0; --decode) {
    for (int i = 0; i < 2; ++i) {
      const std::string address = decode ? cluster.decode_address(i) : cluster.prefill_address(i);
      const bool free = cluster.WaitForLoad(address, decode, AllBlocksFree,
                                            std::max(kv_deadline - absl::Now(), absl::Seconds(1)));
      absl::StatusOr<v1::NodeLoad> load =
          decode ? cluster.DecodeLoad(address) : cluster.PrefillLoad(address);
      json entry = load.ok() ? LoadJson(*load) : json{{"error", load.status().ToString()}};
      entry["all_free"] = free;
      nodes.push_back(entry);
      all_free = all_free && free;
    }
  }
  const double kv_free_after_s = absl::ToDoubleSeconds(absl::Now() - kv_start);
  scrape = ScrapeMetrics(cluster.router_metrics_address()).value_or("");
  json router = json::object();
  for (const std::string& series : kRouterSeries) router[series] = MetricValue(scrape, series);

  // The table and the JSON, before the verdicts.
  std::printf(
      "\nOverload: 2 prefill + 2 decode sim nodes (H100, Llama-3.1-8B, time scale 20), "
      "router --max-concurrent-requests %d --max-queued-requests %d --queue-timeout-ms %d "
      "--request-timeout-ms %d; %d-token prompts, %d tokens out\n",
      kMaxConcurrent, kMaxQueued, kQueueTimeoutMs, kRequestTimeoutMs, kInputLen, kOutputLen);
  std::printf("%-22s %9s %9s %9s %6s %6s %6s %12s %10s\n", "run", "rate/s", "requests", "completed",
              "429", "503", "other", "p99 e2e (s)", "max e2e");
  auto row = [](const char* name, double r, const Tally& t) {
    std::printf("%-22s %9.1f %9d %9d %6d %6d %6d %12.2f %10.2f\n", name, r, t.total, t.completed,
                t.too_many, t.unavailable, t.other, t.p99_e2e_s, t.max_e2e_s);
  };
  row("capacity (closed loop)", capacity, capacity_tally);
  row(absl::StrCat("4x capacity, ", seconds, " s").c_str(), rate, tally);
  std::printf(
      "capacity %.2f req/s while steady (%.2f over the whole closed-loop run); under "
      "overload %.1f%% completed, %.2f req/s served while steady; KV all free %.1f s after "
      "the load; router: %s\n\n",
      capacity, capacity_whole_run, tally.total > 0 ? 100.0 * tally.completed / tally.total : 0.0,
      served, kv_free_after_s, router.dump().c_str());
  json result = {{"capacity_req_s", capacity},
                 {"capacity_whole_run_req_s", capacity_whole_run},
                 {"overload_served_req_s", served},
                 {"seconds", seconds},
                 {"router",
                  {{"max_concurrent_requests", kMaxConcurrent},
                   {"max_queued_requests", kMaxQueued},
                   {"queue_timeout_ms", kQueueTimeoutMs},
                   {"request_timeout_ms", kRequestTimeoutMs}}},
                 {"node_args", kSimArgs},
                 {"capacity_run", TallyJson(capacity_tally, capacity)},
                 {"overload_run", TallyJson(tally, rate)},
                 {"overload_wall_s", load_wall_s},
                 {"kv_all_free", all_free},
                 {"kv_free_after_s", kv_free_after_s},
                 {"nodes", nodes},
                 {"router_metrics", router}};
  std::ofstream(out_dir + "/overload_test.json") << result.dump(2) << "\n";

  // Every request ended, one way or the other, and in time.
  EXPECT_EQ(tally.total, expected);
  EXPECT_EQ(tally.completed + tally.too_many + tally.unavailable, tally.total)
      << "endings other than completed / 429 / 503:\n"
      << absl::StrJoin(tally.others, "\n");
  EXPECT_EQ(tally.without_reason, 0) << "429 / 503 answers without a message";
  EXPECT_TRUE(tally.is_up.empty()) << "a node counted as not up:\n"
                                   << absl::StrJoin(tally.is_up, "\n");
  EXPECT_EQ(tally.over_deadline, 0) << "requests ended after --request-timeout-ms + " << kEndMarginS
                                    << " s; the longest took " << tally.max_e2e_s;
  EXPECT_GE(tally.completed, kMinCompletedShare * tally.total);
  // The overload was real: the queue turned requests away.
  EXPECT_GT(tally.too_many + tally.unavailable, 0);
  // Busy is never dead: no node was marked down, and all are up at the end.
  EXPECT_EQ(router[kMarkedDown], 0.0) << router.dump(1);
  EXPECT_EQ(router[kNoNodeAvailable], 0.0) << router.dump(1);
  EXPECT_EQ(router[kPrefillUp], 2.0) << router.dump(1);
  EXPECT_EQ(router[kDecodeUp], 2.0) << router.dump(1);
  // Every KV block came back.
  EXPECT_TRUE(all_free) << nodes.dump(1);
  if (HasFailure()) std::fprintf(stderr, "%s\n", cluster.Logs().c_str());
}

}  // namespace
}  // namespace tandem::testing
