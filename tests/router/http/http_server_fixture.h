// The fixture of the HTTP API's end-to-end tests: HttpServer on 127.0.0.1:0 over a RequestRunner
// whose node pool points at the fake prefill and decode nodes of tests/router, and a small
// blocking Beast client.
#ifndef TANDEM_TESTS_ROUTER_HTTP_HTTP_SERVER_FIXTURE_H_
#define TANDEM_TESTS_ROUTER_HTTP_HTTP_SERVER_FIXTURE_H_

#include <sys/socket.h>
#include <sys/time.h>

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "boost/asio/connect.hpp"
#include "boost/asio/ip/tcp.hpp"
#include "boost/beast/core.hpp"
#include "boost/beast/http.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "router/http/http_server.h"
#include "router/node_pool.h"
#include "router/request_runner.h"
#include "router/router_counters.h"
#include "router/router_metrics.h"
#include "router/served_model.h"
#include "tests/router/fake_nodes.h"
#include "tests/router/router_test_util.h"

namespace tandem::testing {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

using Response = http::response<http::string_body>;

inline std::string Header(const Response& r, http::field f) { return std::string(r[f]); }

// The `data:` payloads of an SSE body, in order; fails on anything that is not one.
inline std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) {
      ADD_FAILURE() << "unterminated SSE event: " << body.substr(pos);
      break;
    }
    const std::string event = body.substr(pos, end - pos);
    if (event.rfind("data: ", 0) != 0) {
      ADD_FAILURE() << "not a data event: " << event;
    } else {
      out.push_back(event.substr(6));
    }
    pos = end + 2;
  }
  return out;
}

// A blocking HTTP/1.1 client on one connection. Reads time out after 20 s so a broken server
// fails the test instead of hanging it.
class Client {
 public:
  explicit Client(int port) : socket_(ioc_) {
    socket_.connect(net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
    timeval tv{.tv_sec = 20, .tv_usec = 0};
    setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  }

  void Send(http::verb verb, const std::string& target, const std::string& body = "",
            const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1");
    for (const auto& [k, v] : headers) req.set(k, v);
    if (verb == http::verb::post) {
      req.set(http::field::content_type, "application/json");
      req.body() = body;
      req.prepare_payload();
    }
    http::write(socket_, req);
  }

  Response Read() {
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    beast::error_code ec;
    http::read(socket_, buffer_, parser, ec);
    EXPECT_FALSE(ec) << ec.message();
    return parser.release();
  }

  Response Call(http::verb verb, const std::string& target, const std::string& body = "",
                const std::vector<std::pair<std::string, std::string>>& headers = {}) {
    Send(verb, target, body, headers);
    return Read();
  }
  Response Post(const std::string& target, const std::string& body) {
    return Call(http::verb::post, target, body);
  }

  // Reads a streamed response's header and body until `events` whole SSE events arrived.
  std::string ReadEvents(int events) {
    parser_.emplace();
    http::read_header(socket_, buffer_, *parser_);
    auto count = [&] {
      int n = 0;
      for (size_t p = parser_->get().body().find("\n\n"); p != std::string::npos;
           p = parser_->get().body().find("\n\n", p + 2)) {
        ++n;
      }
      return n;
    };
    while (count() < events) http::read_some(socket_, buffer_, *parser_);
    return parser_->get().body();
  }

  // After ReadEvents: reads the stream to its end and returns its whole body.
  std::string FinishStream() {
    beast::error_code ec;
    http::read(socket_, buffer_, *parser_, ec);
    EXPECT_FALSE(ec) << ec.message();
    return parser_->get().body();
  }

  void WriteRaw(const std::string& bytes) { net::write(socket_, net::buffer(bytes)); }
  // True when the server closed the connection (EOF) before sending anything more.
  bool ServerClosed() {
    char c;
    beast::error_code ec;
    socket_.read_some(net::buffer(&c, 1), ec);
    return ec == net::error::eof || ec == net::error::connection_reset;
  }
  void Close() {
    beast::error_code ec;
    socket_.shutdown(net::ip::tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

 private:
  net::io_context ioc_;
  net::ip::tcp::socket socket_;
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::string_body>> parser_;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void TearDown() override { StopServer(); }

  // A runner over the fake nodes (or over none) and an HTTP server in front of it.
  void StartServer(HttpServerOptions http = {}, bool with_nodes = true,
                   const std::function<void(RouterOptions&)>& tweak = nullptr) {
    RouterOptions options = with_nodes ? testing::TestRouterOptions({p_.address()}, {d_.address()})
                                       : testing::TestRouterOptions({}, {});
    if (tweak) tweak(options);
    // Health checks have as long as their interval to answer: a loaded test machine must not
    // see the fake nodes go down.
    options.pool.health_interval_ms = 1000;
    pool_ = std::make_unique<NodePool>(options.pool);
    ASSERT_TRUE(pool_->Start().ok());
    if (with_nodes) {
      ASSERT_TRUE(FakeDecodeNode::WaitUntil([&] {
        return !pool_->UpNodes(NodeRole::kDecode).empty() &&
               !pool_->UpNodes(NodeRole::kPrefill).empty();
      }));
    }
    metrics_ = std::make_unique<RouterMetrics>(&counters_, pool_.get());
    runner_ = std::make_unique<RequestRunner>(TestServedModel(), pool_.get(), options, &counters_,
                                              metrics_.get());
    if (http.listen.empty()) http.listen = "127.0.0.1:0";
    NodePool* pool = pool_.get();
    auto ready = [pool]() -> absl::Status {
      if (pool->UpNodes(NodeRole::kDecode).empty()) {
        return absl::UnavailableError("no decode node is up");
      }
      if (pool->UpNodes(NodeRole::kPrefill).empty()) {
        return absl::UnavailableError("no prefill node is up");
      }
      return absl::OkStatus();
    };
    auto server = HttpServer::Start(http, runner_.get(), ready);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  void StopServer() {
    if (server_ != nullptr) server_->Shutdown(absl::Seconds(5));
    server_.reset();
    runner_.reset();
    metrics_.reset();
    if (pool_ != nullptr) pool_->Stop();
    pool_.reset();
  }

  static std::vector<int32_t> Encode(const std::string& text, bool special = false) {
    return TestServedModel()->tokenizer->Encode(text, special);
  }
  static DecodeScript Script(const std::string& text) {
    DecodeScript s;
    s.tokens = Encode(text);
    return s;
  }
  Client Connect() { return Client(server_->port()); }

  static json Json(const Response& r) {
    json j = json::parse(r.body(), nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.body();
    return j;
  }
  // The response is an OpenAI error with this status naming `param` ("" for none).
  static void ExpectError(const Response& r, int status, const std::string& param,
                          const std::string& message = "") {
    EXPECT_EQ(r.result_int(), static_cast<unsigned>(status)) << r.body();
    EXPECT_EQ(Header(r, http::field::content_type), "application/json");
    const json j = Json(r);
    ASSERT_TRUE(j.contains("error")) << r.body();
    EXPECT_TRUE(j["error"]["message"].is_string());
    EXPECT_TRUE(j["error"]["type"].is_string());
    ASSERT_TRUE(j["error"].contains("param"));
    ASSERT_TRUE(j["error"].contains("code"));
    if (param.empty()) {
      EXPECT_TRUE(j["error"]["param"].is_null()) << r.body();
    } else {
      EXPECT_EQ(j["error"]["param"], param) << r.body();
    }
    EXPECT_THAT(j["error"]["message"].get<std::string>(), HasSubstr(message));
  }

  // Nodes first: they outlive the runner and the server.
  FakePrefillNode p_;
  FakeDecodeNode d_;
  RouterCounters counters_;
  std::unique_ptr<NodePool> pool_;
  std::unique_ptr<RouterMetrics> metrics_;
  std::unique_ptr<RequestRunner> runner_;
  std::unique_ptr<HttpServer> server_;
};

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_ROUTER_HTTP_HTTP_SERVER_FIXTURE_H_
