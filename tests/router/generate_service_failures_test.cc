// The Generation service when things fail, in-process, against fake node servers on loopback:
// retries before the first token and none after it, nodes dying mid-stream, cancellation
// reaching the nodes, the client's deadline, the request and first-token timeouts.
#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/kv/block_hash.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"
#include "gtest/gtest.h"
#include "router/node_probe.h"
#include "tests/router/generate_service_fixture.h"

namespace tandem {
namespace {

using ::testing::Contains;
using testing::DecodeScript;
using ::testing::ElementsAreArray;
using testing::GenerateServiceTest;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::PrefillBehavior;
using testing::RunGenerate;
using testing::StreamResult;
using testing::TestRouterOptions;
using testing::WaitUntil;

TEST_F(GenerateServiceTest, RetriesOnAnotherPrefillNodeWhenPrefillFails) {
  p1_.SetBehavior(
      PrefillBehavior{.error = grpc::Status(grpc::StatusCode::UNAVAILABLE, "prefill broke")});
  p1_.SetLoad(/*queued_tokens=*/0);
  p2_.SetLoad(/*queued_tokens=*/5000);  // least_loaded tries p1 first
  const std::string output = " fine";
  d1_.SetScript(Script(output));
  RouterOptions o = TestRouterOptions({p1_.address(), p2_.address()}, {d1_.address()});
  o.placement.policy = PlacementPolicy::kLeastLoaded;
  StartRouter(o);
  StreamResult r = RunGenerate(*stub_, TextRequest("Hi", "retry-p"));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.text(), output);
  EXPECT_EQ(r.token_ids(), Encode(output));  // tokens sent once
  EXPECT_EQ(p1_.prefill_calls(), 1);
  EXPECT_EQ(p2_.prefill_calls(), 1);
  ASSERT_EQ(d1_.reserve_calls(), 2);
  const std::string first_id = d1_.reserves()[0].request_id();
  EXPECT_EQ(d1_.reserves()[1].request_id(), first_id + "#1");
  // The first reservation was given back.
  EXPECT_TRUE(WaitUntil([&] { return d1_.cancelled_streams() == 1; }));
  EXPECT_TRUE(WaitUntil([&] {
    auto c = d1_.cancel_rpcs();
    return std::find(c.begin(), c.end(), first_id) != c.end();
  }));
  EXPECT_EQ(counters().retries_for(RetryReason::kPrefillFailed), 1);
  EXPECT_EQ(counters().disaggregated.load(), 2);
  // UNAVAILABLE marked p1 down (until its next health check passes).
  EXPECT_GE(router_->pool().counters().marked_down.load(), 1);
}

TEST_F(GenerateServiceTest, RetriesOnAnotherDecodeNodeWhenReserveFails) {
  DecodeScript failing;
  failing.fail_at_start = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "no KV blocks");
  d1_.SetScript(failing);
  d1_.SetLoad(/*free_kv_blocks=*/5000);  // least_loaded tries d1 first
  d2_.SetLoad(/*free_kv_blocks=*/100);
  d2_.SetScript(Script(" ok"));
  RouterOptions o = TestRouterOptions({p1_.address()}, {d1_.address(), d2_.address()});
  o.placement.policy = PlacementPolicy::kLeastLoaded;
  StartRouter(o);
  StreamResult r = RunGenerate(*stub_, TextRequest("Hi"));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.text(), " ok");
  EXPECT_EQ(d1_.reserve_calls(), 1);
  EXPECT_EQ(d2_.reserve_calls(), 1);
  EXPECT_EQ(p1_.prefill_calls(), 1);  // only for the attempt that reserved
  EXPECT_EQ(counters().retries_for(RetryReason::kReserveFailed), 1);
  // RESOURCE_EXHAUSTED is the node being full, not gone: it stays up.
  EXPECT_TRUE(PoolNode(NodeRole::kDecode, d1_.address())->up());
}

TEST_F(GenerateServiceTest, RetriesWhenTheDecodeStreamFailsBeforeTheFirstToken) {
  DecodeScript broken = Script(" never");
  broken.fail_after_tokens = 0;
  d1_.SetScript(broken);
  d1_.SetLoad(5000);
  d2_.SetLoad(100);
  d2_.SetScript(Script(" second"));
  RouterOptions o = TestRouterOptions({p1_.address()}, {d1_.address(), d2_.address()});
  o.placement.policy = PlacementPolicy::kLeastLoaded;
  StartRouter(o);
  StreamResult r = RunGenerate(*stub_, TextRequest("Hi"));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.text(), " second");
  EXPECT_EQ(p1_.prefill_calls(), 2);
  EXPECT_EQ(counters().retries_for(RetryReason::kDecodeFailed), 1);
}

TEST_F(GenerateServiceTest, AFailureAfterTokensMigratesToTheOtherDecodeNode) {
  DecodeOneDiesAfterTwoTokens();
  StartRouter(TestRouterOptions({p1_.address()}, {d1_.address(), d2_.address()}));
  StreamResult r = RunGenerate(*stub_, TextRequest("Hi"));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(d1_.reserve_calls(), 1);
  EXPECT_EQ(d2_.reserve_calls(), 0);
  ASSERT_EQ(d2_.generate_calls(), 1);  // recomputed there: prompt + the two tokens
  const v1::NodeGenerateRequest resumed = d2_.generates()[0];
  EXPECT_EQ(resumed.resumed_output_token_ids_size(), 2);
  const std::vector<int32_t> sent = r.token_ids();
  ASSERT_GE(sent.size(), 2u);
  EXPECT_EQ(resumed.resumed_output_token_ids(0), sent[0]);
  EXPECT_EQ(resumed.resumed_output_token_ids(1), sent[1]);
  EXPECT_EQ(counters().migrations_for(MigrationReason::kNodeUnreachable), 1);
  EXPECT_EQ(counters().failed_after_first_token.load(), 0);
  EXPECT_EQ(counters().retries_for(RetryReason::kDecodeFailed), 0);
}

TEST_F(GenerateServiceTest, WithoutMigrationNoRetryOnceATokenWasSent) {
  DecodeOneDiesAfterTwoTokens();
  RouterOptions options = TestRouterOptions({p1_.address()}, {d1_.address(), d2_.address()});
  options.migration_limit = 0;
  StartRouter(options);
  StreamResult r = RunGenerate(*stub_, TextRequest("Hi"));
  EXPECT_EQ(d1_.reserve_calls(), 1);
  EXPECT_EQ(d2_.reserve_calls(), 0);
  EXPECT_EQ(d2_.generate_calls(), 0);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  // The client hears the stage and the code; the node's own words and address stay in the log.
  EXPECT_THAT(r.status.error_message(), HasSubstr("decoding failed (UNAVAILABLE)"));
  EXPECT_THAT(r.status.error_message(), HasSubstr("(request id req-"));
  EXPECT_THAT(r.status.error_message(), Not(HasSubstr("decode node died")));
  EXPECT_THAT(r.status.error_message(), Not(HasSubstr(d1_.address())));
  EXPECT_EQ(r.token_ids().size(), 2u);
  EXPECT_EQ(counters().failed_after_first_token.load(), 1);
  EXPECT_EQ(counters().retries_for(RetryReason::kDecodeFailed), 0);
}

TEST_F(GenerateServiceTest, DecodeNodeDyingMidStreamMigratesTheStream) {
  DecodeScript script;
  script.tokens.assign(200, 1734);
  script.token_interval = absl::Milliseconds(10);
  d1_.SetScript(script);
  d1_.SetLoad(5000);  // picked first
  d2_.SetScript(Script(" other"));
  StartRouter(TestRouterOptions({p1_.address()}, {d1_.address(), d2_.address()}));
  std::thread killer;
  grpc::ClientContext ctx;
  StreamResult r = RunGenerate(*stub_, TextRequest("Hi"), &ctx, [&](size_t n) {
    if (n == 2) killer = std::thread([&] { d1_.Kill(); });
  });
  ASSERT_TRUE(killer.joinable()) << "the stream ended after " << r.token_ids().size()
                                 << " tokens: " << r.status.error_message();
  killer.join();
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(d2_.reserve_calls(), 0);  // never from the prompt once tokens were sent
  ASSERT_EQ(d2_.generate_calls(), 1);
  const v1::NodeGenerateRequest resumed = d2_.generates()[0];
  EXPECT_GE(resumed.resumed_output_token_ids_size(), 2);
  // The client got every token d1 streamed before it died, then d2's, each once.
  const std::vector<int32_t> sent = r.token_ids();
  ASSERT_GT(sent.size(), static_cast<size_t>(resumed.resumed_output_token_ids_size()));
  for (int i = 0; i < resumed.resumed_output_token_ids_size(); ++i) {
    EXPECT_EQ(sent[i], resumed.resumed_output_token_ids(i));
  }
  EXPECT_EQ(counters().failed_after_first_token.load(), 0);
  EXPECT_EQ(counters().migrations_for(MigrationReason::kNodeUnreachable), 1);
}

TEST_F(GenerateServiceTest, DecodeNodeDyingBeforeTheFirstTokenIsRetried) {
  // Long enough that the decode node's death cancels it even on a slow (sanitized) build.
  p1_.SetBehavior(PrefillBehavior{.delay = absl::Seconds(3)});
  d1_.SetLoad(5000);  // picked first
  d2_.SetScript(Script(" survived"));
  StartRouter(TestRouterOptions({p1_.address()}, {d1_.address(), d2_.address()}));
  std::thread killer([&] {
    WaitUntil([&] { return p1_.prefill_calls() == 1; });
    d1_.Kill();
  });
  StreamResult r = RunGenerate(*stub_, TextRequest("Hi"));
  killer.join();
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.text(), " survived");
  EXPECT_EQ(d2_.reserve_calls(), 1);
  EXPECT_EQ(counters().retries_for(RetryReason::kDecodeFailed), 1);
  // The abandoned prefill was cancelled.
  EXPECT_TRUE(WaitUntil([&] { return p1_.cancelled_calls() == 1; }));
}

TEST_F(GenerateServiceTest, GivesUpAfterMaxRetries) {
  p1_.SetBehavior(
      PrefillBehavior{.error = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "queue full")});
  RouterOptions o = TestRouterOptions({p1_.address()}, {d1_.address()});
  o.max_retries = 2;
  StartRouter(o);
  StreamResult r = RunGenerate(*stub_, TextRequest("Hi"));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(r.status.error_message(), HasSubstr("3 attempts"));
  EXPECT_THAT(r.status.error_message(), HasSubstr("prefill failed (RESOURCE_EXHAUSTED)"));
  EXPECT_THAT(r.status.error_message(), Not(HasSubstr(p1_.address())));
  EXPECT_TRUE(r.responses.empty());
  EXPECT_EQ(p1_.prefill_calls(), 3);
  EXPECT_EQ(d1_.reserve_calls(), 3);
  EXPECT_EQ(counters().retries_for(RetryReason::kPrefillFailed), 2);
  EXPECT_EQ(counters().requests_failed.load(), 1);
  // Every reservation was released.
  EXPECT_TRUE(WaitUntil([&] { return d1_.cancelled_streams() == 3; }));
}

TEST_F(GenerateServiceTest, NodeInvalidArgumentIsNotRetried) {
  DecodeScript script;
  script.fail_at_start = grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "prompt too long here");
  d1_.SetScript(script);
  StartRouter(TestRouterOptions({p1_.address()}, {d1_.address()}));
  StreamResult r = RunGenerate(*stub_, TextRequest("Hi"));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(r.status.error_message(), HasSubstr("prompt too long here"));
  EXPECT_EQ(d1_.reserve_calls(), 1);
}

TEST_F(GenerateServiceTest, ClientDisconnectCancelsTheDecodeNode) {
  DecodeScript script;
  script.tokens.assign(300, 1734);
  script.token_interval = absl::Milliseconds(10);
  d1_.SetScript(script);
  StartRouter(TestRouterOptions({p1_.address()}, {d1_.address()}));
  grpc::ClientContext ctx;
  StreamResult r = RunGenerate(*stub_, TextRequest("Hi", "gone-1"), &ctx, [&](size_t n) {
    if (n == 3) ctx.TryCancel();
  });
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitUntil([&] { return d1_.cancelled_streams() == 1; }));
  EXPECT_TRUE(WaitUntil([&] {
    auto c = d1_.cancel_rpcs();
    return std::find(c.begin(), c.end(), d1_.reserves()[0].request_id()) != c.end();
  }));
  EXPECT_TRUE(WaitUntil([&] { return counters().requests_cancelled.load() == 1; }));
}

TEST_F(GenerateServiceTest, ClientDisconnectDuringPrefillCancelsBothNodes) {
  p1_.SetBehavior(PrefillBehavior{.hang = true});
  StartRouter(TestRouterOptions({p1_.address()}, {d1_.address()}));
  grpc::ClientContext ctx;
  std::thread canceller([&] {
    WaitUntil([&] { return p1_.prefill_calls() == 1; });
    ctx.TryCancel();
  });
  StreamResult r = RunGenerate(*stub_, TextRequest("Hi", "gone-2"), &ctx, [](size_t) {});
  canceller.join();
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitUntil([&] { return p1_.cancelled_calls() == 1; }));
  EXPECT_TRUE(WaitUntil([&] { return d1_.cancelled_streams() == 1; }));
  EXPECT_TRUE(WaitUntil([&] {
    auto c = p1_.cancel_rpcs();
    return std::find(c.begin(), c.end(), p1_.prefills()[0].request_id()) != c.end();
  }));
}

TEST_F(GenerateServiceTest, TheClientsDeadlineBoundsTheRequest) {
  p1_.SetBehavior(PrefillBehavior{.hang = true});
  StartRouter(TestRouterOptions({p1_.address()}, {d1_.address()}));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  StreamResult r = RunGenerate(*stub_, TextRequest("Hi"), &ctx, [](size_t) {});
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(WaitUntil([&] { return p1_.cancelled_calls() == 1; }));
  EXPECT_TRUE(WaitUntil([&] { return d1_.cancelled_streams() == 1; }));
}

TEST_F(GenerateServiceTest, RequestTimeoutEndsAHungRequest) {
  p1_.SetBehavior(PrefillBehavior{.hang = true});
  RouterOptions o = TestRouterOptions({p1_.address()}, {d1_.address()});
  o.request_timeout_ms = 300;
  StartRouter(o);
  StreamResult r = RunGenerate(*stub_, TextRequest("Hi"));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_TRUE(WaitUntil([&] { return p1_.cancelled_calls() == 1; }));
}

TEST_F(GenerateServiceTest, FirstTokenTimeoutRetriesElsewhere) {
  p1_.SetBehavior(PrefillBehavior{.hang = true});
  p1_.SetLoad(0);
  p2_.SetLoad(5000);
  d1_.SetScript(Script(" late but fine"));
  RouterOptions o = TestRouterOptions({p1_.address(), p2_.address()}, {d1_.address()});
  o.placement.policy = PlacementPolicy::kLeastLoaded;
  o.first_token_timeout_ms = 300;
  StartRouter(o);
  StreamResult r = RunGenerate(*stub_, TextRequest("Hi"));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.text(), " late but fine");
  EXPECT_EQ(counters().retries_for(RetryReason::kFirstTokenTimeout), 1);
  EXPECT_TRUE(WaitUntil([&] { return p1_.cancelled_calls() == 1; }));
  EXPECT_EQ(p2_.prefill_calls(), 1);
}

}  // namespace
}  // namespace tandem
