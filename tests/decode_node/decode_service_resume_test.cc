// Request migration at a decode node, over real gRPC (issue 17 item 1): a Generate that carries
// the first k tokens of an uninterrupted Generate and the rng_counter of its k-th event streams
// exactly that Generate's remaining tokens and counters (greedy and seeded sampling with
// penalties); a Reserve stream's events carry rng_counter too (continuing the prefill node's
// draws), and migrating one to a Generate continues it; resumed tokens outside the vocabulary are
// INVALID_ARGUMENT naming the field; resumed tokens that already end the request end it at once.
#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/decode_node/decode_test_node.h"

namespace tandem {
namespace {

using ::tandem::testing::DecodeNode;
using ::tandem::testing::DecodeStreamReader;
using ::tandem::testing::SendCompletion;
using ::tandem::testing::WriteKv;
using ::testing::HasSubstr;

constexpr int kResumeMaxTokens = 12;

std::vector<int> ResumePrompt() { return {3, 14, 15, 9, 26, 5, 35, 8, 9, 7}; }

void SetSampled(v1::SamplingParams* sampling) {
  sampling->set_temperature(0.8f);
  sampling->set_top_p(0.9f);
  sampling->set_seed(99);
  sampling->set_repetition_penalty(1.2f);
  sampling->set_frequency_penalty(0.5f);
}

v1::NodeGenerateRequest GenerateRequestFor(bool sampled) {
  v1::NodeGenerateRequest request =
      DecodeStreamReader::MakeRequest<v1::NodeGenerateRequest>(ResumePrompt(), kResumeMaxTokens);
  if (sampled) SetSampled(request.mutable_sampling());
  return request;
}

struct GenerateWith : DecodeStreamReader {
  GenerateWith(DecodeNode& node, const v1::NodeGenerateRequest& request) {
    reader = node.stub->Generate(&context, request);
  }
};

struct ReserveWith : DecodeStreamReader {
  ReserveWith(DecodeNode& node, const v1::ReserveRequest& request) {
    reader = node.stub->Reserve(&context, request);
  }
};

// What a stream delivered: its tokens, the rng_counter of the event of each, its end.
struct ResumedStream {
  std::vector<int> tokens;
  std::vector<uint64_t> rng_counters;
  std::string finish_reason;
  v1::Usage usage;
};

ResumedStream Collect(const std::vector<v1::DecodeEvent>& events) {
  ResumedStream s;
  for (const v1::DecodeEvent& event : events) {
    for (const v1::Token& token : event.tokens()) {
      s.tokens.push_back(token.id());
      s.rng_counters.push_back(event.rng_counter());
    }
    if (!event.finish_reason().empty()) {
      s.finish_reason = event.finish_reason();
      s.usage = event.usage();
    }
  }
  return s;
}

ResumedStream RunGenerate(DecodeNode& node, const v1::NodeGenerateRequest& request) {
  GenerateWith call(node, request);
  const grpc::Status status = call.Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  return Collect(call.events);
}

template <typename T>
std::vector<T> After(const std::vector<T>& v, int k) {
  return std::vector<T>(v.begin() + k, v.end());
}

v1::NodeGenerateRequest Resumed(v1::NodeGenerateRequest request, const ResumedStream& so_far,
                                int k) {
  request.mutable_resumed_output_token_ids()->Assign(so_far.tokens.begin(),
                                                     so_far.tokens.begin() + k);
  request.set_resumed_rng_counter(so_far.rng_counters[k - 1]);
  return request;
}

TEST(DecodeServiceResumeTest, ResumedGenerateContinuesLikeAnUninterruptedOne) {
  for (bool sampled : {false, true}) {
    SCOPED_TRACE(sampled ? "seeded sampling" : "greedy");
    DecodeNode node;
    const v1::NodeGenerateRequest request = GenerateRequestFor(sampled);
    const ResumedStream full = RunGenerate(node, request);
    ASSERT_EQ(full.tokens.size(), static_cast<size_t>(kResumeMaxTokens));
    EXPECT_EQ(full.finish_reason, "length");
    for (int i = 0; i < kResumeMaxTokens; ++i) {
      // Seeded sampling draws once per token; greedy never.
      EXPECT_EQ(full.rng_counters[i], sampled ? uint64_t(i + 1) : 0u) << "token " << i;
    }
    for (int k : {1, kResumeMaxTokens / 2, kResumeMaxTokens - 1}) {
      SCOPED_TRACE(::testing::Message() << "resumed after " << k << " tokens");
      // Another node than the one that ran it: only the request carries the state.
      DecodeNode other;
      const ResumedStream rest = RunGenerate(other, Resumed(request, full, k));
      EXPECT_EQ(rest.tokens, After(full.tokens, k));
      EXPECT_EQ(rest.rng_counters, After(full.rng_counters, k));
      EXPECT_EQ(rest.finish_reason, "length");
      EXPECT_EQ(rest.usage.prompt_tokens(), static_cast<int>(ResumePrompt().size()));
      EXPECT_EQ(rest.usage.completion_tokens(), kResumeMaxTokens);
    }
  }
}

TEST(DecodeServiceResumeTest, ReserveEventsCarryRngCounterAndMigrateToGenerate) {
  DecodeNode node;
  v1::ReserveRequest reserve =
      DecodeStreamReader::MakeRequest<v1::ReserveRequest>(ResumePrompt(), kResumeMaxTokens);
  SetSampled(reserve.mutable_sampling());
  ReserveWith call(node, reserve);
  v1::DecodeEvent first;
  ASSERT_TRUE(call.reader->Read(&first));
  ASSERT_TRUE(first.has_handoff());
  WriteKv(node.backend, first.handoff(), ResumePrompt());
  // The prefill node sampled token 7 after 5 draws (say): the decode node goes on from there.
  SendCompletion(first.handoff(), /*ok=*/true, /*first_token=*/7, /*rng_counter=*/5);
  const grpc::Status status = call.Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  const ResumedStream reserved = Collect(call.events);
  ASSERT_EQ(reserved.tokens.size(), static_cast<size_t>(kResumeMaxTokens));
  EXPECT_EQ(reserved.tokens[0], 7);
  for (int i = 0; i < kResumeMaxTokens; ++i) EXPECT_EQ(reserved.rng_counters[i], uint64_t(5 + i));

  // The decode node "fails" after 4 tokens: a Generate elsewhere continues the same stream.
  v1::NodeGenerateRequest generate = GenerateRequestFor(/*sampled=*/true);
  DecodeNode other;
  const ResumedStream rest = RunGenerate(other, Resumed(generate, reserved, 4));
  EXPECT_EQ(rest.tokens, After(reserved.tokens, 4));
  EXPECT_EQ(rest.rng_counters, After(reserved.rng_counters, 4));
  EXPECT_EQ(rest.usage.completion_tokens(), kResumeMaxTokens);
}

TEST(DecodeServiceResumeTest, ResumedTokensOutsideTheVocabularyAreInvalidArgument) {
  DecodeNode node;
  v1::NodeGenerateRequest request = GenerateRequestFor(/*sampled=*/false);
  const std::vector<int> bad = {4, kVocab + 1, 6};
  request.mutable_resumed_output_token_ids()->Assign(bad.begin(), bad.end());
  GenerateWith call(node, request);
  const grpc::Status status = call.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("resumed_output_token_ids[1] = 65"));
  EXPECT_TRUE(call.events.empty());
  // The router's id is free again: a corrected request is taken.
  request.mutable_resumed_output_token_ids()->Set(1, 5);
  EXPECT_EQ(RunGenerate(node, request).tokens.size(), static_cast<size_t>(kResumeMaxTokens - 3));
}

TEST(DecodeServiceResumeTest, ResumedTokensThatReachMaxTokensEndTheRequestAtOnce) {
  DecodeNode node;
  v1::NodeGenerateRequest request = GenerateRequestFor(/*sampled=*/false);
  request.mutable_sampling()->set_max_tokens(3);
  const std::vector<int> resumed = {4, 5, 6};
  request.mutable_resumed_output_token_ids()->Assign(resumed.begin(), resumed.end());
  GenerateWith call(node, request);
  const grpc::Status status = call.Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(call.events.size(), 1u);
  EXPECT_EQ(call.events[0].tokens_size(), 0);
  EXPECT_EQ(call.events[0].finish_reason(), "length");
  EXPECT_EQ(call.events[0].usage().completion_tokens(), 3);
  EXPECT_EQ(node.engine->Stats().num_generated_tokens, 0);
}

}  // namespace
}  // namespace tandem
