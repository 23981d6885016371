// tandem-router: the client entry of a tandem cluster. Serves tandem.v1.Generation over gRPC,
// tokenizes, places each request on a (prefill, decode) node pair, streams detokenized text back.
#include <signal.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_split.h"
#include "common/tls/tls_flags.h"
#include "common/util/cli_flags.h"
#include "common/util/mutex_checks.h"
#include "router/in_flight.h"
#include "router/router_options.h"
#include "router/router_server.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace {

using tandem::RouterOptions;

constexpr char kIntro[] =
    R"(Usage: tandem-router --model DIR (--decode ADDRS | --decode-dns NAME:PORT)
                     [--prefill ADDRS | --prefill-dns NAME:PORT] [options]

Serves the OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions, /v1/models,
/health, /ready) and tandem.v1.Generation/Generate over gRPC (plus grpc.health.v1.Health):
validates and tokenizes each request, places it on a decode node and a prefill node (or
prefills on the decode node), and streams the detokenized output back. Prometheus metrics on
their own port (/metrics).
)";

std::string ParseAddressList(std::string_view value, std::vector<std::string>* out) {
  for (absl::string_view part :
       absl::StrSplit(absl::string_view(value.data(), value.size()), ',', absl::SkipWhitespace())) {
    out->emplace_back(part.data(), part.size());
  }
  return out->empty() ? "expects a comma-separated list of HOST:PORT" : "";
}

// Declares every flag against `o` with its --help line.
void AddRouterFlags(tandem::FlagSet& flags, RouterOptions* o, bool* verbose) {
  flags.Section("Model");
  flags.String("model", &o->model_dir,
               {"DIR",
                "Hugging Face model directory (tokenizer.json, config.json, "
                "tokenizer_config.json); weights are not read"});
  flags.String("served-model-name", &o->served_model_name,
               {"NAME", "the name requests give in `model` (default: DIR's base name)"});
  flags.Section("Serving");
  flags.String("listen", &o->listen,
               {"HOST:PORT", "gRPC address (default 127.0.0.1:0; port 0 picks a free port)"});
  flags.String("http-listen", &o->http_listen,
               {"HOST:PORT", "OpenAI-compatible HTTP address (default 127.0.0.1:0; \"\" = off)"});
  flags.Number("http-threads", &o->http_threads,
               {"N", "HTTP I/O threads (default 2; requests run on their own threads)"});
  flags.Number("max-body-bytes", &o->max_body_bytes,
               {"N", "larger HTTP request bodies get 413 (default 8388608)"});
  flags.Custom("api-key",
               {"KEY[,KEY...]",
                "HTTP /v1/* and gRPC Generate requests must send \"Authorization: Bearer KEY\" "
                "(repeatable: any listed key works)"},
               [o](std::string_view v) -> std::string {
                 for (absl::string_view key : absl::StrSplit(absl::string_view(v.data(), v.size()),
                                                             ',', absl::SkipWhitespace())) {
                   o->api_keys.emplace_back(key);
                 }
                 return "";
               });
  flags.String("api-key-file", &o->api_key_file,
               {"PATH", "more keys, one a line ('#' comments); re-read on SIGHUP"});
  flags.String("metrics-listen", &o->metrics_listen,
               {"HOST:PORT", "Prometheus /metrics address (default 127.0.0.1:0; \"\" = off)"});
  flags.Number("max-concurrent-requests", &o->max_concurrent_requests,
               {"N", "requests running at once; the next ones wait in the queue (default 4096)"});
  flags.Number("max-queued-requests", &o->max_queued_requests,
               {"N",
                "requests waiting for a slot; beyond N they are refused at once with gRPC "
                "RESOURCE_EXHAUSTED / HTTP 429 + Retry-After (default 4096)"});
  flags.Number("max-queued-prompt-tokens", &o->max_queued_prompt_tokens,
               {"N", "prompt tokens of the waiting requests, at most (default 16777216)"});
  flags.Number("queue-timeout-ms", &o->queue_timeout_ms,
               {"N",
                "a request waits at most N ms for a slot (within its deadline), then gets 429 "
                "(default 30000)"});
  flags.String("ready-file", &o->ready_file,
               {"PATH",
                "once serving, write {\"grpc\": \"127.0.0.1:PORT\", \"http\": ..., \"metrics\": "
                "..., \"pid\": N} there"});
  flags.Section("Nodes");
  flags.Custom("prefill", {"A:P,B:P", "prefill nodes (static list)"},
               [o](std::string_view v) { return ParseAddressList(v, &o->pool.prefill.addresses); });
  flags.Custom("decode", {"C:P,...", "decode nodes (static list)"},
               [o](std::string_view v) { return ParseAddressList(v, &o->pool.decode.addresses); });
  flags.String("prefill-dns", &o->pool.prefill.dns_name,
               {"NAME:PORT", "prefill nodes: every address of NAME (a headless service)"});
  flags.String("decode-dns", &o->pool.decode.dns_name,
               {"NAME:PORT", "decode nodes: every address of NAME"});
  flags.Number("dns-refresh-ms", &o->pool.dns_refresh_ms,
               {"N", "re-resolve the DNS names this often (default 5000)"});
  flags.Number("health-interval-ms", &o->pool.health_interval_ms,
               {"N", "health check + GetLoad of every node this often (default 500)"});
  flags.Number("first-check-timeout-ms", &o->pool.first_check_timeout_ms,
               {"N",
                "the first health round, before the router serves, waits this long for the nodes "
                "to answer (at least --health-interval-ms; default 10000)"});
  flags.Number("node-down-after-ms", &o->pool.node_down_after_ms,
               {"N",
                "a node whose health checks only time out (busy, not refusing) stays up until "
                "they have failed this long with no progress on its streams (default 10000)"});
  flags.Section("Placement");
  flags.Custom("mode",
               {"disaggregated|colocated|auto",
                "disaggregated (default): decode node reserves, prefill node prefills; "
                "colocated: the decode node does both (no prefill nodes); auto: every decode "
                "node also prefills for the others (tandem-decode --serve-prefill, no prefill "
                "nodes), and each request is prefilled on another node or on its decode node "
                "by the policy's choice"},
               [o](std::string_view v) -> std::string {
                 auto mode = tandem::ParseServingMode(v);
                 if (!mode.has_value()) return "expects disaggregated, colocated or auto";
                 o->placement.mode = *mode;
                 return "";
               });
  flags.Custom("policy",
               {"round_robin|least_loaded|prefix_aware|cost",
                "how nodes are picked (default cost: the option, disaggregated or local "
                "prefill, on the node pair with the best predicted TTFT and TPOT against "
                "--slo-ttft-ms and --slo-tpot-ms; prefix_aware: the prefill node with the longest "
                "cached prefix of the prompt, ties by load)"},
               [o](std::string_view v) -> std::string {
                 auto policy = tandem::ParsePlacementPolicy(v);
                 if (!policy.has_value())
                   return "expects round_robin, least_loaded, prefix_aware or cost";
                 o->placement.policy = *policy;
                 return "";
               });
  flags.Number("local-prefill-threshold", &o->placement.local_prefill_threshold,
               {"N",
                "prefill on the decode node when the prompt's part that the chosen prefill node "
                "has not cached is shorter than N tokens (default 0: never)"});
  flags.Number("slo-ttft-ms", &o->placement.slo_ttft_ms,
               {"MS",
                "--policy cost: the time-to-first-token target placement predicts against "
                "(default 2000)"});
  flags.Number("slo-tpot-ms", &o->placement.slo_tpot_ms,
               {"MS",
                "--policy cost: the time-per-output-token target placement predicts against "
                "(default 100)"});
  flags.Number("kv-link-gbps", &o->placement.kv_link_gbps,
               {"G",
                "--policy cost: the KV link's rate between a prefill and a decode node, Gb/s; the "
                "KV the decode node lacks (the prefill node's reported bytes per token) crosses "
                "it, and the predicted TTFT counts what outlasts the prefill (default 0: left "
                "out)"});
  flags.Number("disaggregation-hop-us", &o->placement.disaggregation_hop_us,
               {"US",
                "--policy cost: what the handoff's extra hops (decode node → router → prefill "
                "node) add to a disaggregated TTFT, microseconds (default 0)"});
  flags.Section("Requests");
  flags.Number("max-retries", &o->max_retries,
               {"N",
                "retries of a request that failed before its first token was sent, each on "
                "another node pair (default 2)"});
  flags.Switch("no-live-kv-migration", &o->live_kv_migration,
               "do not move a stream with its KV when its decode node pauses it (drain): resume it "
               "there instead (README: Live KV migration)",
               false);
  flags.Number("kv-move-timeout-ms", &o->kv_move_timeout_ms,
               {"MS",
                "a live KV move of one stream (pause to the destination's first token) that takes "
                "longer is given up and the stream resumes on its node (default 5000)"});
  flags.Number("kv-rebalance-interval-ms", &o->kv_rebalance_interval_ms,
               {"MS",
                "how often to look for a decode node out of KV blocks while another has room and "
                "move one stream off it with its KV, instead of letting it preempt (default 500; "
                "0: never)"});
  flags.Number("migration-limit", &o->migration_limit,
               {"N",
                "moves of a request to another decode node when its decode side fails after "
                "tokens reached the client: prompt + the tokens so far are recomputed there and "
                "the stream goes on (default 3; 0: fail the stream)"});
  flags.Number("lease-ms", &o->lease_ms,
               {"N", "lease on the decode node's reserved KV blocks (default 30000)"});
  flags.Number("request-timeout-ms", &o->request_timeout_ms,
               {"N", "a whole request, unless the client's deadline is sooner (default 600000)"});
  flags.Number("first-token-timeout-ms", &o->first_token_timeout_ms,
               {"N", "one attempt's wait for its first token (default 60000)"});
  flags.Number("kv-wait-timeout-ms", &o->kv_wait_timeout_ms,
               {"N",
                "no decode node reports room for the prompt's KV: wait up to N ms for room, then "
                "answer UNAVAILABLE / HTTP 503 (default 10000)"});
  flags.Number("max-kv-waiting-requests", &o->max_kv_waiting_requests,
               {"N",
                "at most N requests wait for KV room; the rest get UNAVAILABLE at once (default "
                "1024)"});
  flags.Number("drain-timeout-ms", &o->drain_timeout_ms,
               {"N", "on SIGINT/SIGTERM: time in-flight streams get to finish (default 30000)"});
  flags.Switch("verbose", verbose, "debug logs (one line per placement)");
  flags.Section("TLS (files re-read when they change; the HTTPS listener also on SIGHUP)");
  tandem::AddTlsServerFlags(flags, &o->tls);
  flags.Section("TLS towards the nodes");
  tandem::AddTlsClientFlags(flags, &o->pool.node_tls);
}

// Checks what single flags cannot; "" when the options are consistent.
std::string ValidateRouterOptions(const RouterOptions& o) {
  if (o.model_dir.empty()) return "--model DIR is required";
  if (o.pool.decode.addresses.empty() && o.pool.decode.dns_name.empty()) {
    return "give the decode nodes: --decode HOST:PORT,... or --decode-dns NAME:PORT";
  }
  const bool has_prefill = !o.pool.prefill.addresses.empty() || !o.pool.prefill.dns_name.empty();
  if (o.placement.mode == tandem::ServingMode::kAuto && has_prefill) {
    return "--mode auto uses the decode nodes (tandem-decode --serve-prefill) as the prefill "
           "nodes: drop --prefill/--prefill-dns";
  }
  if (o.placement.mode == tandem::ServingMode::kDisaggregated && !has_prefill) {
    return "--mode disaggregated (the default) needs --prefill HOST:PORT,... or --prefill-dns "
           "NAME:PORT; use --mode colocated (or auto, on decode nodes that --serve-prefill) to run "
           "without prefill nodes";
  }
  if (o.placement.mode == tandem::ServingMode::kColocated && has_prefill) {
    return "--mode colocated uses no prefill nodes: drop --prefill/--prefill-dns";
  }
  if (o.pool.dns_refresh_ms < 1) return "--dns-refresh-ms must be >= 1";
  if (o.pool.health_interval_ms < 1) return "--health-interval-ms must be >= 1";
  if (o.pool.first_check_timeout_ms < 1) return "--first-check-timeout-ms must be >= 1";
  if (o.pool.node_down_after_ms < 0) return "--node-down-after-ms must be >= 0";
  if (o.placement.local_prefill_threshold < 0) return "--local-prefill-threshold must be >= 0";
  if (!(o.placement.slo_ttft_ms > 0)) return "--slo-ttft-ms must be > 0";
  if (!(o.placement.slo_tpot_ms > 0)) return "--slo-tpot-ms must be > 0";
  if (o.placement.kv_link_gbps < 0) return "--kv-link-gbps must be >= 0";
  if (o.placement.disaggregation_hop_us < 0) return "--disaggregation-hop-us must be >= 0";
  if (o.max_retries < 0) return "--max-retries must be >= 0";
  if (o.migration_limit < 0) return "--migration-limit must be >= 0";
  if (o.kv_move_timeout_ms < 1) return "--kv-move-timeout-ms must be >= 1";
  if (o.kv_rebalance_interval_ms < 0) return "--kv-rebalance-interval-ms must be >= 0";
  if (o.lease_ms < 1) return "--lease-ms must be >= 1";
  if (o.request_timeout_ms < 1) return "--request-timeout-ms must be >= 1";
  if (o.first_token_timeout_ms < 1) return "--first-token-timeout-ms must be >= 1";
  if (o.kv_wait_timeout_ms < 0) return "--kv-wait-timeout-ms must be >= 0";
  if (o.max_kv_waiting_requests < 0) return "--max-kv-waiting-requests must be >= 0";
  if (o.drain_timeout_ms < 0) return "--drain-timeout-ms must be >= 0";
  if (o.http_threads < 1) return "--http-threads must be >= 1";
  if (o.max_body_bytes < 1024) return "--max-body-bytes must be >= 1024";
  if (o.max_concurrent_requests < 1) return "--max-concurrent-requests must be >= 1";
  if (o.max_queued_requests < 0) return "--max-queued-requests must be >= 0";
  if (o.max_queued_prompt_tokens < 0) return "--max-queued-prompt-tokens must be >= 0";
  if (o.queue_timeout_ms < 0) return "--queue-timeout-ms must be >= 0";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  tandem::TurnOffMutexDeadlockDetection();
  spdlog::set_default_logger(spdlog::stderr_color_mt("tandem-router"));
  RouterOptions options;
  bool help = false;
  bool verbose = false;
  tandem::FlagSet flags;
  AddRouterFlags(flags, &options, &verbose);
  std::string error = flags.Parse(argc, argv, &help);
  if (help) {
    std::fputs(flags.Help(kIntro).c_str(), stdout);
    return 0;
  }
  if (error.empty()) error = ValidateRouterOptions(options);
  if (!error.empty()) {
    std::fprintf(stderr, "tandem-router: %s\n", error.c_str());
    return 2;
  }
  if (verbose) spdlog::set_level(spdlog::level::debug);
  // Replicas choose differently among near-equal nodes (placement.h), so they do not herd.
  if (options.placement.seed == 0) options.placement.seed = tandem::ProcessRouterId();
  spdlog::info("router id {:016x} (tags its placements: router/in_flight.h)",
               tandem::ProcessRouterId());

  // Every thread started from here on inherits the blocked signals; this thread takes them with
  // sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto router = tandem::RouterServer::Start(options);
  if (!router.ok()) {
    std::fprintf(stderr, "tandem-router: %s\n", std::string(router.status().message()).c_str());
    return 1;
  }
  int signal_number = 0;
  while (sigwait(&signals, &signal_number) == 0 && signal_number == SIGHUP) {
    if (absl::Status reloaded = (*router)->Reload(); !reloaded.ok()) {
      spdlog::error("SIGHUP: reload failed, keeping the old settings: {}",
                    std::string(reloaded.message()));
    }
  }
  spdlog::info("signal {}: draining (up to {} ms)", signal_number, options.drain_timeout_ms);
  (*router)->Shutdown(absl::Milliseconds(options.drain_timeout_ms));
  for (const auto& [name, value] : (*router)->counters().Values()) {
    if (value != 0) spdlog::info("{} {}", name, value);
  }
  return 0;
}
