#include "router/http/http_server.h"

#include <chrono>
#include <future>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "boost/asio/executor_work_guard.hpp"
#include "boost/asio/io_context.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/asio/steady_timer.hpp"
#include "boost/asio/strand.hpp"
#include "router/http/http_connection.h"
#include "spdlog/spdlog.h"

namespace tandem {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

// How long cancelled requests get to end (their node calls see the cancel at once).
constexpr absl::Duration kCancelledRequestsWait = absl::Seconds(10);
// After the requests are done, how long their last bytes get to reach the clients.
constexpr absl::Duration kFlushGrace = absl::Seconds(2);
// How long the io threads get to finish closing connections before they are stopped.
constexpr absl::Duration kStopGrace = absl::Seconds(1);
// Accept failed (out of file descriptors, ...): try again after this.
constexpr std::chrono::milliseconds kAcceptRetry(50);

struct HostPort {
  std::string host;
  std::string port;
};

absl::StatusOr<HostPort> SplitListen(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos || colon + 1 == listen.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP listen address \"", listen, "\" is not HOST:PORT"));
  }
  HostPort hp{listen.substr(0, colon), listen.substr(colon + 1)};
  int port = 0;
  if (!absl::SimpleAtoi(hp.port, &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP listen address \"", listen, "\" has a bad port"));
  }
  if (hp.host.size() >= 2 && hp.host.front() == '[' && hp.host.back() == ']') {
    hp.host = hp.host.substr(1, hp.host.size() - 2);
  }
  if (hp.host.empty()) hp.host = "0.0.0.0";
  return hp;
}

std::string DialHost(const std::string& host) {
  if (host == "0.0.0.0" || host == "localhost") return "127.0.0.1";
  if (host == "::") return "[::1]";
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]");
  return host;
}

}  // namespace

struct HttpServer::Impl {
  explicit Impl(const HttpServerOptions& options)
      : acceptor(net::make_strand(ioc)), work(net::make_work_guard(ioc)) {
    context.options = options;
  }

  void Accept() {
    acceptor.async_accept(
        net::make_strand(ioc), [this](boost::system::error_code ec, tcp::socket socket) {
          if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
          if (ec) {
            spdlog::warn("HTTP accept failed: {}", ec.message());
            auto timer = std::make_shared<net::steady_timer>(acceptor.get_executor(), kAcceptRetry);
            timer->async_wait([this, timer](boost::system::error_code) {
              if (acceptor.is_open()) Accept();
            });
            return;
          }
          std::make_shared<HttpConnection>(std::move(socket), &context)->Start();
          Accept();
        });
  }

  // Members that handlers use come before the io_context, which is destroyed first (with the
  // handlers, and the connections, it still holds).
  HttpServerContext context;
  net::io_context ioc;
  tcp::acceptor acceptor;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> io_threads;
  int port = 0;
  std::string address;

  absl::Mutex shutdown_mu;
  bool shut_down ABSL_GUARDED_BY(shutdown_mu) = false;
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const HttpServerOptions& options,
                                                              RequestRunner* runner,
                                                              std::function<Readiness()> ready) {
  if (runner == nullptr) return absl::InvalidArgumentError("HttpServer needs a request runner");
  if (options.io_threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP io threads must be >= 1, got ", options.io_threads));
  }
  if (options.max_body_bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP max body bytes must be >= 1, got ", options.max_body_bytes));
  }
  absl::StatusOr<HostPort> hp = SplitListen(options.listen);
  if (!hp.ok()) return hp.status();

  auto impl = std::make_unique<Impl>(options);
  if (options.tls.enabled()) {
    if (absl::Status s = CheckTlsServerFiles(options.tls); !s.ok()) return s;
    absl::StatusOr<std::shared_ptr<net::ssl::context>> tls =
        MakeHttpsContext(options.tls.cert, options.tls.key, options.tls.client_ca);
    if (!tls.ok()) return tls.status();
    absl::MutexLock lock(&impl->context.tls_mu);
    impl->context.tls = *std::move(tls);
  }
  impl->context.runner = runner;
  impl->context.ready = std::move(ready);
  impl->context.started_unix_seconds = absl::ToUnixSeconds(absl::Now());

  boost::system::error_code ec;
  tcp::resolver resolver(impl->ioc);
  auto endpoints = resolver.resolve(hp->host, hp->port, tcp::resolver::passive, ec);
  if (ec || endpoints.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("HTTP listen address \"", options.listen,
                                                   "\": ", ec ? ec.message() : "no address"));
  }
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  tcp::acceptor& acceptor = impl->acceptor;
  auto fail = [&](const char* what) {
    return absl::UnavailableError(
        absl::StrCat("HTTP ", what, " ", options.listen, ": ", ec.message()));
  };
  if (acceptor.open(endpoint.protocol(), ec); ec) return fail("open");
  if (acceptor.set_option(net::socket_base::reuse_address(true), ec); ec) return fail("setsockopt");
  if (acceptor.bind(endpoint, ec); ec) return fail("bind");
  if (acceptor.listen(net::socket_base::max_listen_connections, ec); ec) return fail("listen");
  impl->port = acceptor.local_endpoint(ec).port();
  if (ec) return fail("local address of");
  impl->address = absl::StrCat(DialHost(hp->host), ":", impl->port);

  impl->Accept();
  for (int i = 0; i < options.io_threads; ++i) {
    impl->io_threads.emplace_back([ioc = &impl->ioc] { ioc->run(); });
  }
  spdlog::info("HTTP API on {} ({}{} io threads)", impl->address,
               options.tls.enabled() ? "HTTPS, " : "", options.io_threads);
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::~HttpServer() { Shutdown(absl::ZeroDuration()); }

absl::Status HttpServer::ReloadTls() {
  const TlsServerFiles& files = impl_->context.options.tls;
  if (!files.enabled()) return absl::OkStatus();
  if (absl::Status s = CheckTlsServerFiles(files); !s.ok()) return s;
  absl::StatusOr<std::shared_ptr<net::ssl::context>> tls =
      MakeHttpsContext(files.cert, files.key, files.client_ca);
  if (!tls.ok()) return tls.status();
  absl::MutexLock lock(&impl_->context.tls_mu);
  impl_->context.tls = *std::move(tls);
  return absl::OkStatus();
}

int HttpServer::port() const { return impl_->port; }
const std::string& HttpServer::address() const { return impl_->address; }
int64_t HttpServer::requests_in_flight() const { return impl_->context.requests.running(); }

void HttpServer::Shutdown(absl::Duration drain) {
  Impl& impl = *impl_;
  absl::MutexLock lock(&impl.shutdown_mu);
  if (impl.shut_down) return;
  impl.shut_down = true;
  const absl::Time deadline = absl::Now() + drain;

  // Stop accepting; requests that still arrive on open connections get 503.
  impl.context.shutting_down = true;
  std::promise<void> closed;
  net::post(impl.acceptor.get_executor(), [&] {
    boost::system::error_code ec;
    impl.acceptor.close(ec);
    closed.set_value();
  });
  closed.get_future().wait();
  impl.context.requests.Close();

  // In-flight requests get until the deadline, then their clients count as gone.
  if (!impl.context.requests.WaitIdle(deadline)) {
    spdlog::info("HTTP: cancelling {} requests still running after the drain",
                 impl.context.requests.running());
    impl.context.requests.CancelAll();
    // A cancelled request ends once its node calls see the cancel (bounded by their deadlines).
    if (!impl.context.requests.WaitIdle(absl::Now() + kCancelledRequestsWait)) {
      spdlog::warn("HTTP: {} cancelled requests still running", impl.context.requests.running());
    }
  }

  // Let the last events of finished requests reach their clients.
  const absl::Time flush_deadline = absl::Now() + kFlushGrace;
  while (impl.context.open_responses.load() > 0 && absl::Now() < flush_deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  // Close the remaining (idle keep-alive) connections, then let the io threads run out of work.
  std::vector<std::shared_ptr<HttpConnection>> open;
  {
    absl::MutexLock lock(&impl.context.connections_mu);
    for (auto& [ptr, weak] : impl.context.connections) {
      if (auto c = weak.lock()) open.push_back(std::move(c));
    }
  }
  for (auto& c : open) c->CloseConnection();
  open.clear();
  impl.work.reset();
  const absl::Time stop_deadline = absl::Now() + kStopGrace;
  while (!impl.ioc.stopped() && absl::Now() < stop_deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  impl.ioc.stop();
  for (std::thread& t : impl.io_threads) t.join();
  impl.io_threads.clear();
}

}  // namespace tandem
