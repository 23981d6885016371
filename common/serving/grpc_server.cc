#include "common/serving/grpc_server.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "nlohmann/json.hpp"

namespace tandem {

absl::StatusOr<RunningServer> StartGrpcServer(const std::string& listen,
                                              const std::vector<grpc::Service*>& services,
                                              const TlsServerFiles& tls,
                                              const GrpcServerOptions& options) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen expects HOST:PORT, got '", listen, "'"));
  }
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = GrpcServerCredentials(tls);
  if (!credentials.ok()) return credentials.status();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  // Without SO_REUSEPORT gRPC binds one socket per address: with it, a port-0 listen address got
  // a second socket on another, unadvertised port (issue 14 row 3).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddListeningPort(listen, *credentials, &port);
  builder.SetMaxReceiveMessageSize(64 << 20);
  if (options.max_sync_threads > 0) {
    grpc::ResourceQuota quota("tandem-sync-threads");
    quota.SetMaxThreads(options.max_sync_threads);
    builder.SetResourceQuota(quota);
  }
  for (grpc::Service* service : services) builder.RegisterService(service);
  RunningServer running;
  running.server = builder.BuildAndStart();
  if (running.server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
  }
  std::string host = listen.substr(0, colon);
  if (host == "0.0.0.0" || host == "[::]" || host == "::") host = "127.0.0.1";
  running.address = absl::StrCat(host, ":", port);
  return running;
}

namespace {
sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}
}  // namespace

void BlockTerminationSignals() {
  sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int WaitForTerminationSignal() {
  sigset_t set = TerminationSignals();
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  return sig;
}

void DrainGrpcServer(grpc::Server& server, absl::Duration drain, absl::AnyInvocable<void()> cut) {
  // After `cut`, the calls it ended need a moment to send their status.
  constexpr absl::Duration kAfterCut = absl::Seconds(2);
  if (grpc::HealthCheckServiceInterface* health = server.GetHealthCheckService();
      health != nullptr) {
    health->SetServingStatus(false);
  }
  // Real time on purpose: a drain bounds the process's own exit (a virtual clock does not run
  // while a process shuts down).
  const absl::Time deadline = absl::Now() + drain;
  if (cut == nullptr) {
    server.Shutdown(absl::ToChronoTime(deadline));
    return;
  }
  absl::Notification stopped;
  std::thread shutdown([&] {
    server.Shutdown(absl::ToChronoTime(deadline + kAfterCut));
    stopped.Notify();
  });
  if (!stopped.WaitForNotificationWithDeadline(deadline)) cut();
  shutdown.join();
}

}  // namespace tandem
