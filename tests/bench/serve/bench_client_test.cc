// tandem-bench's clients without a server: SSE splitting, the reading of OpenAI stream events
// into TTFT / ITL / token counts, the request bodies; and the gRPC client against an in-process
// fake of the Generate API.
#include "bench/serve/bench_client.h"

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "bench/serve/completion_stream.h"
#include "bench/serve/grpc_bench_client.h"
#include "bench/serve/http_bench_client.h"
#include "bench/serve/sse_parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/fake_generation_service.h"

namespace tandem::bench {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pointwise;

std::vector<std::string> FeedAll(SseParser& parser, const std::vector<std::string>& pieces) {
  std::vector<std::string> events;
  for (const std::string& piece : pieces) parser.Feed(piece, &events);
  return events;
}

TEST(SseParserTest, SplitsEventsAtBlankLines) {
  SseParser parser;
  EXPECT_THAT(FeedAll(parser, {"data: {\"a\":1}\n\ndata: [DONE]\n\n"}),
              ElementsAre("{\"a\":1}", "[DONE]"));
  EXPECT_EQ(parser.pending_bytes(), 0u);
}

TEST(SseParserTest, EventsSplitAcrossReadsAtEveryByte) {
  const std::string stream = "data: one\n\ndata: two\r\n\r\ndata:three\r\rdata: [DONE]\n\n";
  std::vector<std::string> pieces;
  for (char c : stream) pieces.emplace_back(1, c);
  SseParser parser;
  EXPECT_THAT(FeedAll(parser, pieces), ElementsAre("one", "two", "three", "[DONE]"));
}

TEST(SseParserTest, JoinsDataLinesAndSkipsCommentsAndOtherFields) {
  SseParser parser;
  EXPECT_THAT(FeedAll(parser, {": keep-alive\n\n", "event: x\nid: 3\ndata: a\ndata:  b\n\n",
                               "data: unfinished"}),
              ElementsAre("a\n b"));
  EXPECT_EQ(parser.pending_bytes(), std::string("data: unfinished").size());
}

TEST(CompletionEventTest, ReadsTheRouterChunks) {
  // The router's completions chunks (openai_response.cc).
  auto token = ParseCompletionEvent(
      R"({"id":"cmpl-1","object":"text_completion","created":1,"model":"m","usage":null,)"
      R"("choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null}]})");
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_TRUE(token->content);
  EXPECT_EQ(token->tokens, 1);
  EXPECT_FALSE(token->done);
  EXPECT_FALSE(token->completion_tokens.has_value());

  // A token that ends inside a UTF-8 character: no text yet, still a token arrival.
  auto partial = ParseCompletionEvent(
      R"({"choices":[{"index":0,"text":"","logprobs":null,"finish_reason":null}]})");
  ASSERT_TRUE(partial.ok());
  EXPECT_TRUE(partial->content);

  // Only a finish_reason: the end, not a token.
  auto finish = ParseCompletionEvent(
      R"({"choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"length"}]})");
  ASSERT_TRUE(finish.ok());
  EXPECT_FALSE(finish->content);
  EXPECT_EQ(finish->tokens, 0);

  // The last token with its finish_reason.
  auto last = ParseCompletionEvent(
      R"({"choices":[{"index":0,"text":"!","logprobs":null,"finish_reason":"length"}]})");
  ASSERT_TRUE(last.ok());
  EXPECT_TRUE(last->content);

  auto usage = ParseCompletionEvent(
      R"({"object":"text_completion","choices":[],"usage":{"prompt_tokens":16,)"
      R"("completion_tokens":8,"total_tokens":24}})");
  ASSERT_TRUE(usage.ok());
  EXPECT_FALSE(usage->content);
  EXPECT_EQ(usage->prompt_tokens, 16);
  EXPECT_EQ(usage->completion_tokens, 8);

  auto done = ParseCompletionEvent("[DONE]");
  ASSERT_TRUE(done.ok());
  EXPECT_TRUE(done->done);
}

TEST(CompletionEventTest, TokenIdsChatDeltasErrorsAndGarbage) {
  auto ids = ParseCompletionEvent(
      R"({"choices":[{"index":0,"text":"ab","token_ids":[5,6,7],"finish_reason":null}]})");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids->tokens, 3);
  auto chat = ParseCompletionEvent(
      R"({"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]})");
  ASSERT_TRUE(chat.ok());
  EXPECT_TRUE(chat->content);
  auto error = ParseCompletionEvent(
      R"({"error":{"message":"engine stopped","type":"InternalServerError","code":500}})");
  ASSERT_TRUE(error.ok());
  EXPECT_EQ(error->error, "engine stopped");
  EXPECT_FALSE(ParseCompletionEvent("{not json").ok());
  EXPECT_FALSE(ParseCompletionEvent("[1,2]").ok());
}

std::string Chunk(const std::string& text, const char* finish = "null") {
  return "data: {\"choices\":[{\"index\":0,\"text\":\"" + text +
         "\",\"logprobs\":null,\"finish_reason\":" + finish + "}],\"usage\":null}\n\n";
}

TEST(CompletionStreamReaderTest, TimesTokensFromTheirArrival) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  BenchRequest request;
  request.prompt_len = 16;
  request.output_len = 3;
  CompletionStreamReader reader(t0);
  ASSERT_TRUE(reader.Feed(Chunk("a"), t0 + absl::Milliseconds(50)).ok());
  // Split mid-event: the event counts when it completes.
  const std::string second = Chunk("b");
  ASSERT_TRUE(reader.Feed(second.substr(0, 10), t0 + absl::Milliseconds(55)).ok());
  ASSERT_TRUE(reader.Feed(second.substr(10), t0 + absl::Milliseconds(60)).ok());
  ASSERT_TRUE(reader
                  .Feed(Chunk("c", "\"length\"") +
                            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":17,"
                            "\"completion_tokens\":3}}\n\n",
                        t0 + absl::Milliseconds(75))
                  .ok());
  EXPECT_FALSE(reader.done());
  ASSERT_TRUE(reader.Feed("data: [DONE]\n\n", t0 + absl::Milliseconds(76)).ok());
  EXPECT_TRUE(reader.done());
  RequestResult r = reader.Finish(t0 + absl::Milliseconds(80), request);
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_NEAR(r.ttft_s, 0.050, 1e-9);
  EXPECT_THAT(r.itl_s, Pointwise(DoubleNear(1e-9), {0.010, 0.015}));
  EXPECT_NEAR(r.e2e_s, 0.080, 1e-9);
  EXPECT_EQ(r.prompt_tokens, 17);  // the server's count wins
  EXPECT_EQ(r.output_tokens, 3);
}

TEST(CompletionStreamReaderTest, WithoutUsageCountsChunksAndTheRequestsPrompt) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  BenchRequest request;
  request.prompt_len = 9;
  CompletionStreamReader reader(t0);
  ASSERT_TRUE(reader
                  .Feed(Chunk("x") + Chunk("y") + Chunk("", "\"length\"") + "data: [DONE]\n\n",
                        t0 + absl::Milliseconds(5))
                  .ok());
  RequestResult r = reader.Finish(t0 + absl::Milliseconds(6), request);
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_EQ(r.prompt_tokens, 9);
  EXPECT_EQ(r.output_tokens, 2);  // the finish-only chunk is not a token
  EXPECT_THAT(r.itl_s, ElementsAre(0.0));
}

TEST(CompletionStreamReaderTest, FailuresSayWhy) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  BenchRequest request;
  {
    CompletionStreamReader reader(t0);
    ASSERT_TRUE(reader.Feed(Chunk("x"), t0).ok());
    RequestResult r = reader.Finish(t0, request);  // no [DONE]
    EXPECT_FALSE(r.success);
    EXPECT_THAT(r.error, HasSubstr("[DONE]"));
  }
  {
    CompletionStreamReader reader(t0);
    ASSERT_TRUE(reader.Feed("data: [DONE]\n\n", t0).ok());
    RequestResult r = reader.Finish(t0, request);
    EXPECT_FALSE(r.success);
    EXPECT_THAT(r.error, HasSubstr("no output"));
  }
  {
    CompletionStreamReader reader(t0);
    absl::Status s = reader.Feed(
        Chunk("x") + "data: {\"error\":{\"message\":\"node died\",\"code\":503}}\n\n", t0);
    EXPECT_FALSE(s.ok());
    EXPECT_THAT(std::string(s.message()), HasSubstr("node died"));
  }
}

TEST(RequestBodyTest, HttpBodyAsksForExactlyOutputLenTokensStreamedWithUsage) {
  BenchRequest ids;
  ids.prompt_ids = {11, 12, 13};
  ids.output_len = 8;
  nlohmann::json body = CompletionsRequestBody(ids, "m", 0.0f);
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body["prompt"], nlohmann::json::array({11, 12, 13}));
  EXPECT_EQ(body["max_tokens"], 8);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["temperature"], 0.0);

  BenchRequest text;
  text.prompt_text = "Hello";
  text.output_len = 2;
  nlohmann::json body2 = CompletionsRequestBody(text, "", std::nullopt);
  EXPECT_EQ(body2["prompt"], "Hello");
  EXPECT_FALSE(body2.contains("model"));
  EXPECT_FALSE(body2.contains("temperature"));
}

TEST(RequestBodyTest, GrpcRequest) {
  ClientOptions options;
  options.model = "m";
  options.temperature = 0.5f;
  BenchRequest ids;
  ids.prompt_ids = {11, 12};
  ids.output_len = 4;
  v1::GenerateRequest g = GrpcGenerateRequest(ids, options);
  EXPECT_EQ(g.model(), "m");
  EXPECT_THAT(g.token_ids().ids(), ElementsAre(11, 12));
  EXPECT_EQ(g.sampling().max_tokens(), 4);
  EXPECT_TRUE(g.sampling().ignore_eos());
  EXPECT_FLOAT_EQ(g.sampling().temperature(), 0.5f);

  options.temperature.reset();
  BenchRequest text;
  text.prompt_text = "Hi";
  v1::GenerateRequest g2 = GrpcGenerateRequest(text, options);
  EXPECT_EQ(g2.text(), "Hi");
  EXPECT_FALSE(g2.sampling().has_temperature());
}

TEST(CreateBenchClientTest, RejectsBadOptions) {
  ClientOptions options;
  EXPECT_FALSE(CreateBenchClient(options).ok());  // no address
  options.address = "127.0.0.1:1";
  options.api = "websocket";
  EXPECT_FALSE(CreateBenchClient(options).ok());
  options.api = "http";
  options.address = "no-port";
  EXPECT_FALSE(CreateBenchClient(options).ok());
  options.api = "grpc";
  options.address = "127.0.0.1:1";
  options.temperature = -1.0f;
  EXPECT_FALSE(CreateBenchClient(options).ok());
}

TEST(CreateBenchClientTest, HttpWithoutModelNeedsAServer) {
  // Nothing listens on port 1: asking GET /v1/models for the model fails, naming the address.
  ClientOptions options;
  options.address = "127.0.0.1:1";
  absl::StatusOr<std::unique_ptr<BenchClient>> client = CreateBenchClient(options);
  ASSERT_FALSE(client.ok());
  EXPECT_THAT(std::string(client.status().message()), HasSubstr("127.0.0.1:1"));
}

TEST(HttpBenchClientTest, UnreachableServerIsAFailedRequestNotACrash) {
  ClientOptions options;
  options.address = "127.0.0.1:1";
  options.model = "m";
  absl::StatusOr<std::unique_ptr<BenchClient>> client = CreateBenchClient(options);
  ASSERT_TRUE(client.ok()) << client.status();
  BenchRequest request;
  request.prompt_ids = {1, 2};
  request.output_len = 2;
  RequestResult r = (*client)->Send(request);
  EXPECT_FALSE(r.success);
  EXPECT_THAT(r.error, HasSubstr("connect"));
}

class GrpcBenchClientTest : public ::testing::Test {
 protected:
  std::unique_ptr<BenchClient> Client() {
    ClientOptions options;
    options.api = "grpc";
    options.address = server_.address();
    options.model = "tiny";
    auto client = CreateBenchClient(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }
  FakeGenerationServer server_;
};

TEST_F(GrpcBenchClientTest, CountsTokensAndTakesUsageFromTheLastResponse) {
  FakeGenerationService::Script script;
  script.responses = {TextResponse("a", 1), TextResponse("b", 2), TextResponse("c", 3)};
  script.responses.back().set_finish_reason("length");
  script.responses.back().mutable_usage()->set_prompt_tokens(5);
  script.responses.back().mutable_usage()->set_completion_tokens(3);
  server_.service().SetScript(script);
  std::unique_ptr<BenchClient> client = Client();
  ASSERT_NE(client, nullptr);
  BenchRequest request;
  request.prompt_ids = {7, 8, 9, 10, 11};
  request.prompt_len = 5;
  request.output_len = 3;
  RequestResult r = client->Send(request);
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_EQ(r.prompt_tokens, 5);
  EXPECT_EQ(r.output_tokens, 3);
  EXPECT_EQ(r.itl_s.size(), 2u);
  EXPECT_GT(r.ttft_s, 0.0);
  EXPECT_GE(r.e2e_s, r.ttft_s);
  std::vector<v1::GenerateRequest> seen = server_.service().requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].model(), "tiny");
  EXPECT_THAT(seen[0].token_ids().ids(), ElementsAre(7, 8, 9, 10, 11));
  EXPECT_EQ(seen[0].sampling().max_tokens(), 3);
  EXPECT_TRUE(seen[0].sampling().ignore_eos());
}

TEST_F(GrpcBenchClientTest, NonOkStatusIsAFailureNamingTheCode) {
  FakeGenerationService::Script script;
  script.responses = {TextResponse("a", 1)};
  script.status = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full");
  server_.service().SetScript(script);
  std::unique_ptr<BenchClient> client = Client();
  ASSERT_NE(client, nullptr);
  BenchRequest request;
  request.prompt_text = "hi";
  request.output_len = 1;
  RequestResult r = client->Send(request);
  EXPECT_FALSE(r.success);
  EXPECT_THAT(r.error, HasSubstr("RESOURCE_EXHAUSTED"));
  EXPECT_THAT(r.error, HasSubstr("queue full"));
}

TEST_F(GrpcBenchClientTest, AnEmptyStreamIsAFailure) {
  server_.service().SetScript({});
  std::unique_ptr<BenchClient> client = Client();
  ASSERT_NE(client, nullptr);
  BenchRequest request;
  request.prompt_text = "hi";
  request.output_len = 1;
  RequestResult r = client->Send(request);
  EXPECT_FALSE(r.success);
  EXPECT_THAT(r.error, HasSubstr("no output"));
}

TEST_F(GrpcBenchClientTest, RecordsTokenIdsFinishReasonAndCodeWhenAsked) {
  FakeGenerationService::Script script;
  script.responses = {TextResponse("a", 11), TextResponse("b", 12)};
  script.responses.back().set_finish_reason("length");
  server_.service().SetScript(script);
  ClientOptions options;
  options.api = "grpc";
  options.address = server_.address();
  BenchRequest request;
  request.prompt_ids = {7, 8};
  request.prompt_len = 2;
  request.output_len = 2;
  // Not asked: nothing kept.
  auto plain = CreateBenchClient(options);
  ASSERT_TRUE(plain.ok()) << plain.status();
  RequestResult r = (*plain)->Send(request);
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_TRUE(r.token_ids.empty());
  options.record_tokens = true;
  auto recording = CreateBenchClient(options);
  ASSERT_TRUE(recording.ok()) << recording.status();
  r = (*recording)->Send(request);
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_THAT(r.token_ids, ElementsAre(11, 12));
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_EQ(r.grpc_code, 0);
  // A stream that breaks after its first token keeps what it delivered and the code.
  script.responses = {TextResponse("a", 21)};
  script.status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "decode node lost");
  server_.service().SetScript(script);
  r = (*recording)->Send(request);
  EXPECT_FALSE(r.success);
  EXPECT_THAT(r.token_ids, ElementsAre(21));
  EXPECT_EQ(r.grpc_code, static_cast<int>(grpc::StatusCode::UNAVAILABLE));
}

}  // namespace
}  // namespace tandem::bench
