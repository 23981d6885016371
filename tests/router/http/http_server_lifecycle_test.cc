// The HTTP API end to end when things end early: a client that disconnects (the decode node's
// stream is cancelled), an error after the stream began, no nodes, 429s from the admission queue,
// the request timeout, /ready and /v1/models, and Shutdown's drain.
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/router/http/http_server_fixture.h"

namespace tandem {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using json = nlohmann::json;
using testing::Client;
using testing::DecodeScript;
using testing::FakeDecodeNode;
using ::testing::HasSubstr;
using testing::Header;
using testing::HttpServerTest;
using ::testing::Not;
using testing::Response;
using testing::SseData;
using ::testing::StartsWith;
using testing::TestServedModel;

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
  EXPECT_EQ(m["data"][0]["id"], TestServedModel()->name);
  EXPECT_EQ(m["data"][0]["object"], "model");
  EXPECT_EQ(m["data"][0]["owned_by"], "tandem");
  EXPECT_EQ(m["data"][0]["max_model_len"], TestServedModel()->max_context_tokens());
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
    tokens.push_back(TestServedModel()->tokenizer->Decode(std::vector<TokenId>{id}));
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
