// The node protocol without the router: Reserve on a decode node, Prefill on a prefill node with
// the handoff it returned, and the decode node's stream carries the tokens (over real UCX).
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/cluster/local_cluster_fixture.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {
namespace {

class NodeHandoffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = TestModelDir("llama");
    ASSERT_EQ(MissingBinaries({"tandem-prefill", "tandem-decode"}), "");
    spec_.model_dir = model_;
    spec_.node_args = {
        "--max-num-batched-tokens", "16", "--max-num-seqs", "8", "--kv-cache-mb", "8"};
    ASSERT_NO_FATAL_FAILURE(StartNodes());
  }
  void StartNodes() {
    cluster_ = std::make_unique<LocalCluster>();
    cluster_->SetSpec(spec_);
    auto d = cluster_->StartDecode(0);
    ASSERT_TRUE(d.ok()) << d.status();
    auto p = cluster_->StartPrefill(0);
    ASSERT_TRUE(p.ok()) << p.status();
    decode_ = v1::DecodeNode::NewStub(grpc::CreateChannel(*d, grpc::InsecureChannelCredentials()));
    prefill_ =
        v1::PrefillNode::NewStub(grpc::CreateChannel(*p, grpc::InsecureChannelCredentials()));
  }

  std::string model_;
  ClusterSpec spec_;
  std::unique_ptr<LocalCluster> cluster_;
  std::unique_ptr<v1::DecodeNode::Stub> decode_;
  std::unique_ptr<v1::PrefillNode::Stub> prefill_;
};

TEST_F(NodeHandoffTest, ReservePrefillDecode) {
  std::vector<int> prompt;
  for (int i = 0; i < 45; ++i) prompt.push_back(1000 + i * 7);
  v1::ReserveRequest reserve;
  reserve.mutable_prompt_token_ids()->Assign(prompt.begin(), prompt.end());
  reserve.mutable_sampling()->set_temperature(0);
  reserve.mutable_sampling()->set_max_tokens(6);
  reserve.mutable_sampling()->set_ignore_eos(true);
  reserve.set_request_id("r1");
  grpc::ClientContext decode_context;
  decode_context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  auto stream = decode_->Reserve(&decode_context, reserve);
  v1::DecodeEvent event;
  ASSERT_TRUE(stream->Read(&event)) << stream->Finish().error_message();
  ASSERT_TRUE(event.has_handoff());
  EXPECT_EQ(event.handoff().block_ids_size(), 3);  // 45 tokens, blocks of 16
  EXPECT_GT(event.handoff().lease_remaining_ms(), 0);

  v1::PrefillRequest prefill;
  prefill.mutable_prompt_token_ids()->Assign(prompt.begin(), prompt.end());
  *prefill.mutable_sampling() = reserve.sampling();
  *prefill.mutable_handoff() = event.handoff();
  prefill.set_request_id("r1");
  grpc::ClientContext prefill_context;
  prefill_context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  v1::PrefillResponse response;
  grpc::Status status = prefill_->Prefill(&prefill_context, prefill, &response);
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << cluster_->Logs();
  EXPECT_GT(response.bytes_transferred(), 0);
  EXPECT_GT(response.num_writes(), 0);

  std::vector<int> tokens;
  std::string finish;
  while (stream->Read(&event)) {
    for (const v1::Token& t : event.tokens()) tokens.push_back(t.id());
    if (!event.finish_reason().empty()) finish = event.finish_reason();
  }
  status = stream->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message() << "\n" << cluster_->Logs();
  EXPECT_EQ(finish, "length");
  ASSERT_EQ(tokens.size(), 6u);
  EXPECT_EQ(tokens[0], response.first_token().id());

  // The same request on the decode node alone (local prefill) gives the same tokens.
  v1::NodeGenerateRequest local;
  local.mutable_prompt_token_ids()->Assign(prompt.begin(), prompt.end());
  *local.mutable_sampling() = reserve.sampling();
  grpc::ClientContext local_context;
  auto local_stream = decode_->Generate(&local_context, local);
  std::vector<int> local_tokens;
  while (local_stream->Read(&event)) {
    for (const v1::Token& t : event.tokens()) local_tokens.push_back(t.id());
  }
  ASSERT_TRUE(local_stream->Finish().ok());
  EXPECT_EQ(tokens, local_tokens);
}

}  // namespace
}  // namespace tandem::testing
