#include "common/metrics/metrics_server.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <exception>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace tandem {
namespace {

// Opens and at once closes a TCP connection to `host`:`port` without waiting for it.
void Poke(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return;
  if (found != nullptr) {
    const int fd = socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
      (void)connect(fd, found->ai_addr, found->ai_addrlen);
      close(fd);
    }
  }
  freeaddrinfo(found);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == listen.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-listen expects HOST:PORT, got '", listen, "'"));
  }
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  try {
    // Two threads: Prometheus scrapes rarely; a second one keeps a slow scraper from blocking.
    server->exposer_ = std::make_unique<prometheus::Exposer>(listen, /*num_threads=*/2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", listen, ": ", e.what()));
  }
  const std::vector<int> ports = server->exposer_->GetListeningPorts();
  if (ports.empty()) return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
  server->port_ = ports.front();
  std::string host = listen.substr(0, colon);
  if (host == "0.0.0.0" || host == "[::]" || host == "::" || host == "localhost") {
    host = "127.0.0.1";
  }
  server->address_ = absl::StrCat(host, ":", server->port_);
  return server;
}

MetricsServer::~MetricsServer() {
  if (exposer_ == nullptr) return;
  // civetweb's listener thread waits for connections in a poll with a 2-second timeout and sees
  // its stop flag only when the poll returns, so closing the exposer took up to 2 s in every
  // process (and every test) that ends. Connections to our own port end each poll at once.
  std::atomic<bool> closed = false;
  std::string host(
      absl::StripSuffix(absl::StripPrefix(address_.substr(0, address_.rfind(':')), "["), "]"));
  std::thread poker([&] {
    while (!closed.load()) {
      Poke(host, port_);
      absl::SleepFor(absl::Milliseconds(5));
    }
  });
  exposer_.reset();
  closed = true;
  poker.join();
}

void MetricsServer::Register(const std::weak_ptr<prometheus::Collectable>& collectable) {
  exposer_->RegisterCollectable(collectable);
}

}  // namespace tandem
