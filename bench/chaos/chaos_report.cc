#include "bench/chaos/chaos_report.h"

#include <algorithm>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace tandem::chaos {
namespace {

using json = nlohmann::ordered_json;

constexpr size_t kMaxExamples = 12;

// The status message of a gRPC failure ("gRPC UNAVAILABLE: <message>" → "<message>").
std::string StatusMessage(const std::string& error) {
  const size_t colon = error.find(": ");
  if (colon == std::string::npos) return "";
  return std::string(absl::StripAsciiWhitespace(error.substr(colon + 2)));
}

// Wrong tokens among the ones a failed stream delivered: each must match the expected token at
// its position; a stream cannot deliver more than it asked for.
int PrefixErrors(const TokenIds& want, const TokenIds& got) {
  const size_t common = std::min(want.size(), got.size());
  int errors = static_cast<int>(got.size() - common);
  for (size_t i = 0; i < common; ++i) errors += want[i] != got[i] ? 1 : 0;
  return errors;
}

}  // namespace

const char* EndingName(Ending ending) {
  switch (ending) {
    case Ending::kCompleted:
      return "completed";
    case Ending::kWrongTokens:
      return "wrong_tokens";
    case Ending::kFailed:
      return "failed";
    case Ending::kFailedUnclear:
      return "failed_unclear";
    case Ending::kLost:
      return "lost";
  }
  return "?";
}

RequestVerdict JudgeRequest(const bench::RequestResult& result, const TokenIds& expected,
                            double lost_after_s) {
  RequestVerdict v;
  v.tokens_delivered = static_cast<int>(result.token_ids.size());
  if (result.success) {
    v.token_errors = TokenErrors(expected, result.token_ids);
    v.ending = v.token_errors == 0 ? Ending::kCompleted : Ending::kWrongTokens;
    return v;
  }
  v.token_errors = PrefixErrors(expected, result.token_ids);
  v.code = absl::StatusCodeToString(static_cast<absl::StatusCode>(result.grpc_code));
  if (result.e2e_s >= lost_after_s) {
    v.ending = Ending::kLost;
  } else if (result.grpc_code == 0 || StatusMessage(result.error).empty()) {
    v.ending = Ending::kFailedUnclear;
  } else {
    v.ending = Ending::kFailed;
  }
  return v;
}

Tally TallyRequests(const std::vector<bench::RequestResult>& results,
                    const std::vector<int>& prompt_of, const std::vector<TokenIds>& expected,
                    double lost_after_s) {
  Tally t;
  std::set<std::string> codes_seen;
  bool wrong_seen = false;
  for (size_t i = 0; i < results.size(); ++i) {
    const bench::RequestResult& r = results[i];
    const TokenIds& want = expected[prompt_of[i]];
    const RequestVerdict v = JudgeRequest(r, want, lost_after_s);
    ++t.sent;
    t.tokens_checked += v.tokens_delivered;
    t.wrong_tokens += v.token_errors;
    if (v.token_errors > 0 && v.ending != Ending::kWrongTokens) ++t.wrong_token_requests;
    switch (v.ending) {
      case Ending::kCompleted:
        ++t.completed;
        break;
      case Ending::kWrongTokens:
        ++t.wrong_token_requests;
        break;
      case Ending::kFailed:
        ++t.failed;
        ++t.failed_by_code[v.code];
        if (v.tokens_delivered > 0) ++t.failed_after_first_token;
        break;
      case Ending::kFailedUnclear:
        ++t.failed_unclear;
        break;
      case Ending::kLost:
        ++t.lost;
        break;
    }
    const bool new_code = v.ending != Ending::kCompleted && v.ending != Ending::kWrongTokens &&
                          codes_seen.insert(absl::StrCat(EndingName(v.ending), v.code)).second;
    const bool first_wrong = v.token_errors > 0 && !wrong_seen;
    wrong_seen = wrong_seen || v.token_errors > 0;
    if ((new_code || first_wrong) && t.examples.size() < kMaxExamples) {
      t.examples.push_back(
          absl::StrFormat("request %d (%s, %d tokens delivered, %d wrong, after %.2f s): %s", i,
                          EndingName(v.ending), v.tokens_delivered, v.token_errors, r.e2e_s,
                          r.error.empty() ? r.finish_reason : r.error));
    }
  }
  return t;
}

std::vector<ProcessSummary> SummarizeProcesses(const std::vector<ProcessSample>& samples) {
  std::vector<ProcessSummary> out;
  std::map<std::string, std::set<pid_t>> pids;
  for (const ProcessSample& s : samples) {
    auto it = std::find_if(out.begin(), out.end(),
                           [&](const ProcessSummary& p) { return p.name == s.name; });
    if (it == out.end()) {
      out.push_back({s.name, 0, s.rss_kib, s.rss_kib, s.rss_kib, s.threads, s.threads, s.threads});
      it = out.end() - 1;
    }
    pids[s.name].insert(s.pid);
    it->rss_max_kib = std::max(it->rss_max_kib, s.rss_kib);
    it->threads_max = std::max(it->threads_max, s.threads);
    it->rss_last_kib = s.rss_kib;
    it->threads_last = s.threads;
  }
  for (ProcessSummary& p : out) p.incarnations = static_cast<int>(pids[p.name].size());
  return out;
}

int ChaosReport::leaked_blocks() const {
  int leaked = 0;
  for (const NodeKv& node : kv) leaked += node.leaked;
  return leaked;
}

bool ChaosReport::GoalsMet() const {
  const bool all_reachable =
      std::all_of(kv.begin(), kv.end(), [](const NodeKv& n) { return n.reachable; });
  return tally.lost == 0 && tally.wrong_tokens == 0 && tally.wrong_token_requests == 0 &&
         leaked_blocks() == 0 && all_reachable && !kv.empty();
}

json ChaosReport::ToJson() const {
  json j;
  j["config"] = config;
  j["load_s"] = load_s;
  j["goals_met"] = GoalsMet();
  json requests = {{"sent", tally.sent},
                   {"completed", tally.completed},
                   {"wrong_token_requests", tally.wrong_token_requests},
                   {"failed_clear_error", tally.failed},
                   {"failed_after_first_token", tally.failed_after_first_token},
                   {"failed_unclear", tally.failed_unclear},
                   {"lost", tally.lost},
                   {"tokens_checked", tally.tokens_checked},
                   {"wrong_tokens", tally.wrong_tokens},
                   {"failed_by_code", tally.failed_by_code},
                   {"examples", tally.examples}};
  j["requests"] = std::move(requests);
  json router_json = json::object();
  if (router.has_value()) {
    router_json["migrations"] =
        router->migrations.has_value() ? json(*router->migrations) : json("metric absent");
    router_json["migrations_metric"] = kMigrationsMetric;
    router_json["kv_moves"] = router->kv_moves;
    router_json["retries"] = router->retries;
    router_json["failed_after_first_token"] = router->failed_after_first_token;
    router_json["node_marked_down"] = router->node_marked_down;
    router_json["node_restarts"] = router->node_restarts;
    router_json["grpc_requests_by_status"] = router->requests_by_status;
  } else {
    router_json["error"] = router_error;
  }
  j["router"] = std::move(router_json);
  json faults_json = json::array();
  for (const FaultRecord& f : faults) {
    faults_json.push_back({{"index", f.planned.index},
                           {"kind", FaultKindName(f.planned.kind)},
                           {"node", f.node},
                           {"planned_at_s", f.planned.at_s},
                           {"hold_s", f.planned.hold_s},
                           {"started_s", f.started_s},
                           {"ended_s", f.ended_s},
                           {"ok", f.ok},
                           {"detail", f.detail}});
  }
  j["faults"] = std::move(faults_json);
  j["network_cuts"] = network_cuts.empty() ? "available" : network_cuts;
  j["unexpected_exits"] = unexpected_exits;
  json kv_json = json::array();
  for (const NodeKv& n : kv) {
    kv_json.push_back({{"node", n.name},
                       {"reachable", n.reachable},
                       {"kv_blocks", n.kv_blocks},
                       {"free_blocks", n.free_blocks},
                       {"held_blocks", n.held_blocks},
                       {"awaiting_kv", n.awaiting_kv},
                       {"running", n.running},
                       {"leaked_blocks", n.leaked},
                       {"settled_s", n.settled_s},
                       {"error", n.error}});
  }
  j["kv_after_load"] = std::move(kv_json);
  json processes = json::array();
  for (const ProcessSummary& p : SummarizeProcesses(samples)) {
    processes.push_back({{"name", p.name},
                         {"incarnations", p.incarnations},
                         {"rss_kib_first", p.rss_first_kib},
                         {"rss_kib_max", p.rss_max_kib},
                         {"rss_kib_last", p.rss_last_kib},
                         {"threads_first", p.threads_first},
                         {"threads_max", p.threads_max},
                         {"threads_last", p.threads_last}});
  }
  j["processes"] = std::move(processes);
  json series = json::array();
  for (const ProcessSample& s : samples) {
    series.push_back({s.t_s, s.name, s.pid, s.rss_kib, s.threads});
  }
  j["samples_columns"] = {"t_s", "name", "pid", "rss_kib", "threads"};
  j["samples"] = std::move(series);
  return j;
}

std::string ChaosReport::Table() const {
  std::string out;
  const Tally& t = tally;
  absl::StrAppendFormat(&out, "\n=== tandem-chaos: %.0f s of load, %d faults ===\n", load_s,
                        static_cast<int>(faults.size()));
  std::map<std::string, std::pair<int, int>> by_kind;  // kind -> (done, failed)
  for (const FaultRecord& f : faults) {
    auto& [done, failed] = by_kind[FaultKindName(f.planned.kind)];
    ++done;
    failed += f.ok ? 0 : 1;
  }
  absl::StrAppend(&out, "faults:");
  for (const auto& [kind, counts] : by_kind) {
    absl::StrAppendFormat(&out, "  %s %d%s", kind, counts.first,
                          counts.second > 0 ? absl::StrCat(" (", counts.second, " failed)") : "");
  }
  absl::StrAppend(&out, "\n",
                  network_cuts.empty() ? "" : "network cuts: unavailable (" + network_cuts + ")\n");
  for (const std::string& e : unexpected_exits) absl::StrAppend(&out, "unexpected exit: ", e, "\n");
  absl::StrAppendFormat(&out, "%-34s %10s\n", "requests", "count");
  auto row = [&out](const std::string& name, int64_t value) {
    absl::StrAppendFormat(&out, "%-34s %10d\n", name, value);
  };
  row("sent", t.sent);
  row("completed (exact tokens)", t.completed);
  row("failed with a clear error", t.failed);
  for (const auto& [code, n] : t.failed_by_code) row(absl::StrCat("  ", code), n);
  row("  of which after the first token", t.failed_after_first_token);
  row("failed without a clear error", t.failed_unclear);
  row("lost (no end in time)", t.lost);
  row("requests with wrong tokens", t.wrong_token_requests);
  row("wrong tokens", t.wrong_tokens);
  row("tokens checked", t.tokens_checked);
  if (router.has_value()) {
    absl::StrAppendFormat(&out, "%-34s %10s\n", "migrations (router)",
                          router->migrations.has_value()
                              ? absl::StrFormat("%.0f", *router->migrations)
                              : std::string("absent"));
    for (const auto& [result, n] : router->kv_moves) {
      row(absl::StrCat("live KV moves, ", result, " (router)"), static_cast<int64_t>(n));
    }
    row("retries (router)", static_cast<int64_t>(router->retries));
    row("nodes marked down (router)", static_cast<int64_t>(router->node_marked_down));
  } else {
    absl::StrAppend(&out, "router metrics: ", router_error, "\n");
  }
  absl::StrAppendFormat(&out, "\n%-12s %8s %8s %8s %8s %9s\n", "node", "blocks", "free", "held",
                        "leaked", "settled");
  for (const NodeKv& n : kv) {
    if (!n.reachable) {
      absl::StrAppendFormat(&out, "%-12s unreachable: %s\n", n.name, n.error);
      continue;
    }
    absl::StrAppendFormat(&out, "%-12s %8d %8d %8d %8d %7.1f s\n", n.name, n.kv_blocks,
                          n.free_blocks, n.held_blocks, n.leaked, n.settled_s);
  }
  absl::StrAppendFormat(&out, "\n%-12s %5s %21s %17s\n", "process", "pids",
                        "RSS MiB first/max/last", "threads f/max/l");
  for (const ProcessSummary& p : SummarizeProcesses(samples)) {
    absl::StrAppendFormat(&out, "%-12s %5d %7.0f/%6.0f/%6.0f %7d/%4d/%4d\n", p.name, p.incarnations,
                          p.rss_first_kib / 1024.0, p.rss_max_kib / 1024.0, p.rss_last_kib / 1024.0,
                          p.threads_first, p.threads_max, p.threads_last);
  }
  for (const std::string& e : t.examples) absl::StrAppend(&out, "  e.g. ", e, "\n");
  absl::StrAppendFormat(&out, "\ngoals (lost 0, leaked blocks 0, wrong tokens 0): %s\n",
                        GoalsMet() ? "MET" : "MISSED");
  return out;
}

}  // namespace tandem::chaos
