// tandem-decode: owns a paged KV pool registered with UCX, reserves blocks for prompts that prefill
// nodes compute, decodes with continuous batching and streams tokens (tandem.v1.DecodeNode).
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/metrics/metrics_server.h"
#include "common/serving/grpc_server.h"
#include "common/serving/node_engine.h"
#include "common/serving/node_kv_transport.h"
#include "common/util/cli_flags.h"
#include "common/util/mutex_checks.h"
#include "common/util/ready_file.h"
#include "decode_node/decode_drain.h"
#include "decode_node/decode_metrics.h"
#include "decode_node/decode_service.h"
#include "prefill_node/prefill_metrics.h"
#include "prefill_node/prefill_service.h"
#include "spdlog/spdlog.h"

namespace {

constexpr char kIntro[] = R"(Usage: tandem-decode --model DIR [options]

A decode node: reserves KV blocks for prompts that prefill nodes compute (they write the KV over
UCX; UCX_TLS picks the transport: tcp, posix/sysv shared memory, ...), decodes with continuous
batching, and can also prefill locally (colocated mode, short prompts). With --serve-prefill it
also serves tandem.v1.PrefillNode on the same port, engine and KV pool: it prefills prompts for
other nodes and writes their KV into the blocks those reserved (tandem-router --mode auto).
)";

struct DecodeMainOptions {
  tandem::NodeEngineOptions node;
  tandem::NodeKvTransportOptions kv;
  tandem::NodeServerOptions server = {.listen = "0.0.0.0:50061", .metrics_listen = "0.0.0.0:9401"};
  int64_t lease_ms = 30000;
  int64_t max_lease_ms = 60000;
  int64_t reserve_wait_timeout_ms = 10000;
  int64_t max_waiting_reservations = 1024;
  bool kv_checksums = true;
  bool drain_live_migration = true;
  bool serve_prefill = false;
};

}  // namespace

int main(int argc, char** argv) {
  tandem::TurnOffMutexDeadlockDetection();
  tandem::BlockTerminationSignals();
  DecodeMainOptions o;
  tandem::FlagSet flags;
  tandem::AddNodeEngineFlags(flags, &o.node);
  o.kv.owner = true;   // before the flags: a prefill node also dials (--node-tls-*)
  o.kv.writer = true;  // --serve-prefill: this node dials too (--node-tls-*)
  tandem::AddNodeKvTransportFlags(flags, &o.kv);
  tandem::AddNodeServerFlags(flags, &o.server);
  flags.Section("Reservations");
  flags.Number("lease-ms", &o.lease_ms, {"N", "default lease on reserved blocks (default 30000)"});
  flags.Number(
      "max-lease-ms", &o.max_lease_ms,
      {"N", "longest lease a caller may ask for; longer ones are refused (default 60000)"});
  flags.Number("reserve-wait-timeout-ms", &o.reserve_wait_timeout_ms,
               {"N",
                "a reservation waiting longer than N ms for free KV blocks is refused with "
                "RESOURCE_EXHAUSTED (default 10000)"});
  flags.Number(
      "max-waiting-reservations", &o.max_waiting_reservations,
      {"N", "reservations waiting for blocks beyond N are refused at once (default 1024)"});
  flags.Switch("no-kv-checksums", &o.kv_checksums,
               "admit imported KV without checking the prefill node's keyed block checksums "
               "(epochs are still checked); see README, KV integrity",
               false);
  flags.Section("Prefill for other nodes");
  flags.Switch("serve-prefill", &o.serve_prefill,
               "also serve tandem.v1.PrefillNode on --listen, on this node's engine and KV pool: "
               "prefill prompts for other decode nodes and write their KV into the blocks those "
               "reserved (tandem-router --mode auto, where every node can do both); needs "
               "--cluster-secret-file (or --insecure-no-handoff-auth)");
  flags.Section("Drain");
  flags.Switch("no-drain-live-migration", &o.drain_live_migration,
               "on SIGINT/SIGTERM, leave running requests decoding until --drain-timeout-ms (then "
               "they end ABORTED and the router recomputes them elsewhere) instead of pausing "
               "them at once so that the router moves each, with its KV, to another decode node "
               "(live KV migration; README: Live KV migration)",
               false);
  bool help = false;
  std::string error = flags.Parse(argc, argv, &help);
  if (help) {
    std::fputs(flags.Help(kIntro).c_str(), stdout);
    return 0;
  }
  if (error.empty() && (o.lease_ms < 1 || o.max_lease_ms < o.lease_ms)) {
    error = "--lease-ms must be >= 1 and <= --max-lease-ms";
  }
  if (error.empty() && o.server.drain_timeout_ms < 0) error = "--drain-timeout-ms must be >= 0";
  if (error.empty() && o.reserve_wait_timeout_ms < 0) {
    error = "--reserve-wait-timeout-ms must be >= 0";
  }
  if (error.empty() && o.max_waiting_reservations < 0) {
    error = "--max-waiting-reservations must be >= 0";
  }
  if (!error.empty()) {
    std::fprintf(stderr, "tandem-decode: %s\n", error.c_str());
    return 2;
  }

  o.kv.name = "tandem-decode";
  o.kv.listen = o.server.listen;
  auto handoff_auth = tandem::LoadHandoffAuth(o.kv, /*required=*/o.serve_prefill);
  if (!handoff_auth.ok()) {
    std::fprintf(stderr, "tandem-decode: %s%s\n",
                 o.serve_prefill ? "--serve-prefill (prefill for other nodes): " : "",
                 std::string(handoff_auth.status().message()).c_str());
    return 2;
  }
  o.kv.owner = true;
  o.kv.writer = o.serve_prefill;
  auto transport = tandem::CreateNodeKvTransport(o.node, o.kv);
  if (!transport.ok()) {
    std::fprintf(stderr, "tandem-decode: %s\n", transport.status().ToString().c_str());
    return 1;
  }
  tandem::KvTransport* kv_transport = transport->get();
  auto metrics = std::make_shared<tandem::DecodeMetrics>();
  o.node.on_step = [metrics](const tandem::EngineStepStats& step) {
    metrics->engine_metrics().ObserveStep(step);
  };
  auto node = tandem::NodeEngine::Create(o.node, tandem::TransportPoolHooks(kv_transport));
  if (!node.ok()) {
    std::fprintf(stderr, "tandem-decode: %s\n", node.status().ToString().c_str());
    return 1;
  }
  metrics->SetEngine((*node)->engine());
  // --serve-prefill: the PrefillNode service on the same engine and transport. Its metrics are
  // tandem_prefill_*, without the engine's (tandem_decode_* has them once).
  std::shared_ptr<tandem::PrefillMetrics> prefill_metrics;
  std::unique_ptr<tandem::HandoffGate> handoff_gate;
  std::unique_ptr<tandem::PrefillService> prefill_service;
  if (o.serve_prefill) {
    prefill_metrics = std::make_shared<tandem::PrefillMetrics>(/*engine_metrics=*/false);
    prefill_metrics->SetEngine((*node)->engine());
    handoff_gate = std::make_unique<tandem::HandoffGate>(*handoff_auth);
    prefill_metrics->SetHandoffGate(handoff_gate.get());
    prefill_service = std::make_unique<tandem::PrefillService>(
        (*node)->engine(), kv_transport,
        tandem::PrefillServiceOptions{.model_name = (*node)->model_name(),
                                      .metrics = prefill_metrics.get(),
                                      .handoff_gate = handoff_gate.get(),
                                      .handoff_auth = *handoff_auth});
  }
  tandem::DecodeService service(
      (*node)->engine(), kv_transport,
      {.model_name = (*node)->model_name(),
       .default_lease = absl::Milliseconds(o.lease_ms),
       .max_lease = absl::Milliseconds(o.max_lease_ms),
       .reserve_wait_timeout = absl::Milliseconds(o.reserve_wait_timeout_ms),
       .max_waiting_reservations = o.max_waiting_reservations,
       .handoff_auth = *handoff_auth,
       .accept_reservations = *handoff_auth != nullptr || o.kv.insecure_no_handoff_auth,
       .metrics = metrics.get(),
       .kv_checksums = o.kv_checksums,
       .accept_kv_connection = tandem::NcclAcceptor(kv_transport),
       // A router reaches a node of both roles as a decode node: its Cancel ends a Prefill call
       // of the id here too.
       .cancel_prefill = prefill_service == nullptr
                             ? std::function<bool(const std::string&)>()
                             : [prefill = prefill_service.get()](const std::string& id) {
                                 return prefill->CancelByRouterId(id);
                               }});
  if (*handoff_auth == nullptr && !o.kv.insecure_no_handoff_auth) {
    spdlog::warn(
        "tandem-decode: no --cluster-secret-file: Reserve is refused, this node serves colocated "
        "(Generate) requests only");
  }
  std::vector<grpc::Service*> services = {&service};
  if (prefill_service != nullptr) services.push_back(prefill_service.get());
  auto server = tandem::StartGrpcServer(o.server.listen, services, o.kv.tls);
  if (!server.ok()) {
    std::fprintf(stderr, "tandem-decode: %s\n", server.status().ToString().c_str());
    return 1;
  }
  spdlog::info("tandem-decode: serving {} on {} ({} KV blocks of {} tokens){}",
               (*node)->model_name(), server->address, (*node)->engine()->kv_layout().num_blocks,
               (*node)->engine()->kv_layout().block_size,
               o.serve_prefill ? "; prefills for other nodes too" : "");
  // Declared after the engine: destroyed first, so no scrape reads a stopped engine.
  std::unique_ptr<tandem::MetricsServer> metrics_server;
  if (!o.server.metrics_listen.empty()) {
    auto started = tandem::MetricsServer::Start(o.server.metrics_listen);
    if (!started.ok()) {
      std::fprintf(stderr, "tandem-decode: %s\n", started.status().ToString().c_str());
      return 1;
    }
    metrics_server = *std::move(started);
    metrics_server->Register(metrics);
    if (prefill_metrics != nullptr) metrics_server->Register(prefill_metrics);
    spdlog::info("tandem-decode: metrics on http://{}/metrics", metrics_server->address());
  }
  if (!o.server.ready_file.empty()) {
    const tandem::ReadyEndpoints endpoints = {
        .grpc = server->address, .metrics = metrics_server ? metrics_server->address() : ""};
    if (absl::Status s = tandem::WriteReadyFile(o.server.ready_file, endpoints); !s.ok()) {
      std::fprintf(stderr, "tandem-decode: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  const int sig = tandem::WaitForTerminationSignal();
  spdlog::info("tandem-decode: signal {}, draining (up to {} ms)", sig, o.server.drain_timeout_ms);
  // The routers' KV event streams of the prefill service end now (the decode service's end in
  // the drain): they would hold the shutdown until the drain deadline.
  if (prefill_service != nullptr) prefill_service->StopKvEvents();
  // Live KV migration first (decode_drain.h): every request pauses and the router moves each,
  // with its KV, to another decode node (or resumes it here when no node has room). Streams still
  // running at the drain timeout end ABORTED: the router migrates each one to another decode node
  // (recomputing its KV there), so a drain cuts no client's stream.
  tandem::DrainDecodeNode(
      *server->server, service, *(*node)->engine(),
      {.drain = absl::Milliseconds(o.server.drain_timeout_ms),
       .live_migration = o.drain_live_migration},
      [&] {
        spdlog::info(
            "tandem-decode: drain timeout; ending the streams left (the router migrates them)");
        (*node)->engine()->Stop(
            absl::AbortedError("the decode node is shutting down (--drain-timeout-ms passed)"));
      });
  (*node)->engine()->Stop();
  server->server->Wait();
  spdlog::info("tandem-decode: drained");
  return 0;
}
