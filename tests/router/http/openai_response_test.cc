// GenerateResponses → OpenAI JSON: completions and chat objects, streamed chunks (the chat role
// chunk, usage: null and the include_usage chunk), logprobs in the legacy completions format and
// the chat format, vLLM's return_token_ids fields, usage with cached tokens, SSE framing.
#include "router/http/openai_response.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/test_model_dir.h"

namespace tandem {
namespace {

using ordered_json = nlohmann::ordered_json;

class OpenAiResponseTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto tok = Tokenizer::FromFile(Llama3TokenizerDir() + "/tokenizer.json");
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = tok->release();
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }

  static int32_t Id(const std::string& piece) {
    std::vector<TokenId> ids = tokenizer_->Encode(piece, false);
    EXPECT_EQ(ids.size(), 1u) << piece;
    return ids.empty() ? 0 : ids[0];
  }

  // A response with `text`, one token per piece (logprob -0.5 * (i + 1)), and `alternatives`
  // top logprobs per token (the pieces " a", " b", " c", ...).
  static v1::GenerateResponse Response(const std::string& text,
                                       const std::vector<std::string>& pieces,
                                       const std::string& finish = "", int alternatives = 0) {
    v1::GenerateResponse r;
    r.set_request_id("req-1");
    r.set_text(text);
    for (size_t i = 0; i < pieces.size(); ++i) {
      v1::Token* t = r.add_tokens();
      t->set_id(Id(pieces[i]));
      t->set_logprob(-0.5f * static_cast<float>(i + 1));
      for (int k = 0; k < alternatives; ++k) {
        v1::TokenLogprob* alt = t->add_top_logprobs();
        alt->set_token_id(Id(std::string(" ") + static_cast<char>('a' + k)));
        alt->set_logprob(-1.0f - static_cast<float>(k));
      }
    }
    if (!finish.empty()) {
      r.set_finish_reason(finish);
      r.mutable_usage()->set_prompt_tokens(4);
      r.mutable_usage()->set_completion_tokens(3);
      r.mutable_usage()->set_cached_tokens(2);
    }
    return r;
  }

  static OpenAiResponseFormatter Formatter(OpenAiEndpoint endpoint, bool stream = false,
                                           int logprobs = -1, bool include_usage = false,
                                           bool return_token_ids = false) {
    OpenAiOutputOptions o;
    o.endpoint = endpoint;
    o.stream = stream;
    o.logprobs = logprobs;
    o.include_usage = include_usage;
    o.return_token_ids = return_token_ids;
    return OpenAiResponseFormatter(
        o, *tokenizer_, endpoint == OpenAiEndpoint::kCompletions ? "cmpl-req-1" : "chatcmpl-req-1",
        "llama", 1700000000);
  }

  static Tokenizer* tokenizer_;
};

Tokenizer* OpenAiResponseTest::tokenizer_ = nullptr;

TEST_F(OpenAiResponseTest, SseFraming) {
  EXPECT_EQ(SseEvent(ordered_json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

TEST_F(OpenAiResponseTest, UsageCarriesCachedTokens) {
  v1::Usage u;
  u.set_prompt_tokens(10);
  u.set_completion_tokens(5);
  u.set_cached_tokens(8);
  EXPECT_EQ(UsageJson(u), ordered_json::parse(R"({"prompt_tokens": 10, "completion_tokens": 5,
      "total_tokens": 15, "prompt_tokens_details": {"cached_tokens": 8}})"));
}

TEST_F(OpenAiResponseTest, CompletionObject) {
  OpenAiResponseFormatter f = Formatter(OpenAiEndpoint::kCompletions);
  f.Add(Response(" Hello", {" Hello"}));
  f.Add(Response(" world", {" world"}));
  f.Add(Response("!", {"!"}, "length"));
  const ordered_json out = f.Final();
  EXPECT_EQ(out["id"], "cmpl-req-1");
  EXPECT_EQ(out["object"], "text_completion");
  EXPECT_EQ(out["created"], 1700000000);
  EXPECT_EQ(out["model"], "llama");
  ASSERT_EQ(out["choices"].size(), 1u);
  const ordered_json& c = out["choices"][0];
  EXPECT_EQ(c["index"], 0);
  EXPECT_EQ(c["text"], " Hello world!");
  EXPECT_TRUE(c["logprobs"].is_null());
  EXPECT_EQ(c["finish_reason"], "length");
  EXPECT_FALSE(c.contains("token_ids"));
  EXPECT_EQ(out["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(out["usage"]["completion_tokens"], 3);
  EXPECT_EQ(out["usage"]["total_tokens"], 7);
  EXPECT_EQ(out["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
  EXPECT_FALSE(out.contains("prompt_token_ids"));
}

TEST_F(OpenAiResponseTest, ChatObject) {
  OpenAiResponseFormatter f = Formatter(OpenAiEndpoint::kChatCompletions);
  f.Add(Response("Hi", {"Hi"}));
  f.Add(Response(" there", {" there"}, "stop"));
  const ordered_json out = f.Final();
  EXPECT_EQ(out["id"], "chatcmpl-req-1");
  EXPECT_EQ(out["object"], "chat.completion");
  const ordered_json& c = out["choices"][0];
  EXPECT_EQ(c["message"], ordered_json::parse(R"({"role": "assistant", "content": "Hi there"})"));
  EXPECT_EQ(c["finish_reason"], "stop");
  EXPECT_TRUE(c["logprobs"].is_null());
  EXPECT_EQ(out["usage"]["total_tokens"], 7);
}

TEST_F(OpenAiResponseTest, CompletionsLegacyLogprobs) {
  OpenAiResponseFormatter f = Formatter(OpenAiEndpoint::kCompletions, false, /*logprobs=*/2);
  f.Add(Response(" Hello world", {" Hello", " world"}, "", /*alternatives=*/3));
  v1::GenerateResponse last = Response("!", {"!"}, "length", 3);
  last.mutable_tokens(0)->set_logprob(-std::numeric_limits<float>::infinity());
  f.Add(last);
  const ordered_json lp = f.Final()["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], ordered_json::parse(R"([" Hello", " world", "!"])"));
  EXPECT_EQ(lp["token_logprobs"], ordered_json::parse("[-0.5, -1.0, -9999.0]"));  // -inf → -9999
  // Offsets of each token in the output text.
  EXPECT_EQ(lp["text_offset"], ordered_json::parse("[0, 6, 12]"));
  ASSERT_EQ(lp["top_logprobs"].size(), 3u);
  // The chosen token and the top 2 alternatives (N + 1 entries), keyed by token text.
  EXPECT_EQ(lp["top_logprobs"][0],
            ordered_json::parse(R"({" Hello": -0.5, " a": -1.0, " b": -2.0})"));
  EXPECT_EQ(lp["top_logprobs"][2],
            ordered_json::parse(R"({"!": -9999.0, " a": -1.0, " b": -2.0})"));
}

TEST_F(OpenAiResponseTest, CompletionsLogprobsZeroHasTheChosenTokenOnly) {
  OpenAiResponseFormatter f = Formatter(OpenAiEndpoint::kCompletions, false, /*logprobs=*/0);
  f.Add(Response(" Hello", {" Hello"}, "length", 0));
  const ordered_json lp = f.Final()["choices"][0]["logprobs"];
  EXPECT_EQ(lp["top_logprobs"], ordered_json::parse(R"([{" Hello": -0.5}])"));
}

TEST_F(OpenAiResponseTest, StreamedCompletionsLogprobsContinueTheTextOffset) {
  OpenAiResponseFormatter f = Formatter(OpenAiEndpoint::kCompletions, true, 1);
  std::vector<ordered_json> a = f.StreamChunks(Response(" Hello", {" Hello"}, "", 1));
  std::vector<ordered_json> b = f.StreamChunks(Response(" world", {" world"}, "length", 1));
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[0]["choices"][0]["logprobs"]["text_offset"], ordered_json::parse("[0]"));
  EXPECT_EQ(b[0]["choices"][0]["logprobs"]["text_offset"], ordered_json::parse("[6]"));
  EXPECT_EQ(b[0]["choices"][0]["logprobs"]["tokens"], ordered_json::parse(R"([" world"])"));
}

TEST_F(OpenAiResponseTest, ChatLogprobs) {
  OpenAiResponseFormatter f = Formatter(OpenAiEndpoint::kChatCompletions, false, 2);
  f.Add(Response(" Hello", {" Hello"}, "", 3));
  f.Add(Response(" world", {" world"}, "stop", 3));
  const ordered_json content = f.Final()["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 2u);
  EXPECT_EQ(content[0]["token"], " Hello");
  EXPECT_EQ(content[0]["logprob"], -0.5);
  EXPECT_EQ(content[0]["bytes"], ordered_json::parse("[32, 72, 101, 108, 108, 111]"));
  EXPECT_EQ(content[0]["top_logprobs"],
            ordered_json::parse(R"([{"token": " a", "logprob": -1.0, "bytes": [32, 97]},
                           {"token": " b", "logprob": -2.0, "bytes": [32, 98]}])"));
  EXPECT_EQ(content[1]["token"], " world");

  // logprobs: true without top_logprobs: the chosen token and an empty top_logprobs.
  OpenAiResponseFormatter g = Formatter(OpenAiEndpoint::kChatCompletions, false, 0);
  g.Add(Response(" Hello", {" Hello"}, "stop", 3));
  EXPECT_EQ(g.Final()["choices"][0]["logprobs"]["content"][0]["top_logprobs"],
            ordered_json::array());
}

TEST_F(OpenAiResponseTest, ChatLogprobBytesOfAPartialCharacter) {
  // "日本" is several byte-level tokens; each token's bytes are its raw UTF-8 bytes.
  std::vector<TokenId> ids = tokenizer_->Encode("日本語", false);
  OpenAiResponseFormatter f = Formatter(OpenAiEndpoint::kChatCompletions, false, 0);
  v1::GenerateResponse r;
  r.set_text("日本語");
  for (TokenId id : ids) r.add_tokens()->set_id(id);
  r.set_finish_reason("stop");
  f.Add(r);
  std::vector<int> bytes;
  const ordered_json out = f.Final();
  for (const ordered_json& entry : out["choices"][0]["logprobs"]["content"]) {
    for (const ordered_json& b : entry["bytes"]) bytes.push_back(b.get<int>());
  }
  const std::string expected = "日本語";
  ASSERT_EQ(bytes.size(), expected.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    EXPECT_EQ(bytes[i], static_cast<unsigned char>(expected[i]));
  }
}

TEST_F(OpenAiResponseTest, CompletionsChunks) {
  OpenAiResponseFormatter f = Formatter(OpenAiEndpoint::kCompletions, true);
  std::vector<ordered_json> first = f.StreamChunks(Response(" Hello", {" Hello"}));
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0]["object"], "text_completion");
  EXPECT_EQ(first[0]["id"], "cmpl-req-1");
  EXPECT_EQ(first[0]["model"], "llama");
  EXPECT_EQ(first[0]["created"], 1700000000);
  EXPECT_EQ(first[0]["choices"][0]["text"], " Hello");
  EXPECT_TRUE(first[0]["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(first[0]["choices"][0]["logprobs"].is_null());
  EXPECT_FALSE(first[0].contains("usage"));  // only with include_usage

  // A response with nothing in it becomes no chunk.
  EXPECT_TRUE(f.StreamChunks(v1::GenerateResponse()).empty());
  // Tokens whose text is held back (an incomplete UTF-8 character) still make a chunk.
  std::vector<ordered_json> held = f.StreamChunks(Response("", {" world"}));
  ASSERT_EQ(held.size(), 1u);
  EXPECT_EQ(held[0]["choices"][0]["text"], "");

  std::vector<ordered_json> last = f.StreamChunks(Response("!", {"!"}, "length"));
  ASSERT_EQ(last.size(), 1u);  // no usage chunk without include_usage
  EXPECT_EQ(last[0]["choices"][0]["finish_reason"], "length");
}

TEST_F(OpenAiResponseTest, IncludeUsageAddsAFinalUsageChunk) {
  OpenAiResponseFormatter f =
      Formatter(OpenAiEndpoint::kCompletions, true, -1, /*include_usage=*/true);
  std::vector<ordered_json> a = f.StreamChunks(Response(" Hello", {" Hello"}));
  ASSERT_EQ(a.size(), 1u);
  ASSERT_TRUE(a[0].contains("usage"));
  EXPECT_TRUE(a[0]["usage"].is_null());
  std::vector<ordered_json> b = f.StreamChunks(Response("!", {"!"}, "stop"));
  ASSERT_EQ(b.size(), 2u);
  EXPECT_TRUE(b[0]["usage"].is_null());
  EXPECT_EQ(b[0]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(b[1]["object"], "text_completion");
  EXPECT_EQ(b[1]["choices"], ordered_json::array());
  EXPECT_EQ(b[1]["usage"]["prompt_tokens"], 4);
  EXPECT_EQ(b[1]["usage"]["completion_tokens"], 3);
  EXPECT_EQ(b[1]["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
}

TEST_F(OpenAiResponseTest, ChatChunksStartWithTheAssistantRole) {
  OpenAiResponseFormatter f =
      Formatter(OpenAiEndpoint::kChatCompletions, true, -1, /*include_usage=*/true);
  std::vector<ordered_json> a = f.StreamChunks(Response("Hi", {"Hi"}));
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[0]["object"], "chat.completion.chunk");
  EXPECT_EQ(a[0]["id"], "chatcmpl-req-1");
  EXPECT_EQ(a[0]["choices"][0]["delta"],
            ordered_json::parse(R"({"role": "assistant", "content": ""})"));
  EXPECT_TRUE(a[0]["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(a[0]["usage"].is_null());
  EXPECT_EQ(a[1]["choices"][0]["delta"], ordered_json::parse(R"({"content": "Hi"})"));
  EXPECT_TRUE(a[1]["choices"][0]["logprobs"].is_null());

  std::vector<ordered_json> b = f.StreamChunks(Response("", {}, "stop"));
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0]["choices"][0]["delta"], ordered_json::object());
  EXPECT_EQ(b[0]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(b[1]["object"], "chat.completion.chunk");
  EXPECT_EQ(b[1]["choices"], ordered_json::array());
  EXPECT_EQ(b[1]["usage"]["total_tokens"], 7);
}

TEST_F(OpenAiResponseTest, ChatChunkLogprobs) {
  OpenAiResponseFormatter f = Formatter(OpenAiEndpoint::kChatCompletions, true, 1);
  std::vector<ordered_json> a = f.StreamChunks(Response(" Hello", {" Hello"}, "", 2));
  ASSERT_EQ(a.size(), 2u);
  const ordered_json& content = a[1]["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 1u);
  EXPECT_EQ(content[0]["token"], " Hello");
  EXPECT_EQ(content[0]["top_logprobs"].size(), 1u);
}

TEST_F(OpenAiResponseTest, ReturnTokenIdsCompletions) {
  OpenAiResponseFormatter s = Formatter(OpenAiEndpoint::kCompletions, true, -1, false, true);
  v1::GenerateResponse first = Response(" Hello", {" Hello"});
  first.add_prompt_token_ids(1);
  first.add_prompt_token_ids(2);
  std::vector<ordered_json> a = s.StreamChunks(first);
  std::vector<ordered_json> b = s.StreamChunks(Response(" world", {" world"}, "length"));
  EXPECT_EQ(a[0]["choices"][0]["prompt_token_ids"], ordered_json::parse("[1, 2]"));
  EXPECT_EQ(a[0]["choices"][0]["token_ids"], ordered_json::array({Id(" Hello")}));
  EXPECT_TRUE(b[0]["choices"][0]["prompt_token_ids"].is_null());
  EXPECT_EQ(b[0]["choices"][0]["token_ids"], ordered_json::array({Id(" world")}));

  OpenAiResponseFormatter f = Formatter(OpenAiEndpoint::kCompletions, false, -1, false, true);
  f.Add(first);
  f.Add(Response(" world", {" world"}, "length"));
  const ordered_json c = f.Final()["choices"][0];
  EXPECT_EQ(c["prompt_token_ids"], ordered_json::parse("[1, 2]"));
  EXPECT_EQ(c["token_ids"], ordered_json::array({Id(" Hello"), Id(" world")}));
}

TEST_F(OpenAiResponseTest, ReturnTokenIdsChat) {
  v1::GenerateResponse first = Response("Hi", {"Hi"}, "stop");
  first.add_prompt_token_ids(7);
  // vLLM puts the chat prompt's ids on the response (the first chunk), the output's on the
  // choice.
  OpenAiResponseFormatter f = Formatter(OpenAiEndpoint::kChatCompletions, false, -1, false, true);
  f.Add(first);
  const ordered_json out = f.Final();
  EXPECT_EQ(out["prompt_token_ids"], ordered_json::parse("[7]"));
  EXPECT_EQ(out["choices"][0]["token_ids"], ordered_json::array({Id("Hi")}));

  OpenAiResponseFormatter s = Formatter(OpenAiEndpoint::kChatCompletions, true, -1, false, true);
  std::vector<ordered_json> chunks = s.StreamChunks(first);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0]["prompt_token_ids"], ordered_json::parse("[7]"));
  EXPECT_EQ(chunks[1]["choices"][0]["token_ids"], ordered_json::array({Id("Hi")}));
}

TEST_F(OpenAiResponseTest, LogprobsAskedForButNoTokensAreEmptyLists) {
  OpenAiResponseFormatter f = Formatter(OpenAiEndpoint::kCompletions, false, 1);
  f.Add(Response("", {}, "stop"));
  EXPECT_EQ(f.Final()["choices"][0]["logprobs"]["tokens"], ordered_json::array());
  OpenAiResponseFormatter g = Formatter(OpenAiEndpoint::kChatCompletions, false, 1);
  g.Add(Response("", {}, "stop"));
  EXPECT_EQ(g.Final()["choices"][0]["logprobs"]["content"], ordered_json::array());
}

}  // namespace
}  // namespace tandem
