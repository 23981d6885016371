#include "router/router_server.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/util/status_macros.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "common/util/ready_file.h"
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
  pool_options.watch_kv_events =
      placement.mode == ServingMode::kDisaggregated &&
      (placement.policy == PlacementPolicy::kPrefixAware || placement.local_prefill_threshold > 0);
  if (placement.mode == ServingMode::kColocated) pool_options.prefill = NodeSource();
  router->pool_ = std::make_unique<NodePool>(std::move(pool_options), std::move(resolver));
  RETURN_IF_ERROR(router->pool_->Start());

  router->service_ = std::make_unique<GenerateService>(router->model_, router->pool_.get(), options,
                                                       &router->counters_);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &router->port_);
  builder.RegisterService(router->service_.get());
  router->server_ = builder.BuildAndStart();
  if (router->server_ == nullptr || router->port_ == 0) {
    router->pool_->Stop();
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen));
  }
  router->address_ = DialAddress(options.listen, router->port_);
  spdlog::info(
      "tandem-router serving model \"{}\" on {} ({} mode, {} placement, {} prefill / {} "
      "decode nodes known)",
      router->model_->name, router->address_, ServingModeName(placement.mode),
      PlacementPolicyName(placement.policy), router->pool_->Nodes(NodeRole::kPrefill).size(),
      router->pool_->Nodes(NodeRole::kDecode).size());
  if (!options.ready_file.empty()) {
    absl::Status written = WriteReadyFile(options.ready_file, {.grpc = router->address_});
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
    server_->Shutdown(absl::ToChronoTime(absl::Now() + drain));
    server_->Wait();
  }
  if (pool_ != nullptr) pool_->Stop();
  spdlog::info("tandem-router stopped");
}

}  // namespace tandem
