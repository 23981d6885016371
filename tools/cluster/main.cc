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

constexpr char kUsage[] =
    R"(Usage: tandem-cluster --model DIR [options]

Starts a local tandem cluster: prefill and decode nodes (each on 127.0.0.1, port picked at run
time), then a router pointed at them. Prints the endpoints once every process is ready, then
runs until SIGINT/SIGTERM (stops every process, exit 0) or until a process dies (says which,
stops the rest, exit 1). Children die with tandem-cluster even if it is killed with SIGKILL.

Cluster:
  --model DIR                   Hugging Face model directory (required)
  --prefill N                   prefill nodes (default 2; 0 in colocated mode)
  --decode N                    decode nodes (default 2)
  --mode M                      disaggregated (default) | colocated
  --policy P                    router placement: round_robin | least_loaded | prefix_aware
  --listen HOST:PORT            the router's gRPC address (default 127.0.0.1:0 = any free port)
  --ucx-tls LIST                UCX_TLS for the nodes (tcp, sm, posix,sysv,self, ...);
                                default: inherited from the environment
Nodes (default: each server's own):
  --threads-per-node N          CPU threads per node
  --kv-cache-mb N               KV pool per node
  --block-size N                tokens per KV block
  --max-num-batched-tokens N    token budget per engine step
  --max-num-seqs N              sequences running at once per node
  --lease-ms N                  KV reservation lease (decode nodes and router)
Router (default: the router's own):
  --local-prefill-threshold N   prompts with at most N uncached tokens prefill on the decode node
  --max-retries N               placement retries per request
Pass-through (repeatable, appended verbatim):
  --router-arg ARG  --prefill-arg ARG  --decode-arg ARG
Files:
  --bin-dir DIR                 where tandem-router/-prefill/-decode are (default: beside
                                this executable)
  --log-dir DIR                 one log file per process (default: a new temp dir, printed)
  --ready-file PATH             once ready, write the endpoints as JSON here
                                ({"grpc": router, "pid", "processes": [...]})
Security:
  --tls                         make a throwaway CA and certificates: the router's gRPC and
                                HTTPS API over TLS, mTLS on every node port; prints the CA's
                                path (clients verify the router with it)
  --startup-timeout-s N         give up starting after N seconds (default 120)
  --stop-grace-ms N             SIGTERM-to-SIGKILL grace when stopping (default 10000)
One-shot:
  --prompt TEXT                 once ready, stream one completion of TEXT through the router to
                                stdout, stop the cluster and exit with the request's status
  --max-tokens N                tokens for --prompt (default 16)
  --temperature T               sampling temperature for --prompt (default: the server's)
  --help                        this text
)";

std::string ParseFlags(int argc, char** argv, ClusterOptions* o, bool* help) {
  tandem::FlagSet flags;
  flags.String("model", &o->model_dir);
  flags.Number("prefill", &o->num_prefill);
  flags.Number("decode", &o->num_decode);
  flags.String("mode", &o->mode);
  flags.String("policy", &o->policy);
  flags.String("listen", &o->router_listen);
  flags.String("ucx-tls", &o->ucx_tls);
  flags.Number("threads-per-node", &o->threads_per_node);
  flags.Number("kv-cache-mb", &o->kv_cache_mb);
  flags.Number("block-size", &o->block_size);
  flags.Number("max-num-batched-tokens", &o->max_num_batched_tokens);
  flags.Number("max-num-seqs", &o->max_num_seqs);
  flags.Number("lease-ms", &o->lease_ms);
  flags.Number("local-prefill-threshold", &o->local_prefill_threshold);
  flags.Number("max-retries", &o->max_retries);
  auto append_to = [](std::vector<std::string>* args) {
    return [args](std::string_view value) -> std::string {
      args->emplace_back(value);
      return "";
    };
  };
  flags.Custom("router-arg", append_to(&o->router_args));
  flags.Custom("prefill-arg", append_to(&o->prefill_args));
  flags.Custom("decode-arg", append_to(&o->decode_args));
  flags.String("bin-dir", &o->bin_dir);
  flags.String("log-dir", &o->log_dir);
  flags.String("ready-file", &o->ready_file);
  flags.Switch("tls", &o->tls);
  flags.Number("startup-timeout-s", &o->startup_timeout_s);
  flags.Number("stop-grace-ms", &o->stop_grace_ms);
  flags.String("prompt", &o->prompt);
  flags.Number("max-tokens", &o->max_tokens);
  flags.Number("temperature", &o->temperature);
  std::string error = flags.Parse(argc, argv, help);
  if (!error.empty() || *help) return error;
  return tandem::ValidateClusterOptions(*o);
}

}  // namespace

int main(int argc, char** argv) {
  // Before any thread starts: SIGINT/SIGTERM are taken synchronously by the run loop.
  tandem::SignalWatcher signals;
  ClusterOptions options;
  bool help = false;
  std::string error = ParseFlags(argc, argv, &options, &help);
  if (help) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!error.empty()) {
    std::fprintf(stderr, "tandem-cluster: %s\n", error.c_str());
    return 2;
  }
  return tandem::RunCluster(options, signals);
}
