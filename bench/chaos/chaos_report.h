// What a chaos run came to, judged from the bench's per-request records and the cluster's state
// after the load:
//   - every request ends one way (JudgeRequest): completed with exactly its expected tokens;
//     completed with wrong tokens (corruption); failed with a clear error (a gRPC status and a
//     message: what the client is told, e.g. a stream that broke after its first token, which
//     today ends with an error unless the router migrates it); failed without a clear error (no
//     message, or OK with no output); lost (no end within the client's deadline, the router's
//     request timeout plus a grace);
//   - the tokens a failed stream delivered before it broke are checked too (a prefix of the
//     expected output, else wrong tokens);
//   - leaked KV blocks: per surviving node, blocks not free (or held, or awaiting KV) once the
//     load is over and a settle time has passed;
//   - RSS and threads over time per process, the faults done, the router's counters.
// The goals the run is judged against: lost 0, leaked blocks 0 on every node, wrong tokens 0.
#ifndef TANDEM_BENCH_CHAOS_CHAOS_REPORT_H_
#define TANDEM_BENCH_CHAOS_CHAOS_REPORT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/chaos/expected_tokens.h"
#include "bench/chaos/fault_injector.h"
#include "bench/chaos/metrics_scrape.h"
#include "bench/chaos/process_sampler.h"
#include "bench/serve/bench_request.h"
#include "nlohmann/json.hpp"

namespace tandem::chaos {

enum class Ending { kCompleted, kWrongTokens, kFailed, kFailedUnclear, kLost };
const char* EndingName(Ending ending);

struct RequestVerdict {
  Ending ending = Ending::kFailedUnclear;
  int token_errors = 0;  // against the expected tokens (a failed stream: its prefix only)
  int tokens_delivered = 0;
  std::string code;  // failures: the gRPC code's name ("UNAVAILABLE")
};

// `lost_after_s`: the client's deadline; a request that took that long never ended.
RequestVerdict JudgeRequest(const bench::RequestResult& result, const TokenIds& expected,
                            double lost_after_s);

struct Tally {
  int sent = 0;
  int completed = 0;  // with exactly the expected tokens
  int wrong_token_requests = 0;
  int failed = 0;  // with a clear error
  int failed_after_first_token = 0;
  int failed_unclear = 0;
  int lost = 0;
  int64_t tokens_checked = 0;
  int64_t wrong_tokens = 0;
  std::map<std::string, int> failed_by_code;
  std::vector<std::string> examples;  // the first error of each code, and the first wrong stream
};

// `prompt_of[i]`: the prompt index request i was sent with.
Tally TallyRequests(const std::vector<bench::RequestResult>& results,
                    const std::vector<int>& prompt_of, const std::vector<TokenIds>& expected,
                    double lost_after_s);

struct NodeKv {
  std::string name;
  bool reachable = false;
  int kv_blocks = 0;
  int free_blocks = 0;
  int held_blocks = 0;
  int awaiting_kv = 0;
  int running = 0;
  int leaked = 0;        // kv_blocks - free_blocks + held_blocks (0: all back)
  double settled_s = 0;  // after the load ended, when it was first all free (or the wait ended)
  std::string error;     // unreachable: why
};

struct ProcessSummary {
  std::string name;
  int incarnations = 0;  // distinct pids seen
  int64_t rss_first_kib = 0, rss_max_kib = 0, rss_last_kib = 0;
  int threads_first = 0, threads_max = 0, threads_last = 0;
};
std::vector<ProcessSummary> SummarizeProcesses(const std::vector<ProcessSample>& samples);

struct ChaosReport {
  nlohmann::ordered_json config;  // the run's settings, as given
  double load_s = 0;              // first send → last end
  Tally tally;
  std::vector<FaultRecord> faults;
  std::vector<std::string> unexpected_exits;  // nodes that died without a fault
  std::vector<NodeKv> kv;
  std::optional<RouterCounters> router;  // nullopt when the router could not be scraped
  std::string router_error;
  std::vector<ProcessSample> samples;
  std::string network_cuts;  // "" when available, else why not

  int leaked_blocks() const;
  bool GoalsMet() const;  // lost 0, leaked 0 on every node (all reachable), wrong tokens 0
  nlohmann::ordered_json ToJson() const;
  std::string Table() const;
};

}  // namespace tandem::chaos

#endif  // TANDEM_BENCH_CHAOS_CHAOS_REPORT_H_
