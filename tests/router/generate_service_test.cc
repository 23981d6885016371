// The Generation service end to end, in-process, against fake prefill and decode node servers on
// loopback: disaggregated streaming (Reserve → handoff → Prefill → tokens), UTF-8-safe text,
// stop strings, colocated mode, conditional and prefix-aware placement, bad input. Failures
// (retries, nodes dying, cancellation, deadlines) are in generate_service_failures_test.cc.
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

bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (int k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

TEST_F(GenerateServiceTest, StreamsDisaggregatedRequestsWithDetokenizedText) {
  const std::string output = " The quick brown fox jumps over the lazy dog.";
  d1_.SetScript(Script(output));
  StartRouter(TestRouterOptions({p1_.address()}, {d1_.address()}));

  v1::GenerateRequest req = TextRequest("Once upon a time", "r1");
  req.mutable_sampling()->set_max_tokens(50);
  StreamResult r = RunGenerate(*stub_, req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();

  const std::vector<int32_t> out_ids = Encode(output);
  EXPECT_EQ(r.token_ids(), out_ids);
  EXPECT_EQ(r.text(), output);
  ASSERT_EQ(r.responses.size(), out_ids.size());  // one response per event
  const std::vector<int32_t> prompt = Encode("Once upon a time", true);
  EXPECT_THAT(r.responses.front().prompt_token_ids(), ElementsAreArray(prompt));
  for (size_t i = 0; i < r.responses.size(); ++i) {
    EXPECT_EQ(r.responses[i].request_id(), "r1");
    if (i > 0) {
      EXPECT_EQ(r.responses[i].prompt_token_ids_size(), 0);
    }
    if (i + 1 < r.responses.size()) {
      EXPECT_EQ(r.responses[i].finish_reason(), "");
    }
  }
  EXPECT_FLOAT_EQ(r.responses[0].tokens(0).logprob(), -0.25f);
  EXPECT_EQ(r.finish_reason(), "length");
  const v1::Usage& usage = r.responses.back().usage();
  EXPECT_EQ(usage.prompt_tokens(), static_cast<int>(prompt.size()));
  EXPECT_EQ(usage.completion_tokens(), static_cast<int>(out_ids.size()));

  // D reserved with the prompt, the lease and the sampling; P got D's handoff.
  ASSERT_EQ(d1_.reserve_calls(), 1);
  const v1::ReserveRequest reserve = d1_.reserves()[0];
  EXPECT_THAT(reserve.prompt_token_ids(), ElementsAreArray(prompt));
  // The nodes get the router's id, never the client's (issue 14 row 6).
  EXPECT_TRUE(reserve.request_id().starts_with("req-")) << reserve.request_id();
  EXPECT_EQ(reserve.lease_ms(), 30000);
  EXPECT_EQ(reserve.sampling().max_tokens(), 50);
  EXPECT_TRUE(reserve.sampling().has_seed());
  ASSERT_EQ(p1_.prefill_calls(), 1);
  const v1::PrefillRequest prefill = p1_.prefills()[0];
  EXPECT_THAT(prefill.prompt_token_ids(), ElementsAreArray(prompt));
  EXPECT_EQ(prefill.handoff().decode_incarnation(), d1_.incarnation());
  EXPECT_EQ(prefill.request_id(), reserve.request_id());
  // Both nodes draw from one random stream.
  EXPECT_EQ(prefill.sampling().seed(), reserve.sampling().seed());
  EXPECT_EQ(d1_.generate_calls(), 0);

  EXPECT_EQ(counters().disaggregated.load(), 1);
  EXPECT_EQ(counters().requests_ok.load(), 1);
  EXPECT_EQ(counters().requests.load(), 1);
}

TEST_F(GenerateServiceTest, TextStaysValidUtf8WhenCharactersSpanTokens) {
  const std::string output = " Llamas 🦙 love 日本語 ❤️!";
  d1_.SetScript(Script(output));
  StartRouter(TestRouterOptions({p1_.address()}, {d1_.address()}));
  StreamResult r = RunGenerate(*stub_, TextRequest("Hi"));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  bool some_held = false;
  for (const auto& resp : r.responses) {
    EXPECT_TRUE(IsValidUtf8(resp.text())) << resp.text();
    if (resp.tokens_size() > 0 && resp.text().empty()) some_held = true;
  }
  EXPECT_TRUE(some_held);  // bytes of a character waited for the rest of it
  EXPECT_EQ(r.text(), output);
}

TEST_F(GenerateServiceTest, StopStringEndsTheOutputAndCancelsTheDecodeNode) {
  DecodeScript script = Script(" Hello world, this is a test of stop strings and more text");
  script.token_interval = absl::Milliseconds(20);
  d1_.SetScript(script);
  StartRouter(TestRouterOptions({p1_.address()}, {d1_.address()}));
  v1::GenerateRequest req = TextRequest("Say hello", "stop-1");
  req.add_stop("is a");
  StreamResult r = RunGenerate(*stub_, req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.text(), " Hello world, this ");
  EXPECT_EQ(r.finish_reason(), "stop");
  EXPECT_LT(r.token_ids().size(), script.tokens.size());
  EXPECT_EQ(r.responses.back().usage().completion_tokens(), static_cast<int>(r.token_ids().size()));
  // The decode node stops generating: its stream is cancelled and it gets a Cancel.
  EXPECT_TRUE(WaitUntil([&] { return d1_.cancelled_streams() == 1; }));
  EXPECT_TRUE(WaitUntil([&] {
    auto c = d1_.cancel_rpcs();
    return std::find(c.begin(), c.end(), d1_.reserves()[0].request_id()) != c.end();
  }));
  EXPECT_EQ(counters().stop_string_hits.load(), 1);
}

TEST_F(GenerateServiceTest, IncludeStopStringInOutput) {
  d1_.SetScript(Script(" one two three four"));
  StartRouter(TestRouterOptions({p1_.address()}, {d1_.address()}));
  v1::GenerateRequest req = TextRequest("Count");
  req.add_stop(" three");
  req.set_include_stop_str_in_output(true);
  StreamResult r = RunGenerate(*stub_, req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.text(), " one two three");
  EXPECT_EQ(r.finish_reason(), "stop");
}

TEST_F(GenerateServiceTest, ColocatedModeGeneratesOnTheDecodeNode) {
  d1_.SetScript(Script(" colocated output"));
  RouterOptions o = TestRouterOptions({}, {d1_.address()});
  o.placement.mode = ServingMode::kColocated;
  StartRouter(o);
  StreamResult r = RunGenerate(*stub_, TextRequest("Hi", "colo"));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.text(), " colocated output");
  ASSERT_EQ(d1_.generate_calls(), 1);
  EXPECT_TRUE(d1_.generates()[0].request_id().starts_with("req-"));
  EXPECT_THAT(d1_.generates()[0].prompt_token_ids(), ElementsAreArray(Encode("Hi", true)));
  EXPECT_EQ(d1_.reserve_calls(), 0);
  EXPECT_EQ(p1_.prefill_calls(), 0);
  EXPECT_EQ(counters().colocated.load(), 1);
}

TEST_F(GenerateServiceTest, ColocatedRetriesOnAnotherDecodeNode) {
  DecodeScript failing;
  failing.fail_at_start = grpc::Status(grpc::StatusCode::UNAVAILABLE, "draining");
  d1_.SetScript(failing);
  d1_.SetLoad(5000);
  d2_.SetLoad(10);
  d2_.SetScript(Script(" from d2"));
  RouterOptions o = TestRouterOptions({}, {d1_.address(), d2_.address()});
  o.placement.mode = ServingMode::kColocated;
  o.placement.policy = PlacementPolicy::kLeastLoaded;
  StartRouter(o);
  StreamResult r = RunGenerate(*stub_, TextRequest("Hi"));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.text(), " from d2");
  EXPECT_EQ(counters().retries_for(RetryReason::kDecodeFailed), 1);
}

TEST_F(GenerateServiceTest, ShortPromptsPrefillOnTheDecodeNode) {
  d1_.SetScript(Script(" out"));
  RouterOptions o = TestRouterOptions({p1_.address()}, {d1_.address()});
  o.placement.local_prefill_threshold = 10;
  StartRouter(o);
  StreamResult short_prompt = RunGenerate(*stub_, TextRequest("Hi"));
  ASSERT_TRUE(short_prompt.status.ok()) << short_prompt.status.error_message();
  EXPECT_EQ(d1_.generate_calls(), 1);
  EXPECT_EQ(d1_.reserve_calls(), 0);

  v1::GenerateRequest long_prompt;
  for (int i = 0; i < 20; ++i) long_prompt.mutable_token_ids()->add_ids(1000 + i);
  StreamResult r = RunGenerate(*stub_, long_prompt);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(d1_.reserve_calls(), 1);
  EXPECT_EQ(p1_.prefill_calls(), 1);
  EXPECT_EQ(counters().local_prefill_short_prompt.load(), 1);
  EXPECT_EQ(counters().disaggregated.load(), 1);
}

TEST_F(GenerateServiceTest, PrefixAwarePlacementFollowsTheCache) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(2000 + i);
  std::vector<uint64_t> hashes = HashFullBlocks(prompt, 16);
  ASSERT_EQ(hashes.size(), 2u);
  p2_.StoreBlocks(hashes);  // p2 holds the first 32 tokens
  p1_.SetLoad(0);
  p2_.SetLoad(5000);  // but is busier
  d1_.SetScript(Script(" cached"));
  StartRouter(TestRouterOptions({p1_.address(), p2_.address()}, {d1_.address()}));
  ASSERT_TRUE(WaitUntil(
      [&] { return PoolNode(NodeRole::kPrefill, p2_.address())->num_cached_blocks() == 2; }));

  v1::GenerateRequest req;
  req.mutable_token_ids()->mutable_ids()->Assign(prompt.begin(), prompt.end());
  StreamResult r = RunGenerate(*stub_, req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(p2_.prefill_calls(), 1);
  EXPECT_EQ(p1_.prefill_calls(), 0);

  // Another prompt shares nothing: the less loaded p1 gets it.
  v1::GenerateRequest other;
  for (int i = 0; i < 40; ++i) other.mutable_token_ids()->add_ids(3000 + i);
  r = RunGenerate(*stub_, other);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(p1_.prefill_calls(), 1);
}

TEST_F(GenerateServiceTest, CachedPrefixMakesTheRestShortEnoughForLocalPrefill) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(2000 + i);
  p1_.StoreBlocks(HashFullBlocks(prompt, 16));  // 32 of 40 cached: 8 uncached
  d1_.SetScript(Script(" x"));
  RouterOptions o = TestRouterOptions({p1_.address()}, {d1_.address()});
  o.placement.local_prefill_threshold = 16;
  StartRouter(o);
  ASSERT_TRUE(WaitUntil(
      [&] { return PoolNode(NodeRole::kPrefill, p1_.address())->num_cached_blocks() == 2; }));
  v1::GenerateRequest req;
  req.mutable_token_ids()->mutable_ids()->Assign(prompt.begin(), prompt.end());
  StreamResult r = RunGenerate(*stub_, req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(d1_.generate_calls(), 1);
  EXPECT_EQ(p1_.prefill_calls(), 0);
  EXPECT_EQ(counters().local_prefill_short_prompt.load(), 1);
}

// Conversation affinity (issue 19): the cost policy watches the decode nodes' KV events and sends a
// prompt whose prefix a decode node holds there, where it computes only the rest; each request
// there counts as its in-flight work only the part it computes.
TEST_F(GenerateServiceTest, CostPolicySendsAPromptToTheDecodeNodeHoldingItsPrefix) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < 400; ++i) prompt.push_back(2000 + i);
  d2_.SetCachedBlocks(HashFullBlocks(prompt, 16));  // all 25 blocks; the last is recomputed
  for (testing::FakeDecodeNode* d : {&d1_, &d2_}) {
    d->SetStepCost(/*per_step_us=*/20000, /*per_token_us=*/500);
    d->SetScript(Script(" again"));
  }
  RouterOptions o = TestRouterOptions({}, {d1_.address(), d2_.address()});
  o.placement.mode = ServingMode::kColocated;
  o.placement.policy = PlacementPolicy::kCost;
  StartRouter(o);
  ASSERT_TRUE(WaitUntil(
      [&] { return PoolNode(NodeRole::kDecode, d2_.address())->num_cached_blocks() == 25; }));
  ASSERT_TRUE(WaitUntil([&] { return d1_.watch_streams() == 1; }));

  for (int i = 0; i < 3; ++i) {
    // The request before is in d2's load report (the fakes report no receipts: every report
    // retires this router's placements), so each sees the same nodes.
    ASSERT_TRUE(WaitUntil([&] {
      return PoolNode(NodeRole::kDecode, d2_.address())->snapshot().pending_requests == 0;
    }));
    v1::GenerateRequest req;
    req.mutable_token_ids()->mutable_ids()->Assign(prompt.begin(), prompt.end());
    req.mutable_sampling()->set_max_tokens(16);
    StreamResult r = RunGenerate(*stub_, req);
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  }
  EXPECT_EQ(d2_.generate_calls(), 3);
  EXPECT_EQ(d1_.generate_calls(), 0);
  EXPECT_EQ(counters().colocated.load(), 3);
}

TEST_F(GenerateServiceTest, NoPrefillNodeUpFallsBackToLocalPrefillAndCountsIt) {
  p1_.SetServing(false);
  d1_.SetScript(Script(" local"));
  StartRouterWithNodesDown(TestRouterOptions({p1_.address()}, {d1_.address()}));
  ASSERT_TRUE(WaitUntil([&] { return PoolNode(NodeRole::kDecode, d1_.address())->up(); }));
  StreamResult r = RunGenerate(*stub_, TextRequest("Hi"));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.text(), " local");
  EXPECT_EQ(d1_.generate_calls(), 1);
  EXPECT_EQ(counters().local_prefill_no_prefill_node.load(), 1);
}

TEST_F(GenerateServiceTest, NodesThatAreDownAreNotUsed) {
  d1_.SetScript(Script(" d1"));
  d2_.SetScript(Script(" d2"));
  RouterOptions o = TestRouterOptions({p1_.address()}, {d1_.address(), d2_.address()});
  o.placement.policy = PlacementPolicy::kRoundRobin;
  StartRouter(o);
  d1_.SetServing(false);
  ASSERT_TRUE(WaitUntil([&] { return !PoolNode(NodeRole::kDecode, d1_.address())->up(); }));
  for (int i = 0; i < 3; ++i) {
    StreamResult r = RunGenerate(*stub_, TextRequest("Hi"));
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.text(), " d2");
  }
  EXPECT_EQ(d1_.reserve_calls(), 0);
  // Back in service: used again.
  d1_.SetServing(true);
  ASSERT_TRUE(WaitUntil([&] { return PoolNode(NodeRole::kDecode, d1_.address())->up(); }));
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(RunGenerate(*stub_, TextRequest("Hi")).status.ok());
  EXPECT_EQ(d1_.reserve_calls(), 1);
}

TEST_F(GenerateServiceTest, NoDecodeNodeIsUnavailable) {
  d1_.Kill();
  StartRouterWithNodesDown(TestRouterOptions({p1_.address()}, {d1_.address()}));
  StreamResult r = RunGenerate(*stub_, TextRequest("Hi"));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(r.status.error_message(), HasSubstr("decode node"));
  EXPECT_EQ(counters().no_node_available.load(), 1);
}

TEST_F(GenerateServiceTest, BadInputIsInvalidArgumentAndTheServerKeepsServing) {
  d1_.SetScript(Script(" still here"));
  StartRouter(TestRouterOptions({p1_.address()}, {d1_.address()}));
  std::vector<v1::GenerateRequest> bad(5);
  bad[0].set_text("Hi");
  bad[0].set_model("some-other-model");
  // bad[1]: no prompt
  bad[2].set_text("Hi");
  bad[2].mutable_sampling()->set_temperature(-1);
  bad[3].mutable_token_ids()->add_ids(-3);
  bad[4].set_text("Hi");
  bad[4].add_stop("");
  for (const v1::GenerateRequest& req : bad) {
    StreamResult r = RunGenerate(*stub_, req);
    // A model this router does not serve is NOT_FOUND (HTTP 404); the rest is bad input.
    EXPECT_EQ(r.status.error_code(), req.model().empty() ? grpc::StatusCode::INVALID_ARGUMENT
                                                         : grpc::StatusCode::NOT_FOUND)
        << req.ShortDebugString() << ": " << r.status.error_message();
    EXPECT_TRUE(r.responses.empty());
  }
  EXPECT_EQ(counters().requests_invalid.load(), 5);
  EXPECT_EQ(d1_.reserve_calls(), 0);
  StreamResult r = RunGenerate(*stub_, TextRequest("Hi"));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.text(), " still here");
}

TEST_F(GenerateServiceTest, ChatRequestsUseTheTemplate) {
  d1_.SetScript(Script(" Hello!"));
  StartRouter(TestRouterOptions({p1_.address()}, {d1_.address()}));
  v1::GenerateRequest req;
  v1::ChatMessage* m = req.mutable_chat()->add_messages();
  m->set_role("user");
  m->set_content("Hi!");
  StreamResult r = RunGenerate(*stub_, req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  ASSERT_EQ(d1_.reserve_calls(), 1);
  const v1::ReserveRequest reserve = d1_.reserves()[0];
  const auto& ids = reserve.prompt_token_ids();
  EXPECT_EQ(ids[0], 128000);
  EXPECT_EQ(ids[ids.size() - 2], 128007);
}

TEST_F(GenerateServiceTest, ManyConcurrentRequests) {
  d1_.SetScript(Script(" parallel output one"));
  d2_.SetScript(Script(" parallel output one"));
  StartRouter(TestRouterOptions({p1_.address(), p2_.address()}, {d1_.address(), d2_.address()}));
  std::vector<std::future<StreamResult>> futures;
  for (int i = 0; i < 8; ++i) {
    futures.push_back(std::async(std::launch::async, [&, i] {
      return RunGenerate(*stub_, TextRequest("Prompt " + std::to_string(i)));
    }));
  }
  for (auto& f : futures) {
    StreamResult r = f.get();
    ASSERT_TRUE(r.status.ok()) << r.status.error_message();
    EXPECT_EQ(r.text(), " parallel output one");
  }
  EXPECT_EQ(counters().requests_ok.load(), 8);
  EXPECT_EQ(d1_.reserve_calls() + d2_.reserve_calls(), 8);
  EXPECT_EQ(p1_.prefill_calls() + p2_.prefill_calls(), 8);
}

TEST_F(GenerateServiceTest, RouterAnswersHealthChecks) {
  StartRouter(TestRouterOptions({p1_.address()}, {d1_.address()}));
  auto channel = grpc::CreateChannel(router_->address(), grpc::InsecureChannelCredentials());
  grpc::GenericStub generic(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Slice empty;
  grpc::ByteBuffer request(&empty, 1), response;
  std::promise<grpc::Status> done;
  generic.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                    [&](grpc::Status s) { done.set_value(s); });
  grpc::Status status = done.get_future().get();
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_EQ(ParseHealthCheckResponse(bytes), 1);  // SERVING
}

}  // namespace
}  // namespace tandem
