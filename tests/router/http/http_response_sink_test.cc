// The HTTP ResponseSink against a fake connection: SSE events out, backpressure (Write blocks
// while too much is unwritten; BytesWritten, Abort, a closed client and Cancel release it), and
// what Finish leaves to send: the [DONE] tail, an error event after the stream began, or a whole
// JSON body (the completion, or an error with its status).
#include "router/http/http_response_sink.h"

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/test_model_dir.h"

namespace tandem {
namespace {

using ordered_json = nlohmann::ordered_json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

class FakeOutput : public StreamOutput {
 public:
  void SendStreamData(std::string data) override {
    absl::MutexLock lock(&mu_);
    data_.push_back(std::move(data));
  }
  void CloseConnection() override { ++closes_; }

  std::vector<std::string> data() const {
    absl::MutexLock lock(&mu_);
    return data_;
  }
  int closes() const { return closes_.load(); }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> data_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> closes_{0};
};

class HttpResponseSinkTest : public ::testing::Test {
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

  std::unique_ptr<HttpResponseSink> Sink(bool stream, int64_t max_queued = 1 << 20) {
    OpenAiOutputOptions o;
    o.endpoint = OpenAiEndpoint::kCompletions;
    o.stream = stream;
    return std::make_unique<HttpResponseSink>(o, *tokenizer_, "cmpl-1", "llama", 1700000000,
                                              output_, max_queued);
  }

  static v1::GenerateResponse Text(const std::string& text, const std::string& finish = "") {
    v1::GenerateResponse r;
    r.set_text(text);
    r.add_tokens()->set_id(100);
    r.set_finish_reason(finish);
    if (!finish.empty()) r.mutable_usage()->set_completion_tokens(2);
    return r;
  }

  // Starts a write: its result, empty while it waits for the connection to catch up.
  static std::shared_ptr<std::optional<bool>> StartWrite(HttpResponseSink& sink,
                                                         const v1::GenerateResponse& response) {
    auto result = std::make_shared<std::optional<bool>>();
    sink.Write(response, [result](bool ok) { *result = ok; });
    return result;
  }
  // A write that completes at once: its result.
  static bool Write(HttpResponseSink& sink, const v1::GenerateResponse& response) {
    std::shared_ptr<std::optional<bool>> result = StartWrite(sink, response);
    EXPECT_TRUE(result->has_value()) << "the write did not complete at once";
    return result->value_or(false);
  }

  static Tokenizer* tokenizer_;
  std::shared_ptr<FakeOutput> output_ = std::make_shared<FakeOutput>();
};

Tokenizer* HttpResponseSinkTest::tokenizer_ = nullptr;

TEST_F(HttpResponseSinkTest, StreamsSseEventsAndEndsWithDone) {
  auto sink = Sink(true);
  EXPECT_TRUE(Write(*sink, Text(" Hello")));
  EXPECT_TRUE(Write(*sink, Text(" world", "length")));
  std::vector<std::string> data = output_->data();
  ASSERT_EQ(data.size(), 2u);
  EXPECT_THAT(data[0], StartsWith("data: {"));
  EXPECT_EQ(data[0].substr(data[0].size() - 2), "\n\n");
  const ordered_json first = ordered_json::parse(data[0].substr(6));
  EXPECT_EQ(first["choices"][0]["text"], " Hello");
  EXPECT_EQ(sink->queued_bytes(), static_cast<int64_t>(data[0].size() + data[1].size()));

  FinalResponse final = sink->Finish(grpc::Status::OK);
  EXPECT_EQ(final.kind, FinalResponse::Kind::kStreamTail);
  EXPECT_EQ(final.body, "data: [DONE]\n\n");
  EXPECT_FALSE(sink->ClientGone());
}

TEST_F(HttpResponseSinkTest, AWriteCompletesOnlyOnceTheConnectionCatchesUp) {
  auto sink = Sink(true, /*max_queued=*/10);
  std::shared_ptr<std::optional<bool>> a = StartWrite(*sink, Text("a"));  // over the limit now
  EXPECT_FALSE(a->has_value());
  EXPECT_EQ(output_->data().size(), 1u);  // sent; the runner waits before the next
  sink->BytesWritten(sink->queued_bytes());
  ASSERT_TRUE(a->has_value());
  EXPECT_TRUE(**a);
  EXPECT_FALSE(StartWrite(*sink, Text("b"))->has_value());
  EXPECT_EQ(output_->data().size(), 2u);
}

TEST_F(HttpResponseSinkTest, AbortReleasesABlockedWriteAndDropsTheStream) {
  auto sink = Sink(true, 10);
  std::shared_ptr<std::optional<bool>> a = StartWrite(*sink, Text("a"));
  ASSERT_FALSE(a->has_value());
  sink->Abort();
  ASSERT_TRUE(a->has_value());
  EXPECT_FALSE(**a);
  EXPECT_EQ(output_->closes(), 1);  // the client stopped reading: nothing more reaches it
  EXPECT_EQ(output_->data().size(), 1u);
  EXPECT_FALSE(Write(*sink, Text("c")));
}

TEST_F(HttpResponseSinkTest, AClosedClientReleasesWritesAndCountsAsGone) {
  auto sink = Sink(true, 10);
  std::shared_ptr<std::optional<bool>> a = StartWrite(*sink, Text("a"));
  ASSERT_FALSE(a->has_value());
  EXPECT_FALSE(sink->ClientGone());
  sink->ClientClosed();
  ASSERT_TRUE(a->has_value());
  EXPECT_FALSE(**a);
  EXPECT_TRUE(sink->ClientGone());
  EXPECT_EQ(sink->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "gone")).kind,
            FinalResponse::Kind::kNothing);
}

TEST_F(HttpResponseSinkTest, CancelMakesTheClientGoneAndClosesTheConnection) {
  auto sink = Sink(false);
  sink->Cancel();
  EXPECT_TRUE(sink->ClientGone());
  EXPECT_EQ(output_->closes(), 1);
  EXPECT_FALSE(Write(*sink, Text("a")));
}

TEST_F(HttpResponseSinkTest, AnErrorBeforeAnyOutputIsAJsonErrorWithItsStatus) {
  auto sink = Sink(true);
  FinalResponse final =
      sink->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "too many requests"));
  EXPECT_EQ(final.kind, FinalResponse::Kind::kComplete);
  EXPECT_EQ(final.status, 429);
  EXPECT_TRUE(final.retry_after);
  const ordered_json body = ordered_json::parse(final.body);
  EXPECT_EQ(body["error"]["message"], "too many requests");
  EXPECT_TRUE(output_->data().empty());  // no stream header went out
}

TEST_F(HttpResponseSinkTest, AnErrorAfterTheStreamBeganIsAnErrorEvent) {
  auto sink = Sink(true);
  ASSERT_TRUE(Write(*sink, Text(" Hello")));
  FinalResponse final =
      sink->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "decode node broke"));
  EXPECT_EQ(final.kind, FinalResponse::Kind::kStreamTail);
  ASSERT_THAT(final.body, StartsWith("data: {\"error\""));
  const size_t end = final.body.find("\n\n");
  const ordered_json event = ordered_json::parse(final.body.substr(6, end - 6));
  EXPECT_EQ(event["error"]["message"], "decode node broke");
  EXPECT_EQ(event["error"]["type"], "server_error");
  // Then [DONE], as vLLM ends its streams after an error event.
  EXPECT_EQ(final.body.substr(end + 2), "data: [DONE]\n\n");
}

TEST_F(HttpResponseSinkTest, NonStreamingCollectsOneBody) {
  auto sink = Sink(false);
  EXPECT_TRUE(Write(*sink, Text(" Hello")));
  EXPECT_TRUE(Write(*sink, Text(" world", "stop")));
  EXPECT_TRUE(output_->data().empty());
  FinalResponse final = sink->Finish(grpc::Status::OK);
  EXPECT_EQ(final.kind, FinalResponse::Kind::kComplete);
  EXPECT_EQ(final.status, 200);
  const ordered_json body = ordered_json::parse(final.body);
  EXPECT_EQ(body["choices"][0]["text"], " Hello world");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
}

TEST_F(HttpResponseSinkTest, NonStreamingErrorAfterOutputIsStillAnError) {
  auto sink = Sink(false);
  EXPECT_TRUE(Write(*sink, Text(" Hello")));
  sink->Abort();  // the deadline passed: the runner stops writing, the 504 still goes out
  EXPECT_EQ(output_->closes(), 0);
  EXPECT_FALSE(Write(*sink, Text(" world")));
  FinalResponse final = sink->Finish(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "late"));
  EXPECT_EQ(final.kind, FinalResponse::Kind::kComplete);
  EXPECT_EQ(final.status, 504);
  EXPECT_FALSE(final.retry_after);
  EXPECT_THAT(final.body, HasSubstr("late"));
}

}  // namespace
}  // namespace tandem
