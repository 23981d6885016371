#include "router/router_server.h"

#include <chrono>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/util/ready_file.h"
#include "common/util/status_macros.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "router/kv_admission.h"
#include "spdlog/spdlog.h"

namespace tandem {
namespace {

std::string DialAddress(const std::string& listen, int port) {
  std::string host;
  int ignored = 0;
  // SplitHostPort rejects port 0, so split "HOST:1" instead: only the host is wanted here.
  const size_t colon = listen.rfind(':');
  if (!SplitHostPort(absl::StrCat(listen.substr(0, colon), ":1"), &host, &ignored).ok() ||
      host == "0.0.0.0" || host == "::" || host == "localhost") {
    host = "127.0.0.1";
  }
  if (host.find(':') != std::string::npos) host = absl::StrCat("[", host, "]");
  return absl::StrCat(host, ":", port);
}

}  // namespace

absl::StatusOr<std::unique_ptr<RouterServer>> RouterServer::Start(
    const RouterOptions& options, std::shared_ptr<DnsResolver> resolver) {
  std::unique_ptr<RouterServer> router(new RouterServer());
  ASSIGN_OR_RETURN(router->model_, LoadServedModel(options.model_dir, options.served_model_name));

  NodePoolOptions pool_options = options.pool;
  const PlacementOptions& placement = options.placement;
  const bool auto_mode = placement.mode == ServingMode::kAuto;
  const bool prefill_prefixes =
      placement.mode != ServingMode::kColocated &&
      (placement.policy == PlacementPolicy::kPrefixAware ||
       placement.policy == PlacementPolicy::kCost || placement.local_prefill_threshold > 0);
  pool_options.watch_prefill_kv_events = prefill_prefixes && !auto_mode;
  // Only the cost model weighs what a decode node holds (a local prefill there computes the rest);
  // in auto mode the decode nodes are the prefill nodes, whose prefixes placement reads.
  pool_options.watch_decode_kv_events =
      placement.policy == PlacementPolicy::kCost || (auto_mode && prefill_prefixes);
  // Colocated: no prefill nodes; auto: the decode nodes are the prefill nodes too.
  if (placement.mode == ServingMode::kColocated || auto_mode) {
    pool_options.prefill = NodeSource();
  }
  router->pool_ = std::make_unique<NodePool>(std::move(pool_options), std::move(resolver));
  RETURN_IF_ERROR(router->pool_->Start());

  router->placement_ = placement;
  absl::StatusOr<std::shared_ptr<ApiKeys>> keys =
      ApiKeys::Create(options.api_keys, options.api_key_file);
  if (!keys.ok()) {
    router->pool_->Stop();
    return keys.status();
  }
  router->api_keys_ = *std::move(keys);
  router->metrics_ = std::make_unique<RouterMetrics>(&router->counters_, router->pool_.get());
  if (!options.metrics_listen.empty()) {
    absl::StatusOr<std::unique_ptr<MetricsServer>> metrics =
        MetricsServer::Start(options.metrics_listen);
    if (!metrics.ok()) {
      router->pool_->Stop();
      return metrics.status();
    }
    router->metrics_server_ = *std::move(metrics);
    router->metrics_server_->Register(router->metrics_->registry());
    router->metrics_server_->Register(router->metrics_->decisions());
  }
  router->runner_ = std::make_unique<RequestRunner>(router->model_, router->pool_.get(), options,
                                                    &router->counters_, router->metrics_.get());
  router->service_ = std::make_unique<GenerateService>(router->runner_.get(), router->api_keys_);
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials =
      GrpcServerCredentials(options.tls);
  if (!credentials.ok()) {
    router->pool_->Stop();
    return credentials.status();
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // one socket, the advertised one
  builder.AddListeningPort(options.listen, *credentials, &router->port_);
  builder.RegisterService(router->service_.get());
  router->server_ = builder.BuildAndStart();
  if (router->server_ == nullptr || router->port_ == 0) {
    router->pool_->Stop();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen));
  }
  router->address_ = DialAddress(options.listen, router->port_);
  if (!options.http_listen.empty()) {
    HttpServerOptions http;
    http.listen = options.http_listen;
    http.io_threads = options.http_threads;
    http.max_body_bytes = options.max_body_bytes;
    http.api_keys = router->api_keys_;
    http.tls = options.tls;
    RouterServer* self = router.get();
    absl::StatusOr<std::unique_ptr<HttpServer>> started =
        HttpServer::Start(http, router->runner_.get(), [self] { return self->Ready(); });
    if (!started.ok()) {
      router->Shutdown(absl::ZeroDuration());
      return started.status();
    }
    router->http_ = *std::move(started);
  }
  spdlog::info(
      "tandem-router serving model \"{}\": gRPC {}, HTTP {}, metrics {} ({} mode, {} placement, "
      "{} prefill / {} decode nodes known)",
      router->model_->name, router->address_, router->http_address(), router->metrics_address(),
      ServingModeName(placement.mode), PlacementPolicyName(placement.policy),
      router->pool_->Nodes(NodeRole::kPrefill).size(),
      router->pool_->Nodes(NodeRole::kDecode).size());
  if (!options.ready_file.empty()) {
    absl::Status written =
        WriteReadyFile(options.ready_file, {.grpc = router->address_,
                                            .http = router->http_address(),
                                            .metrics = router->metrics_address()});
    if (!written.ok()) {
      router->Shutdown(absl::ZeroDuration());
      return written;
    }
  }
  return router;
}

RouterServer::~RouterServer() { Shutdown(absl::ZeroDuration()); }

void RouterServer::Shutdown(absl::Duration drain) {
  if (shut_down_) return;
  shut_down_ = true;
  if (server_ != nullptr) {
    if (auto* health = server_->GetHealthCheckService(); health != nullptr) {
      health->SetServingStatus(false);
    }
  }
  // Both APIs drain at once: HTTP on a thread beside the gRPC server's shutdown.
  std::thread http_drain;
  if (http_ != nullptr) http_drain = std::thread([this, drain] { http_->Shutdown(drain); });
  if (server_ != nullptr) {
    server_->Shutdown(absl::ToChronoTime(absl::Now() + drain));
    server_->Wait();
  }
  if (http_drain.joinable()) http_drain.join();
  if (pool_ != nullptr) pool_->Stop();
  spdlog::info("tandem-router stopped");
}

absl::Status RouterServer::Reload() {
  absl::Status keys = api_keys_->Reload();
  if (keys.ok()) spdlog::info("reloaded: {} API keys", api_keys_->size());
  absl::Status tls = http_ != nullptr ? http_->ReloadTls() : absl::OkStatus();
  if (tls.ok() && http_ != nullptr) spdlog::info("reloaded: the HTTPS certificate");
  return keys.ok() ? tls : keys;
}

Readiness RouterServer::Ready() const {
  const std::vector<std::shared_ptr<Node>> decode = pool_->UpNodes(NodeRole::kDecode);
  if (decode.empty()) {
    return absl::UnavailableError(
        absl::StrCat("no decode node is up (", pool_->Nodes(NodeRole::kDecode).size(), " known)"));
  }
  // A colocated router prefills on its decode nodes. A disaggregated one could fall back to
  // local prefill without prefill nodes, but that is not the cluster it was deployed as: it is
  // ready only with a prefill node up. An auto one prefills on its decode nodes.
  if (placement_.mode == ServingMode::kDisaggregated &&
      pool_->UpNodes(NodeRole::kPrefill).empty()) {
    return absl::UnavailableError(absl::StrCat("no prefill node is up (",
                                               pool_->Nodes(NodeRole::kPrefill).size(), " known)"));
  }
  // A pool with (almost) no free block cannot take a request: with all of them so, requests only
  // wait and time out here (--kv-wait-timeout-ms), so the router is not ready.
  size_t exhausted = 0;
  for (const auto& node : decode) exhausted += KvExhausted(node->snapshot().load) ? 1 : 0;
  if (exhausted == decode.size()) {
    return absl::UnavailableError(absl::StrCat("the KV cache of every decode node that is up (",
                                               exhausted, ") is exhausted"));
  }
  if (exhausted > 0) {
    return Readiness(absl::OkStatus(),
                     {absl::StrCat(exhausted, " of ", decode.size(),
                                   " decode nodes have their KV cache exhausted")});
  }
  return absl::OkStatus();
}

}  // namespace tandem
