// The HTTP client against a scripted loopback server (raw HTTP/1.1 written by the test): a
// streamed completion in the router's format, the model asked from GET /v1/models, kept-alive
// connections reused, a connection the server dropped while idle retried, error statuses and
// bodies reported, and the per-request timeout.
#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/serve/bench_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tandem::bench {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using ::testing::HasSubstr;

// What the server does with one request: the raw bytes to write back, and whether to close the
// connection afterwards.
struct Reply {
  std::string raw;
  bool close = false;
  bool hang = false;  // write nothing and keep the connection (for timeouts)
};

class ScriptedServer {
 public:
  explicit ScriptedServer(std::function<Reply(const http::request<http::string_body>&)> script)
      : script_(std::move(script)),
        acceptor_(io_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {
    address_ = absl::StrCat("127.0.0.1:", acceptor_.local_endpoint().port());
    thread_ = std::thread([this] { AcceptLoop(); });
  }
  ~ScriptedServer() {
    stopping_ = true;
    beast::error_code ec;
    // Wake the accept with a connection of our own, then close everything.
    tcp::socket poke(io_);
    poke.connect(acceptor_.local_endpoint(), ec);
    thread_.join();
    for (std::thread& t : connections_) t.join();
  }
  const std::string& address() const { return address_; }
  int connections() const { return accepted_.load(); }
  std::vector<http::request<http::string_body>> requests() const {
    absl::MutexLock lock(&mu_);
    return requests_;
  }

 private:
  void AcceptLoop() {
    while (!stopping_) {
      auto socket = std::make_shared<tcp::socket>(io_);
      beast::error_code ec;
      acceptor_.accept(*socket, ec);
      if (ec || stopping_) break;
      ++accepted_;
      connections_.emplace_back([this, socket] { Serve(*socket); });
    }
  }
  void Serve(tcp::socket& socket) {
    beast::flat_buffer buffer;
    while (!stopping_) {
      http::request<http::string_body> req;
      beast::error_code ec;
      http::read(socket, buffer, req, ec);
      if (ec) return;
      {
        absl::MutexLock lock(&mu_);
        requests_.push_back(req);
      }
      Reply reply = script_(req);
      if (reply.hang) {
        while (!stopping_) absl::SleepFor(absl::Milliseconds(5));
        return;
      }
      asio::write(socket, asio::buffer(reply.raw), ec);
      if (ec || reply.close) {
        socket.shutdown(tcp::socket::shutdown_both, ec);
        socket.close(ec);
        return;
      }
    }
  }

  std::function<Reply(const http::request<http::string_body>&)> script_;
  asio::io_context io_;
  tcp::acceptor acceptor_;
  std::string address_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
  std::vector<std::thread> connections_;  // touched by the accept thread, then the destructor
  mutable absl::Mutex mu_;
  std::vector<http::request<http::string_body>> requests_ ABSL_GUARDED_BY(mu_);
};

// A chunked text/event-stream response carrying `events` ("data: ...\n\n" each, in one chunk
// apiece, as the router writes them).
std::string SseResponse(const std::vector<std::string>& events) {
  std::string raw =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (const std::string& e : events) {
    const std::string data = absl::StrCat("data: ", e, "\n\n");
    absl::StrAppend(&raw, absl::Hex(data.size()), "\r\n", data, "\r\n");
  }
  return raw + "0\r\n\r\n";
}

std::string TokenEvent(const std::string& text, const char* finish = "null") {
  return absl::StrCat(R"({"id":"cmpl-1","object":"text_completion","created":1,"model":"served",)",
                      R"("usage":null,"choices":[{"index":0,"text":")", text,
                      R"(","logprobs":null,"finish_reason":)", finish, "}]}");
}

Reply Completion(int tokens, int prompt_tokens) {
  std::vector<std::string> events;
  for (int i = 0; i < tokens; ++i) {
    events.push_back(TokenEvent(absl::StrCat("t", i), i + 1 == tokens ? "\"length\"" : "null"));
  }
  events.push_back(absl::StrCat(R"({"object":"text_completion","choices":[],"usage":)",
                                R"({"prompt_tokens":)", prompt_tokens, R"(,"completion_tokens":)",
                                tokens, "}}"));
  events.push_back("[DONE]");
  return {SseResponse(events)};
}

Reply Models() {
  const std::string body = R"({"object":"list","data":[{"id":"served","object":"model"}]})";
  return {absl::StrCat("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ",
                       body.size(), "\r\n\r\n", body)};
}

// Serves /v1/models and completions of the asked-for length.
Reply Normal(const http::request<http::string_body>& req) {
  if (req.target() == "/v1/models") return Models();
  nlohmann::json body = nlohmann::json::parse(req.body());
  return Completion(body["max_tokens"].get<int>(), static_cast<int>(body["prompt"].size()));
}

BenchRequest Request(int prompt_len, int output_len) {
  BenchRequest r;
  for (int i = 0; i < prompt_len; ++i) r.prompt_ids.push_back(1000 + i);
  r.prompt_len = prompt_len;
  r.output_len = output_len;
  return r;
}

std::unique_ptr<BenchClient> Client(const std::string& address, const std::string& model = "",
                                    absl::Duration timeout = absl::Seconds(30)) {
  ClientOptions options;
  options.address = address;
  options.model = model;
  options.api_key = "secret";
  options.timeout = timeout;
  auto client = CreateBenchClient(options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

TEST(HttpBenchClientTest, StreamsACompletionAndAsksTheModel) {
  ScriptedServer server(Normal);
  std::unique_ptr<BenchClient> client = Client(server.address());
  ASSERT_NE(client, nullptr);
  RequestResult r = client->Send(Request(5, 4));
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_EQ(r.output_tokens, 4);
  EXPECT_EQ(r.http_status, 200);
  EXPECT_EQ(r.prompt_tokens, 5);
  EXPECT_EQ(r.itl_s.size(), 3u);
  EXPECT_GT(r.ttft_s, 0.0);
  EXPECT_GE(r.e2e_s, r.ttft_s);

  std::vector<http::request<http::string_body>> seen = server.requests();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].method(), http::verb::get);
  EXPECT_EQ(seen[0].target(), "/v1/models");
  EXPECT_EQ(seen[1].method(), http::verb::post);
  EXPECT_EQ(seen[1].target(), "/v1/completions");
  EXPECT_EQ(seen[1][http::field::authorization], "Bearer secret");
  nlohmann::json body = nlohmann::json::parse(seen[1].body());
  EXPECT_EQ(body["model"], "served");
  EXPECT_EQ(body["max_tokens"], 4);
  EXPECT_EQ(body["prompt"].size(), 5u);
  EXPECT_EQ(body["stream"], true);
}

TEST(HttpBenchClientTest, ReusesKeptAliveConnections) {
  ScriptedServer server(Normal);
  std::unique_ptr<BenchClient> client = Client(server.address(), "m");
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < 5; ++i) {
    RequestResult r = client->Send(Request(3, 2));
    ASSERT_TRUE(r.success) << r.error;
  }
  EXPECT_EQ(server.connections(), 1);
  EXPECT_EQ(server.requests().size(), 5u);
}

TEST(HttpBenchClientTest, RetriesAConnectionTheServerDroppedWhileIdle) {
  // Every response is followed by the server closing the connection (without saying so).
  ScriptedServer server([](const http::request<http::string_body>& req) {
    Reply reply = Normal(req);
    reply.close = true;
    return reply;
  });
  std::unique_ptr<BenchClient> client = Client(server.address(), "m");
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < 3; ++i) {
    RequestResult r = client->Send(Request(3, 2));
    ASSERT_TRUE(r.success) << "request " << i << ": " << r.error;
  }
  EXPECT_EQ(server.requests().size(), 3u);  // each sent once
  EXPECT_EQ(server.connections(), 3);
}

TEST(HttpBenchClientTest, ErrorStatusIsAFailureWithTheBody) {
  ScriptedServer server([](const http::request<http::string_body>&) {
    const std::string body = R"({"error":{"message":"prompt too long","code":400}})";
    return Reply{
        absl::StrCat("HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                     "Content-Length: ",
                     body.size(), "\r\n\r\n", body)};
  });
  std::unique_ptr<BenchClient> client = Client(server.address(), "m");
  ASSERT_NE(client, nullptr);
  RequestResult r = client->Send(Request(3, 2));
  EXPECT_FALSE(r.success);
  EXPECT_THAT(r.error, HasSubstr("HTTP 400"));
  EXPECT_THAT(r.error, HasSubstr("prompt too long"));
  EXPECT_EQ(r.http_status, 400);
  // The error response kept the connection usable.
  RequestResult again = client->Send(Request(3, 2));
  EXPECT_FALSE(again.success);
  EXPECT_EQ(server.connections(), 1);
}

TEST(HttpBenchClientTest, AnErrorEventMidStreamIsAFailure) {
  ScriptedServer server([](const http::request<http::string_body>&) {
    return Reply{
        SseResponse({TokenEvent("a"), R"({"error":{"message":"decode node lost"}})", "[DONE]"})};
  });
  std::unique_ptr<BenchClient> client = Client(server.address(), "m");
  ASSERT_NE(client, nullptr);
  RequestResult r = client->Send(Request(3, 2));
  EXPECT_FALSE(r.success);
  EXPECT_THAT(r.error, HasSubstr("decode node lost"));
  EXPECT_EQ(r.http_status, 200);  // the error came inside a stream that had begun
}

TEST(HttpBenchClientTest, TimesOutASilentServer) {
  ScriptedServer server([](const http::request<http::string_body>&) {
    Reply reply;
    reply.hang = true;
    return reply;
  });
  std::unique_ptr<BenchClient> client = Client(server.address(), "m", absl::Milliseconds(200));
  ASSERT_NE(client, nullptr);
  const absl::Time before = absl::Now();
  RequestResult r = client->Send(Request(3, 2));
  EXPECT_FALSE(r.success);
  EXPECT_THAT(r.error, HasSubstr("timeout"));
  EXPECT_EQ(r.http_status, 0);  // no response arrived
  EXPECT_GE(absl::Now() - before, absl::Milliseconds(190));
  EXPECT_LT(absl::Now() - before, absl::Seconds(20));
}

TEST(HttpBenchClientTest, ModelsWithoutAModelIsAnError) {
  ScriptedServer server([](const http::request<http::string_body>&) {
    const std::string body = R"({"object":"list","data":[]})";
    return Reply{
        absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", body.size(), "\r\n\r\n", body)};
  });
  ClientOptions options;
  options.address = server.address();
  absl::StatusOr<std::unique_ptr<BenchClient>> client = CreateBenchClient(options);
  ASSERT_FALSE(client.ok());
  EXPECT_THAT(std::string(client.status().message()), HasSubstr("--model"));
}

}  // namespace
}  // namespace tandem::bench
