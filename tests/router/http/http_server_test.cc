// The HTTP API end to end in this process: HttpServer on 127.0.0.1:0 over a RequestRunner whose
// node pool points at the fake prefill and decode nodes of tests/router, driven by a small
// blocking Beast client. Covers non-streaming and streaming responses (SSE framing, [DONE], the
// include_usage chunk), the endpoint defaults reaching the nodes, 400/401/404/405/413/429/503
// bodies and statuses, an error after the stream began, a client that disconnects (the decode
// node's stream is cancelled), keep-alive reuse, serving on after bad input, /health, /ready,
// /v1/models and Shutdown.
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

TEST_F(HttpServerTest, CompletionInOneBody) {
  const std::string output = " The quick brown fox jumps over the lazy dog.";
  d_.SetScript(Script(output));
  StartServer();
  Client c = Connect();
  Response r = c.Post("/v1/completions",
                      R"({"model": ")" + TestServedModel()->name +
                          R"(", "prompt": "Once upon a time", "max_tokens": 50, "seed": 7})");
  ASSERT_EQ(r.result_int(), 200u) << r.body();
  EXPECT_EQ(Header(r, http::field::content_type), "application/json");
  const json j = Json(r);
  EXPECT_THAT(j["id"].get<std::string>(), StartsWith("cmpl-"));
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], TestServedModel()->name);
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
            TestServedModel()->max_context_tokens() - chat_prompt);
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
  for (int i = 0; i < TestServedModel()->max_context_tokens() + 10; ++i) long_prompt += " hello";
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

}  // namespace
}  // namespace tandem
