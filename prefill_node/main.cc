// tandem-prefill: batched, chunked prefill with a prefix cache; writes each prompt's KV into the
// blocks a decode node reserved, over UCX, while the next chunk computes (tandem.v1.PrefillNode).
#include <cstdio>
#include <memory>
#include <string>

#include "common/metrics/metrics_server.h"
#include "common/serving/grpc_server.h"
#include "common/serving/node_engine.h"
#include "common/serving/node_kv_transport.h"
#include "common/util/cli_flags.h"
#include "common/util/mutex_checks.h"
#include "common/util/ready_file.h"
#include "prefill_node/prefill_metrics.h"
#include "prefill_node/prefill_service.h"
#include "spdlog/spdlog.h"

namespace {

constexpr char kIntro[] = R"(Usage: tandem-prefill --model DIR [options]

A prefill node: computes prompts in chunks (batched, with a prefix cache), writes their KV straight
into the blocks a decode node reserved (UCX RMA; UCX_TLS picks the transport), samples the first
token and hands the request to the decode node.
)";

struct PrefillMainOptions {
  tandem::NodeEngineOptions node;
  tandem::NodeKvTransportOptions kv;
  tandem::NodeServerOptions server = {.listen = "0.0.0.0:50071", .metrics_listen = "0.0.0.0:9402"};
};

}  // namespace

int main(int argc, char** argv) {
  tandem::TurnOffMutexDeadlockDetection();
  tandem::BlockTerminationSignals();
  PrefillMainOptions o;
  tandem::FlagSet flags;
  tandem::AddNodeEngineFlags(flags, &o.node);
  o.kv.owner = false;  // before the flags: a prefill node also dials (--node-tls-*)
  tandem::AddNodeKvTransportFlags(flags, &o.kv);
  tandem::AddNodeServerFlags(flags, &o.server);
  bool help = false;
  std::string error = flags.Parse(argc, argv, &help);
  if (help) {
    std::fputs(flags.Help(kIntro).c_str(), stdout);
    return 0;
  }
  if (error.empty() && o.server.drain_timeout_ms < 0) error = "--drain-timeout-ms must be >= 0";
  if (!error.empty()) {
    std::fprintf(stderr, "tandem-prefill: %s\n", error.c_str());
    return 2;
  }

  o.kv.name = "tandem-prefill";
  o.kv.listen = o.server.listen;
  auto handoff_auth = tandem::LoadHandoffAuth(o.kv, /*required=*/true);
  if (!handoff_auth.ok()) {
    std::fprintf(stderr, "tandem-prefill: %s\n",
                 std::string(handoff_auth.status().message()).c_str());
    return 2;
  }
  o.kv.owner = false;
  auto transport = tandem::CreateNodeKvTransport(o.node, o.kv);
  if (!transport.ok()) {
    std::fprintf(stderr, "tandem-prefill: %s\n", transport.status().ToString().c_str());
    return 1;
  }
  tandem::KvTransport* kv_transport = transport->get();
  auto metrics = std::make_shared<tandem::PrefillMetrics>();
  o.node.on_step = [metrics](const tandem::EngineStepStats& step) {
    metrics->engine_metrics().ObserveStep(step);
  };
  auto node = tandem::NodeEngine::Create(o.node, tandem::TransportPoolHooks(kv_transport));
  if (!node.ok()) {
    std::fprintf(stderr, "tandem-prefill: %s\n", node.status().ToString().c_str());
    return 1;
  }
  metrics->SetEngine((*node)->engine());
  tandem::HandoffGate handoff_gate(*handoff_auth);
  metrics->SetHandoffGate(&handoff_gate);
  tandem::PrefillService service((*node)->engine(), kv_transport,
                                 {.model_name = (*node)->model_name(),
                                  .metrics = metrics.get(),
                                  .handoff_gate = &handoff_gate,
                                  .handoff_auth = *handoff_auth});
  auto server = tandem::StartGrpcServer(o.server.listen, {&service}, o.kv.tls);
  if (!server.ok()) {
    std::fprintf(stderr, "tandem-prefill: %s\n", server.status().ToString().c_str());
    return 1;
  }
  spdlog::info("tandem-prefill: serving {} on {} ({} KV blocks of {} tokens)",
               (*node)->model_name(), server->address, (*node)->engine()->kv_layout().num_blocks,
               (*node)->engine()->kv_layout().block_size);
  // Declared after the engine: destroyed first, so no scrape reads a stopped engine.
  std::unique_ptr<tandem::MetricsServer> metrics_server;
  if (!o.server.metrics_listen.empty()) {
    auto started = tandem::MetricsServer::Start(o.server.metrics_listen);
    if (!started.ok()) {
      std::fprintf(stderr, "tandem-prefill: %s\n", started.status().ToString().c_str());
      return 1;
    }
    metrics_server = *std::move(started);
    metrics_server->Register(metrics);
    spdlog::info("tandem-prefill: metrics on http://{}/metrics", metrics_server->address());
  }
  if (!o.server.ready_file.empty()) {
    const tandem::ReadyEndpoints endpoints = {
        .grpc = server->address, .metrics = metrics_server ? metrics_server->address() : ""};
    if (absl::Status s = tandem::WriteReadyFile(o.server.ready_file, endpoints); !s.ok()) {
      std::fprintf(stderr, "tandem-prefill: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  const int sig = tandem::WaitForTerminationSignal();
  spdlog::info("tandem-prefill: signal {}, draining (up to {} ms)", sig, o.server.drain_timeout_ms);
  // The routers' KV event streams end now: they would hold the shutdown until the drain deadline.
  service.StopKvEvents();
  tandem::DrainGrpcServer(*server->server, absl::Milliseconds(o.server.drain_timeout_ms));
  (*node)->engine()->Stop();
  server->server->Wait();
  spdlog::info("tandem-prefill: drained");
  return 0;
}
