// The HTTP API end to end in this process: HttpServer on 127.0.0.1:0 over a RequestRunner whose
// node pool points at the fake prefill and decode nodes of tests/router, driven by a small
// blocking Beast client. Covers non-streaming and streaming responses (SSE framing, [DONE], the
// include_usage chunk), the endpoint defaults reaching the nodes, 400/401/404/405/413/429/503
// bodies and statuses, an error after the stream began, a client that disconnects (the decode
// node's stream is cancelled), keep-alive reuse, serving on after bad input, /health, /ready,
// /v1/models and Shutdown.
#include "router/http/http_server.h"

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
#include "router/node_pool.h"
#include "router/request_runner.h"
#include "router/router_counters.h"
#include "router/router_metrics.h"
#include "router/served_model.h"
#include "tests/router/fake_nodes.h"
#include "tests/router/router_test_util.h"

namespace tandem {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using json = nlohmann::json;
using testing::DecodeScript;
using testing::FakeDecodeNode;
using testing::FakePrefillNode;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

using Response = http::response<http::string_body>;

std::string Header(const Response& r, http::field f) { return std::string(r[f]); }

// The `data:` payloads of an SSE body, in order; fails on anything that is not one.
std::vector<std::string> SseData(const std::string& body) {
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
  static void SetUpTestSuite() {
    auto model = LoadServedModel(TestModelDir("llama"), "");
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = new std::shared_ptr<const ServedModel>(*model);
  }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }

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
    runner_ =
        std::make_unique<RequestRunner>(*model_, pool_.get(), options, &counters_, metrics_.get());
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
    return (*model_)->tokenizer->Encode(text, special);
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

  static std::shared_ptr<const ServedModel>* model_;

  // Nodes first: they outlive the runner and the server.
  FakePrefillNode p_;
  FakeDecodeNode d_;
  RouterCounters counters_;
  std::unique_ptr<NodePool> pool_;
  std::unique_ptr<RouterMetrics> metrics_;
  std::unique_ptr<RequestRunner> runner_;
  std::unique_ptr<HttpServer> server_;
};

std::shared_ptr<const ServedModel>* HttpServerTest::model_ = nullptr;

TEST_F(HttpServerTest, CompletionInOneBody) {
  const std::string output = " The quick brown fox jumps over the lazy dog.";
  d_.SetScript(Script(output));
  StartServer();
  Client c = Connect();
  Response r = c.Post("/v1/completions",
                      R"({"model": ")" + (*model_)->name +
                          R"(", "prompt": "Once upon a time", "max_tokens": 50, "seed": 7})");
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(Header(r, http::field::content_type), "application/json");
  const json j = Json(r);
  EXPECT_THAT(j["id"].get<std::string>(), StartsWith("cmpl-"));
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], (*model_)->name);
  EXPECT_GT(j["created"].get<int64_t>(), 1600000000);
  EXPECT_EQ(j["choices"][0]["text"], output);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  const int prompt_tokens = static_cast<int>(Encode("Once upon a time", true).size());
  EXPECT_EQ(j["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(j["usage"]["completion_tokens"], static_cast<int>(Encode(output).size()));
  EXPECT_EQ(j["usage"]["total_tokens"], prompt_tokens + static_cast<int>(Encode(output).size()));
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 0);

  // The parameters reached the nodes.
  ASSERT_EQ(d_.reserve_calls(), 1);
  EXPECT_EQ(d_.reserves()[0].sampling().max_tokens(), 50);
  EXPECT_EQ(d_.reserves()[0].sampling().seed(), 7u);
  EXPECT_EQ(p_.prefill_calls(), 1);
}

TEST_F(HttpServerTest, EndpointDefaultsForMaxTokens) {
  d_.SetScript(Script(" ok"));
  StartServer();
  Client c = Connect();
  // Completions: OpenAI's 16.
  ASSERT_EQ(c.Post("/v1/completions", R"({"prompt": "Hi"})").result_int(), 200u);
  // Chat: the rest of the context.
  Response chat =
      c.Post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}]})");
  ASSERT_EQ(chat.result_int(), 200u) << chat.body();
  ASSERT_EQ(d_.reserve_calls(), 2);
  EXPECT_EQ(d_.reserves()[0].sampling().max_tokens(), 16);
  const int chat_prompt = Json(chat)["usage"]["prompt_tokens"].get<int>();
  EXPECT_EQ(d_.reserves()[1].sampling().max_tokens(),
            (*model_)->max_context_tokens() - chat_prompt);
}

TEST_F(HttpServerTest, StreamedCompletionWithUsage) {
  const std::string output = " Hello there, streaming world!";
  d_.SetScript(Script(output));
  StartServer();
  Client c = Connect();
  Response r = c.Post("/v1/completions",
                      R"({"prompt": "Hi", "max_tokens": 30, "stream": true,
                          "stream_options": {"include_usage": true}})");
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(Header(r, http::field::content_type), "text/event-stream");
  EXPECT_EQ(Header(r, http::field::cache_control), "no-cache");
  EXPECT_TRUE(r.chunked());
  std::vector<std::string> events = SseData(r.body());
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    const json chunk = json::parse(events[i]);
    EXPECT_EQ(chunk["object"], "text_completion");
    EXPECT_THAT(chunk["id"].get<std::string>(), StartsWith("cmpl-"));
    EXPECT_TRUE(chunk["usage"].is_null());
    text += chunk["choices"][0]["text"].get<std::string>();
    if (i + 3 == events.size()) {
      EXPECT_EQ(chunk["choices"][0]["finish_reason"], "length");
    } else {
      EXPECT_TRUE(chunk["choices"][0]["finish_reason"].is_null());
    }
  }
  EXPECT_EQ(text, output);
  const json usage = json::parse(events[events.size() - 2]);
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"]["completion_tokens"], static_cast<int>(Encode(output).size()));
}

TEST_F(HttpServerTest, StreamedChatCompletion) {
  const std::string output = "Sure, here it is.";
  d_.SetScript(Script(output));
  StartServer();
  Client c = Connect();
  Response r = c.Post("/v1/chat/completions",
                      R"({"messages": [{"role": "system", "content": "Be brief."},
                                       {"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
                          "stream": true, "max_completion_tokens": 20, "logprobs": true})");
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  std::vector<std::string> events = SseData(r.body());
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  const json role = json::parse(events[0]);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_THAT(role["id"].get<std::string>(), StartsWith("chatcmpl-"));
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  int logprob_entries = 0;
  for (size_t i = 1; i + 1 < events.size(); ++i) {
    const json chunk = json::parse(events[i]);
    EXPECT_FALSE(chunk.contains("usage"));
    const json& choice = chunk["choices"][0];
    if (choice["delta"].contains("content")) text += choice["delta"]["content"].get<std::string>();
    if (!choice["logprobs"].is_null()) {
      for (const json& e : choice["logprobs"]["content"]) {
        // The fake decode node's logprobs: -0.25 per position.
        EXPECT_DOUBLE_EQ(e["logprob"].get<double>(), -0.25 * (logprob_entries + 1));
        ++logprob_entries;
      }
    }
  }
  EXPECT_EQ(text, output);
  EXPECT_EQ(logprob_entries, static_cast<int>(Encode(output).size()));
  EXPECT_EQ(d_.reserves()[0].sampling().logprobs(), 0);
}

TEST_F(HttpServerTest, ReturnTokenIds) {
  d_.SetScript(Script(" abc"));
  StartServer();
  Client c = Connect();
  Response r = c.Post("/v1/completions", R"({"prompt": [1, 2, 3], "return_token_ids": true})");
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  const json choice = Json(r)["choices"][0];
  EXPECT_EQ(choice["prompt_token_ids"], json::parse("[1, 2, 3]"));
  EXPECT_EQ(choice["token_ids"].get<std::vector<int32_t>>(), Encode(" abc"));
}

TEST_F(HttpServerTest, BadRequestsGetOpenAiErrorsAndTheServerKeepsServing) {
  d_.SetScript(Script(" fine"));
  StartServer();
  Client c = Connect();  // one connection throughout: errors keep it alive
  ExpectError(c.Post("/v1/completions", "{not json"), 400, "", "not valid JSON");
  ExpectError(c.Post("/v1/completions", "{\"prompt\": \"\xff\"}"), 400, "", "not valid JSON");
  // Red team, issue 14 row 1: this number used to abort the router.
  ExpectError(c.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 1e400})"), 400,
              "max_tokens", "out of range");
  ExpectError(c.Post("/v1/completions", R"({"prompt": "Hi", "temperature": -1})"), 400,
              "temperature");
  ExpectError(c.Post("/v1/completions", R"({"prompt": "Hi", "max_tokens": -5})"), 400,
              "max_tokens");
  ExpectError(c.Post("/v1/completions", R"({"prompt": "Hi", "max_tokens": "ten"})"), 400,
              "max_tokens");
  ExpectError(c.Post("/v1/completions", R"({"prompt": "Hi", "n": 2})"), 400, "n", "not supported");
  ExpectError(c.Post("/v1/completions", R"({"prompt": "Hi", "frobnicate": 1})"), 400, "frobnicate",
              "Unrecognized");
  ExpectError(c.Post("/v1/completions", R"({"prompt": ["a", "b"]})"), 400, "prompt",
              "only one prompt per request");
  ExpectError(c.Post("/v1/chat/completions",
                     R"({"messages": [{"role": "user", "content": "x"}], "tools": [{}]})"),
              400, "tools");
  ExpectError(c.Post("/v1/completions", R"({"prompt": "Hi", "stream_options": {}})"), 400,
              "stream_options");
  // Token ids outside the vocabulary: the runner's INVALID_ARGUMENT.
  ExpectError(c.Post("/v1/completions", R"({"prompt": [99999999]})"), 400, "", "vocabulary");
  // A prompt longer than the context: 400 from the runner.
  std::string long_prompt;
  for (int i = 0; i < (*model_)->max_context_tokens() + 10; ++i) long_prompt += " hello";
  ExpectError(c.Post("/v1/completions", R"({"prompt": ")" + long_prompt + R"("})"), 400, "",
              "context");
  // A model this router does not serve: 404.
  ExpectError(c.Post("/v1/completions", R"({"model": "gpt-17", "prompt": "Hi"})"), 404, "model",
              "not served");
  EXPECT_EQ(d_.reserve_calls(), 0);

  Response ok = c.Post("/v1/completions", R"({"prompt": "Hi"})");
  EXPECT_EQ(ok.result_int(), 200u) << ok.body();
  EXPECT_EQ(Json(ok)["choices"][0]["text"], " fine");
}

TEST_F(HttpServerTest, UnknownPathsAndMethods) {
  StartServer();
  Client c = Connect();
  ExpectError(c.Call(http::verb::get, "/v1/engines"), 404, "");
  ExpectError(c.Post("/v2/completions", "{}"), 404, "");
  Response method = c.Call(http::verb::get, "/v1/completions");
  ExpectError(method, 405, "");
  EXPECT_EQ(Header(method, http::field::allow), "POST");
  Response health_post = c.Post("/health", "{}");
  ExpectError(health_post, 405, "");
  EXPECT_EQ(Header(health_post, http::field::allow), "GET");
  EXPECT_EQ(c.Call(http::verb::get, "/health").result_int(), 200u);
}

TEST_F(HttpServerTest, ApiKey) {
  d_.SetScript(Script(" secret"));
  HttpServerOptions options;
  options.api_keys = *ApiKeys::Create({"sk-test"}, "");
  StartServer(options);
  Client c = Connect();
  const std::string body = R"({"prompt": "Hi"})";
  Response missing = c.Post("/v1/completions", body);
  ExpectError(missing, 401, "");
  EXPECT_EQ(Json(missing)["error"]["code"], "invalid_api_key");
  ExpectError(
      c.Call(http::verb::post, "/v1/completions", body, {{"Authorization", "Bearer sk-wrong"}}),
      401, "");
  ExpectError(c.Call(http::verb::get, "/v1/models"), 401, "");
  Response ok =
      c.Call(http::verb::post, "/v1/completions", body, {{"Authorization", "Bearer sk-test"}});
  EXPECT_EQ(ok.result_int(), 200u) << ok.body();
  EXPECT_EQ(
      c.Call(http::verb::get, "/v1/models", "", {{"Authorization", "Bearer sk-test"}}).result_int(),
      200u);
  // Probes need no key.
  EXPECT_EQ(c.Call(http::verb::get, "/health").result_int(), 200u);
  EXPECT_EQ(c.Call(http::verb::get, "/ready").result_int(), 200u);
}

TEST_F(HttpServerTest, BodyTooLarge) {
  d_.SetScript(Script(" small"));
  HttpServerOptions options;
  options.max_body_bytes = 1000;
  StartServer(options);
  {
    Client c = Connect();
    Response r = c.Post("/v1/completions", R"({"prompt": ")" + std::string(5000, 'a') + R"("})");
    ExpectError(r, 413, "", "1000 bytes");
  }
  Client c = Connect();
  EXPECT_EQ(c.Post("/v1/completions", R"({"prompt": "Hi"})").result_int(), 200u);
}

TEST_F(HttpServerTest, MalformedHttpGets400AndOtherConnectionsAreServed) {
  StartServer();
  {
    Client c = Connect();
    c.WriteRaw("THIS IS NOT HTTP\r\n\r\n");
    Response r = c.Read();
    EXPECT_EQ(r.result_int(), 400u);
    EXPECT_TRUE(c.ServerClosed());
  }
  Client c = Connect();
  EXPECT_EQ(c.Call(http::verb::get, "/health").result_int(), 200u);
}

TEST_F(HttpServerTest, KeepAliveServesManyRequestsOnOneConnection) {
  d_.SetScript(Script(" again"));
  StartServer();
  Client c = Connect();
  for (int i = 0; i < 3; ++i) {
    Response r = c.Post("/v1/completions", R"({"prompt": "Hi", "stream": true})");
    ASSERT_EQ(r.result_int(), 200u);
    EXPECT_EQ(SseData(r.body()).back(), "[DONE]");
    Response plain =
        c.Post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}]})");
    ASSERT_EQ(plain.result_int(), 200u);
    EXPECT_EQ(Json(plain)["choices"][0]["message"]["content"], " again");
    EXPECT_TRUE(plain.keep_alive());
  }
  // Pipelined: two requests written before either answer is read.
  c.Send(http::verb::get, "/health");
  c.Send(http::verb::post, "/v1/completions", R"({"prompt": "Hi"})");
  EXPECT_EQ(c.Read().result_int(), 200u);
  EXPECT_EQ(Json(c.Read())["choices"][0]["text"], " again");
  // Pipelined behind a generation: the next request arrives while the first one runs.
  c.Send(http::verb::post, "/v1/completions", R"({"prompt": "Hi", "stream": true})");
  c.Send(http::verb::get, "/v1/models");
  EXPECT_EQ(SseData(c.Read().body()).back(), "[DONE]");
  EXPECT_EQ(Json(c.Read())["object"], "list");
  EXPECT_EQ(d_.reserve_calls(), 8);
}

TEST_F(HttpServerTest, ManyIdleConnectionsAndConcurrentStreams) {
  const std::string output = " one two three four";
  DecodeScript script = Script(output);
  script.token_interval = absl::Milliseconds(5);
  d_.SetScript(script);
  StartServer();
  // Idle keep-alive connections cost the server no thread.
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 300; ++i) idle.push_back(std::make_unique<Client>(server_->port()));
  constexpr int kStreams = 32;
  std::vector<std::string> texts(kStreams);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      Client c(server_->port());
      Response r = c.Post("/v1/completions", R"({"prompt": "Hi", "stream": true})");
      std::vector<std::string> events = SseData(r.body());
      if (events.empty() || events.back() != "[DONE]") return;
      for (size_t k = 0; k + 1 < events.size(); ++k) {
        texts[i] += json::parse(events[k])["choices"][0]["text"].get<std::string>();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kStreams; ++i) EXPECT_EQ(texts[i], output) << i;
  // The idle connections still work.
  EXPECT_EQ(idle.front()->Call(http::verb::get, "/health").result_int(), 200u);
  EXPECT_EQ(idle.back()->Call(http::verb::get, "/health").result_int(), 200u);
}

TEST_F(HttpServerTest, AnswersExpect100Continue) {
  d_.SetScript(Script(" continued"));
  StartServer();
  Client c = Connect();
  const std::string body = R"({"prompt": "Hi"})";
  c.WriteRaw(
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
      "Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n");
  EXPECT_EQ(c.Read().result_int(), 100u);  // before the body was sent
  c.WriteRaw(body);
  Response r = c.Read();
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(Json(r)["choices"][0]["text"], " continued");
}

TEST_F(HttpServerTest, ResponsesCarryTheRequestId) {
  d_.SetScript(Script(" id"));
  StartServer();
  Client c = Connect();
  Response r = c.Post("/v1/completions", R"({"prompt": "Hi"})");
  ASSERT_EQ(r.result_int(), 200u);
  const std::string id(r["X-Request-Id"]);
  EXPECT_THAT(id, StartsWith("req-"));
  EXPECT_EQ(Json(r)["id"], "cmpl-" + id);
  EXPECT_EQ(d_.reserves()[0].request_id().rfind(id, 0), 0u) << d_.reserves()[0].request_id();
  Response s = c.Post("/v1/chat/completions",
                      R"({"messages": [{"role": "user", "content": "x"}], "stream": true})");
  const std::string sid(s["X-Request-Id"]);
  EXPECT_EQ(json::parse(SseData(s.body())[0])["id"], "chatcmpl-" + sid);
}

TEST_F(HttpServerTest, ClientDisconnectMidStreamCancelsTheDecodeNode) {
  DecodeScript script = Script(" one two three four five six seven eight nine ten eleven twelve");
  script.token_interval = absl::Milliseconds(100);
  d_.SetScript(script);
  StartServer();
  {
    Client c = Connect();
    c.Send(http::verb::post, "/v1/completions",
           R"({"prompt": "Count", "max_tokens": 100, "stream": true})");
    const std::string body = c.ReadEvents(1);
    EXPECT_THAT(body, StartsWith("data: {"));
    c.Close();
  }
  EXPECT_TRUE(FakeDecodeNode::WaitUntil([&] { return d_.cancelled_streams() == 1; }));
  EXPECT_TRUE(FakeDecodeNode::WaitUntil([&] { return server_->requests_in_flight() == 0; }));
  EXPECT_TRUE(FakeDecodeNode::WaitUntil([&] { return counters_.requests_cancelled.load() == 1; }));
}

TEST_F(HttpServerTest, ClientDisconnectDuringANonStreamingRequestCancelsIt) {
  DecodeScript script = Script(" slow and steady");
  script.hang = true;
  script.fail_after_tokens = 1;  // one token, then nothing until cancelled
  d_.SetScript(script);
  StartServer();
  {
    Client c = Connect();
    c.Send(http::verb::post, "/v1/completions", R"({"prompt": "Wait", "max_tokens": 50})");
    ASSERT_TRUE(FakeDecodeNode::WaitUntil([&] { return d_.reserve_calls() == 1; }));
    absl::SleepFor(absl::Milliseconds(100));
    c.Close();
  }
  EXPECT_TRUE(FakeDecodeNode::WaitUntil([&] { return d_.cancelled_streams() == 1; }));
  EXPECT_TRUE(FakeDecodeNode::WaitUntil([&] { return server_->requests_in_flight() == 0; }));
}

TEST_F(HttpServerTest, AnErrorAfterTheStreamBeganIsAnErrorEvent) {
  DecodeScript script = Script(" a b c d e f");
  script.fail_after_tokens = 2;
  script.stream_error = grpc::Status(grpc::StatusCode::UNAVAILABLE, "decode node fell over");
  d_.SetScript(script);
  StartServer();
  Client c = Connect();
  Response r = c.Post("/v1/completions", R"({"prompt": "Go", "stream": true})");
  ASSERT_EQ(r.result_int(), 200u);
  std::vector<std::string> events = SseData(r.body());
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  const json error = json::parse(events[events.size() - 2]);
  ASSERT_TRUE(error.contains("error")) << events[events.size() - 2];
  // The stage and code reach the client; the node's own words stay in the router's log.
  EXPECT_THAT(error["error"]["message"].get<std::string>(), HasSubstr("decoding failed"));
  EXPECT_THAT(error["error"]["message"].get<std::string>(), Not(HasSubstr("fell over")));
  EXPECT_EQ(json::parse(events[0])["object"], "text_completion");
  // The connection is still usable.
  EXPECT_EQ(c.Call(http::verb::get, "/health").result_int(), 200u);
}

TEST_F(HttpServerTest, NoNodes) {
  StartServer({}, /*with_nodes=*/false);
  Client c = Connect();
  Response ready = c.Call(http::verb::get, "/ready");
  EXPECT_EQ(ready.result_int(), 503u);
  EXPECT_EQ(Json(ready)["status"], "not ready");
  EXPECT_THAT(Json(ready)["reason"].get<std::string>(), HasSubstr("decode"));
  EXPECT_EQ(c.Call(http::verb::get, "/health").result_int(), 200u);
  Response r = c.Post("/v1/completions", R"({"prompt": "Hi"})");
  ExpectError(r, 503, "");
  EXPECT_EQ(Header(r, http::field::retry_after), "1");
}

TEST_F(HttpServerTest, ReadyAndModels) {
  StartServer();
  Client c = Connect();
  Response ready = c.Call(http::verb::get, "/ready");
  EXPECT_EQ(ready.result_int(), 200u) << ready.body();
  EXPECT_EQ(Json(ready)["status"], "ready");
  Response models = c.Call(http::verb::get, "/v1/models");
  ASSERT_EQ(models.result_int(), 200u);
  const json m = Json(models);
  EXPECT_EQ(m["object"], "list");
  ASSERT_EQ(m["data"].size(), 1u);
  EXPECT_EQ(m["data"][0]["id"], (*model_)->name);
  EXPECT_EQ(m["data"][0]["object"], "model");
  EXPECT_EQ(m["data"][0]["owned_by"], "tandem");
  EXPECT_EQ(m["data"][0]["max_model_len"], (*model_)->max_context_tokens());
  EXPECT_TRUE(m["data"][0]["created"].is_number_integer());
}

TEST_F(HttpServerTest, OverTheConcurrencyLimitIs429WithRetryAfter) {
  DecodeScript script = Script(" x y");
  script.hang = true;
  script.fail_after_tokens = 1;
  d_.SetScript(script);
  HttpServerOptions options;
  options.retry_after_seconds = 3;
  StartServer(options, true, [](RouterOptions& o) {
    o.max_concurrent_requests = 1;
    o.max_queued_requests = 0;  // no queue: refused at once
  });
  Client first = Connect();
  first.Send(http::verb::post, "/v1/completions", R"({"prompt": "Hold", "stream": true})");
  first.ReadEvents(1);
  Client second = Connect();
  Response r = second.Post("/v1/completions", R"({"prompt": "Me too"})");
  ExpectError(r, 429, "", "queue is full");
  EXPECT_EQ(Header(r, http::field::retry_after), "3");
  first.Close();
}

TEST_F(HttpServerTest, AWaitForASlotThatRunsOutIs429) {
  DecodeScript script = Script(" x y");
  script.hang = true;
  script.fail_after_tokens = 1;
  d_.SetScript(script);
  StartServer({}, true, [](RouterOptions& o) {
    o.max_concurrent_requests = 1;
    o.queue_timeout_ms = 200;
  });
  Client first = Connect();
  first.Send(http::verb::post, "/v1/completions", R"({"prompt": "Hold", "stream": true})");
  first.ReadEvents(1);
  Client second = Connect();
  Response r = second.Post("/v1/completions", R"({"prompt": "Me too"})");
  ExpectError(r, 429, "", "no slot freed within 200 ms");
  EXPECT_EQ(Header(r, http::field::retry_after), "1");
  first.Close();
}

TEST_F(HttpServerTest, RequestTimeout) {
  DecodeScript script = Script(" a b");
  script.hang = true;
  script.fail_after_tokens = 1;
  d_.SetScript(script);
  StartServer({}, true, [](RouterOptions& o) { o.request_timeout_ms = 300; });
  Client c = Connect();
  // Nothing was sent yet: a plain 504.
  ExpectError(c.Post("/v1/completions", R"({"prompt": "Hi"})"), 504, "");
  // A stream that began: an error event, then [DONE].
  Response r = c.Post("/v1/chat/completions",
                      R"({"messages": [{"role": "user", "content": "Hi"}], "stream": true})");
  ASSERT_EQ(r.result_int(), 200u);
  std::vector<std::string> events = SseData(r.body());
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_TRUE(json::parse(events[events.size() - 2]).contains("error"));
}

TEST_F(HttpServerTest, CompletionsLogprobsThroughThePath) {
  const std::string output = " Hello world";
  d_.SetScript(Script(output));
  StartServer();
  Client c = Connect();
  Response r = c.Post("/v1/completions", R"({"prompt": "Hi", "logprobs": 2})");
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  const json lp = Json(r)["choices"][0]["logprobs"];
  std::vector<std::string> tokens;
  for (int32_t id : Encode(output)) {
    tokens.push_back((*model_)->tokenizer->Decode(std::vector<TokenId>{id}));
  }
  EXPECT_EQ(lp["tokens"].get<std::vector<std::string>>(), tokens);
  ASSERT_EQ(lp["token_logprobs"].size(), tokens.size());
  EXPECT_DOUBLE_EQ(lp["token_logprobs"][0].get<double>(), -0.25);
  EXPECT_EQ(lp["text_offset"][0], 0);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 1u);  // the fake node sends no alternatives
  EXPECT_EQ(d_.reserves()[0].sampling().logprobs(), 2);
}

TEST_F(HttpServerTest, ShutdownDrainsThenCancels) {
  DecodeScript script = Script(" a b c");
  script.token_interval = absl::Milliseconds(50);
  d_.SetScript(script);
  StartServer();
  // A short stream finishes within the drain.
  Client c = Connect();
  c.Send(http::verb::post, "/v1/completions", R"({"prompt": "Hi", "stream": true})");
  c.ReadEvents(1);
  server_->Shutdown(absl::Seconds(5));
  std::vector<std::string> events = SseData(c.FinishStream());
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(d_.cancelled_streams(), 0);
  // No new connections.
  beast::error_code ec;
  net::io_context ioc;
  net::ip::tcp::socket s(ioc);
  s.connect(net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), server_->port()), ec);
  EXPECT_TRUE(ec);
}

TEST_F(HttpServerTest, ShutdownCancelsWhatOutlivesTheDrain) {
  DecodeScript script = Script(" a b");
  script.hang = true;
  script.fail_after_tokens = 1;
  d_.SetScript(script);
  StartServer();
  Client c = Connect();
  c.Send(http::verb::post, "/v1/completions", R"({"prompt": "Hi", "stream": true})");
  c.ReadEvents(1);
  const absl::Time start = absl::Now();
  server_->Shutdown(absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_TRUE(FakeDecodeNode::WaitUntil([&] { return d_.cancelled_streams() == 1; }));
  EXPECT_EQ(server_->requests_in_flight(), 0);
}

}  // namespace
}  // namespace tandem
