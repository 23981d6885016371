// tandem-cluster: a whole tandem cluster on this machine in one command — prefill and decode
// nodes and a router, on ports picked at run time — until Ctrl-C.
#include <cstdio>
#include <string>
#include <string_view>

#include "common/util/cli_flags.h"
#include "tools/cluster/cluster_options.h"
#include "tools/cluster/cluster_plan.h"
#include "tools/cluster/cluster_runner.h"
#include "tools/cluster/signal_watcher.h"

namespace {

using tandem::ClusterOptions;

constexpr char kIntro[] =
    R"(Usage: tandem-cluster --model DIR [options]

Starts a local tandem cluster: prefill and decode nodes (each on 127.0.0.1, port picked at run
time), then a router pointed at them. Prints the endpoints once every process is ready, then
runs until SIGINT/SIGTERM (stops every process, exit 0) or until a process dies (says which,
stops the rest, exit 1). Children die with tandem-cluster even if it is killed with SIGKILL.
)";

// Declares every flag against `o` with its --help line.
void AddClusterFlags(tandem::FlagSet& flags, ClusterOptions* o) {
  flags.Section("Cluster");
  flags.String("model", &o->model_dir, {"DIR", "Hugging Face model directory (required)"});
  flags.Number("prefill", &o->num_prefill,
               {"N", "prefill nodes (default 2; 0 in colocated and auto mode)"});
  flags.Number("decode", &o->num_decode, {"N", "decode nodes (default 2)"});
  flags.String("mode", &o->mode,
               {"M",
                "disaggregated (default) | colocated | auto (no prefill nodes: every decode node "
                "also prefills for the others, tandem-decode --serve-prefill, and the router "
                "chooses per request)"});
  flags.String("policy", &o->policy,
               {"P", "router placement: round_robin | least_loaded | prefix_aware | cost"});
  flags.String("listen", &o->router_listen,
               {"HOST:PORT", "the router's gRPC address (default 127.0.0.1:0 = any free port)"});
  flags.String("ucx-tls", &o->ucx_tls,
               {"LIST",
                "UCX_TLS for the nodes (tcp, sm, posix,sysv,self, ...); default: inherited from "
                "the environment"});
  flags.Section("Nodes (default: each server's own)");
  flags.Number("threads-per-node", &o->threads_per_node, {"N", "CPU threads per node"});
  flags.Number("kv-cache-mb", &o->kv_cache_mb, {"N", "KV pool per node"});
  flags.Number("block-size", &o->block_size, {"N", "tokens per KV block"});
  flags.String("kv-cache-dtype", &o->kv_cache_dtype,
               {"auto|f32|bf16|fp8_e4m3", "what every node's KV cache stores"});
  flags.Number("max-num-batched-tokens", &o->max_num_batched_tokens,
               {"N", "token budget per engine step"});
  flags.Number("max-num-seqs", &o->max_num_seqs, {"N", "sequences running at once per node"});
  flags.Number("lease-ms", &o->lease_ms, {"N", "KV reservation lease (decode nodes and router)"});
  flags.Section("Router (default: the router's own)");
  flags.Number("local-prefill-threshold", &o->local_prefill_threshold,
               {"N", "prompts with at most N uncached tokens prefill on the decode node"});
  flags.Number("max-retries", &o->max_retries, {"N", "placement retries per request"});
  flags.Section("Pass-through (repeatable, appended verbatim)");
  auto append_to = [](std::vector<std::string>* args) {
    return [args](std::string_view value) -> std::string {
      args->emplace_back(value);
      return "";
    };
  };
  flags.Custom("router-arg", {"ARG", "one more argument for tandem-router"},
               append_to(&o->router_args));
  flags.Custom("prefill-arg", {"ARG", "one more argument for every tandem-prefill"},
               append_to(&o->prefill_args));
  flags.Custom("decode-arg", {"ARG", "one more argument for every tandem-decode"},
               append_to(&o->decode_args));
  flags.Section("Files");
  flags.String(
      "bin-dir", &o->bin_dir,
      {"DIR", "where tandem-router/-prefill/-decode are (default: beside this executable)"});
  flags.String("log-dir", &o->log_dir,
               {"DIR", "one log file per process (default: a new temp dir, printed)"});
  flags.String("ready-file", &o->ready_file,
               {"PATH",
                "once ready, write the endpoints as JSON here ({\"grpc\": router, \"pid\", "
                "\"processes\": [...]})"});
  flags.Section("Security");
  flags.Switch("tls", &o->tls,
               "make a throwaway CA and certificates: the router's gRPC and HTTPS API over TLS, "
               "mTLS on every node port; prints the CA's path (clients verify the router with it)");
  flags.Number("startup-timeout-s", &o->startup_timeout_s,
               {"N", "give up starting after N seconds (default 120)"});
  flags.Number("stop-grace-ms", &o->stop_grace_ms,
               {"N", "SIGTERM-to-SIGKILL grace when stopping (default 10000)"});
  flags.Section("One-shot");
  flags.String("prompt", &o->prompt,
               {"TEXT",
                "once ready, stream one completion of TEXT through the router to stdout, stop the "
                "cluster and exit with the request's status"});
  flags.Number("max-tokens", &o->max_tokens, {"N", "tokens for --prompt (default 16)"});
  flags.Number("temperature", &o->temperature,
               {"T", "sampling temperature for --prompt (default: the server's)"});
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread starts: SIGINT/SIGTERM are taken synchronously by the run loop.
  tandem::SignalWatcher signals;
  ClusterOptions options;
  tandem::FlagSet flags;
  AddClusterFlags(flags, &options);
  bool help = false;
  std::string error = flags.Parse(argc, argv, &help);
  if (help) {
    std::fputs(flags.Help(kIntro).c_str(), stdout);
    return 0;
  }
  if (error.empty()) error = tandem::ValidateClusterOptions(options);
  if (!error.empty()) {
    std::fprintf(stderr, "tandem-cluster: %s\n", error.c_str());
    return 2;
  }
  return tandem::RunCluster(options, signals);
}
