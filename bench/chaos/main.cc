// tandem-chaos: a local cluster under open-loop load while its nodes are killed, stopped, drained
// and cut off the network, one random fault at a time; then every request's ending, the tokens
// against the expected ones, and every node's KV blocks. See chaos_run.h.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "bench/chaos/chaos_options.h"
#include "bench/chaos/chaos_run.h"
#include "bench/chaos/node_network.h"
#include "common/util/cli_flags.h"
#include "tools/cluster/signal_watcher.h"

namespace {

using tandem::chaos::ChaosOptions;

constexpr char kIntro[] =
    R"(Usage: tandem-chaos --model DIR [options]

Starts a local cluster (prefill and decode nodes and a router; the sim backend by default),
drives open-loop greedy load through the router's gRPC API, and every --fault-interval-s does
one random fault to a random node: kill (SIGKILL, restart on the same addresses), stop (SIGSTOP
for a while, then SIGCONT), term (SIGTERM: the node drains and exits; restart), netcut (every
packet to and from the node dropped for a while; each node runs in a network namespace of its
own, which needs root). At the end: requests sent / completed / failed with a clear error /
lost, migrations (the router's counter), wrong tokens against the expected output
(tandem-generate on the cpu backend, the sim's token function on sim), KV blocks not back on
every node, RSS and threads over time. Exit 0 when nothing was lost, no block leaked and no token
was wrong; 1 otherwise; 2 when the run could not be set up.
)";

void AddChaosFlags(tandem::FlagSet& flags, ChaosOptions* o) {
  flags.Section("Cluster");
  flags.String("model", &o->model_dir, {"DIR", "Hugging Face model directory (required)"});
  flags.String("backend", &o->backend, {"B", "sim (default) | cpu"});
  flags.Number("prefill", &o->num_prefill, {"N", "prefill nodes (default 2)"});
  flags.Number("decode", &o->num_decode, {"N", "decode nodes (default 2)"});
  flags.String("sim-gpu", &o->sim_gpu, {"GPU", "sim: h100 (default) | h200 | a100"});
  flags.String("sim-model", &o->sim_model, {"M", "sim: llama-3.1-8b (default) | llama-3.1-70b"});
  flags.Number("sim-time-scale", &o->sim_time_scale, {"X", "sim: steps take X times longer (10)"});
  flags.Number("sim-kv-blocks", &o->sim_kv_blocks, {"N", "sim: KV blocks per node (2048)"});
  flags.Number("node-threads", &o->node_threads, {"N", "cpu: threads per node (1)"});
  flags.Section("Load");
  flags.Number("duration-s", &o->duration_s, {"S", "seconds of arrivals (default 120)"});
  flags.Number("rate", &o->rate, {"R", "requests/s, Poisson (default 4)"});
  flags.Number("num-prompts", &o->num_prompts, {"N", "distinct prompts (default 16)"});
  flags.Number("min-prompt-len", &o->min_prompt_len, {"N", "tokens (default 16)"});
  flags.Number("max-prompt-len", &o->max_prompt_len, {"N", "tokens (default 256)"});
  flags.Number("max-tokens", &o->max_tokens, {"N", "output tokens per request (default 32)"});
  flags.Section("Faults");
  flags.String("faults", &o->faults,
               {"LIST", "kinds to draw from (default kill,stop,term,netcut)"});
  flags.Number("fault-interval-s", &o->fault_interval_s, {"S", "one fault every S s (default 15)"});
  flags.Number("min-hold-s", &o->min_hold_s, {"S", "stop/netcut at least S s (default 2)"});
  flags.Number("max-hold-s", &o->max_hold_s, {"S", "stop/netcut at most S s (default 6)"});
  flags.Number("seed", &o->seed, {"N", "faults, prompts and arrivals (default 1)"});
  flags.Switch("no-isolation", &o->isolate,
               "keep the nodes on the machine's loopback (no network namespaces, no netcut)",
               false);
  flags.Section("Timeouts");
  flags.Number("request-timeout-ms", &o->request_timeout_ms,
               {"N", "the router's request timeout (default 60000)"});
  flags.Number("lost-grace-s", &o->lost_grace_s,
               {"S", "a request with no end this long after the router's timeout is lost (15)"});
  flags.Number("lease-ms", &o->lease_ms, {"N", "decode nodes' KV lease (default 10000)"});
  flags.Number("node-drain-ms", &o->node_drain_ms, {"N", "nodes' drain on SIGTERM (default 5000)"});
  flags.Number("settle-s", &o->settle_s,
               {"S", "after the load, wait up to S s for every block to be free (default 45)"});
  flags.Number("sample-interval-s", &o->sample_interval_s, {"S", "RSS/threads sampling (2)"});
  flags.Number("startup-timeout-s", &o->startup_timeout_s, {"S", "cluster start (default 180)"});
  flags.Section("Pass-through (repeatable)");
  flags.Custom("router-arg", {"ARG", "one more argument for tandem-router"},
               [o](std::string_view v) -> std::string {
                 o->router_args.emplace_back(v);
                 return "";
               });
  flags.Custom("node-arg", {"ARG", "one more argument for every node"},
               [o](std::string_view v) -> std::string {
                 o->node_args.emplace_back(v);
                 return "";
               });
  flags.Section("Files");
  flags.String("out", &o->out, {"PATH", "write the report as JSON here"});
  flags.String("log-dir", &o->log_dir, {"DIR", "process logs (default: a new temp dir)"});
  flags.String("bin-dir", &o->bin_dir, {"DIR", "the servers (default: beside this executable)"});
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread starts: the private network namespace (unshare affects this thread only),
  // and SIGINT/SIGTERM taken synchronously by the run loop.
  ChaosOptions options;
  tandem::FlagSet flags;
  AddChaosFlags(flags, &options);
  bool help = false;
  std::string error = flags.Parse(argc, argv, &help);
  if (help) {
    std::fputs(flags.Help(kIntro).c_str(), stdout);
    return 0;
  }
  if (error.empty()) error = tandem::chaos::ValidateChaosOptions(options);
  if (!error.empty()) {
    std::fprintf(stderr, "tandem-chaos: %s\n", error.c_str());
    return 2;
  }
  std::string network_unavailable = "--no-isolation";
  if (options.isolate) {
    tandem::chaos::RemoveStaleNamespaces();
    absl::Status entered = tandem::chaos::EnterPrivateNetwork();
    network_unavailable = entered.ok() ? "" : std::string(entered.message());
  }
  tandem::SignalWatcher signals;
  return tandem::chaos::RunChaos(options, network_unavailable, signals);
}
