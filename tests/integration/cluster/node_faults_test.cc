// Failures around the KV handoff, on real processes: a prefill node killed in the middle of a
// transfer, a client that cancels while the prompt is prefilling and while tokens stream. Every
// case ends with an error or a cancel within its deadline, and the decode node's blocks return.
#include <signal.h>

#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/integration/cluster/local_cluster_fixture.h"
#include "tests/integration/test_model_dir.h"

namespace tandem::testing {
namespace {

bool AllBlocksFree(const v1::NodeLoad& load) {
  return load.num_free_kv_blocks() == load.num_kv_blocks() && load.num_held_kv_blocks() == 0 &&
         load.num_awaiting_kv() == 0;
}

class NodeFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(MissingBinaries({"tandem-prefill", "tandem-decode"}), "");
    spec_.model_dir = TestModelDir("llama");
    // Small chunks make a long prompt take many steps: time to act in the middle of it.
    spec_.node_args = {
        "--max-num-batched-tokens", "16", "--max-num-seqs", "8", "--kv-cache-mb", "16"};
    spec_.decode_args = {"--lease-ms", "3000"};
    cluster_.SetSpec(spec_);
    auto d = cluster_.StartDecode(0);
    ASSERT_TRUE(d.ok()) << d.status();
    auto p = cluster_.StartPrefill(0);
    ASSERT_TRUE(p.ok()) << p.status();
    decode_address_ = *d;
    decode_ = v1::DecodeNode::NewStub(grpc::CreateChannel(*d, grpc::InsecureChannelCredentials()));
    prefill_ =
        v1::PrefillNode::NewStub(grpc::CreateChannel(*p, grpc::InsecureChannelCredentials()));
  }

  static std::vector<int> LongPrompt(int n) {
    std::vector<int> prompt;
    for (int i = 0; i < n; ++i) prompt.push_back(500 + (i * 131) % 9000);
    return prompt;
  }

  v1::ReserveRequest Reserve(const std::vector<int>& prompt, int max_tokens) {
    v1::ReserveRequest reserve;
    reserve.mutable_prompt_token_ids()->Assign(prompt.begin(), prompt.end());
    reserve.mutable_sampling()->set_temperature(0);
    reserve.mutable_sampling()->set_max_tokens(max_tokens);
    reserve.mutable_sampling()->set_ignore_eos(true);
    reserve.set_request_id("fault");
    return reserve;
  }

  v1::PrefillRequest Prefill(const v1::ReserveRequest& reserve, const v1::KvHandoff& handoff) {
    v1::PrefillRequest prefill;
    *prefill.mutable_prompt_token_ids() = reserve.prompt_token_ids();
    *prefill.mutable_sampling() = reserve.sampling();
    *prefill.mutable_handoff() = handoff;
    prefill.set_request_id("fault");
    return prefill;
  }

  bool DecodeBlocksReturn(absl::Duration timeout) {
    return cluster_.WaitForLoad(decode_address_, /*decode=*/true, AllBlocksFree, timeout);
  }

  ClusterSpec spec_;
  LocalCluster cluster_;
  std::string decode_address_;
  std::unique_ptr<v1::DecodeNode::Stub> decode_;
  std::unique_ptr<v1::PrefillNode::Stub> prefill_;
};

TEST_F(NodeFaultsTest, PrefillNodeKilledMidTransferFailsTheRequestAndFreesTheBlocks) {
  const v1::ReserveRequest reserve = Reserve(LongPrompt(3000), 4);
  grpc::ClientContext decode_context;
  decode_context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  auto stream = decode_->Reserve(&decode_context, reserve);
  v1::DecodeEvent event;
  ASSERT_TRUE(stream->Read(&event));
  ASSERT_TRUE(event.has_handoff());

  std::thread prefill_call([&] {
    grpc::ClientContext context;
    v1::PrefillResponse response;
    grpc::Status status = prefill_->Prefill(&context, Prefill(reserve, event.handoff()), &response);
    EXPECT_FALSE(status.ok()) << "the prefill finished before it was killed: make it longer";
  });
  // Kill once the first chunks were written into the decode node's blocks.
  absl::SleepFor(absl::Milliseconds(60));
  cluster_.prefill(0).Kill();
  prefill_call.join();

  const absl::Time killed = absl::Now();
  while (stream->Read(&event)) {
    EXPECT_EQ(event.tokens_size(), 0) << "a token arrived without a completed prefill";
  }
  grpc::Status status = stream->Finish();
  const absl::Duration waited = absl::Now() - killed;
  EXPECT_FALSE(status.ok());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  EXPECT_NE(status.error_message().find("lease"), std::string::npos) << status.error_message();
  EXPECT_LT(waited, absl::Seconds(4)) << "the lease is 3 s";
  // Blocks come back after the write grace period (2 s past the lease).
  EXPECT_TRUE(DecodeBlocksReturn(absl::Seconds(8))) << cluster_.Logs();
}

TEST_F(NodeFaultsTest, CancelDuringPrefillReleasesBothNodesAtOnce) {
  const v1::ReserveRequest reserve = Reserve(LongPrompt(3000), 4);
  grpc::ClientContext decode_context;
  auto stream = decode_->Reserve(&decode_context, reserve);
  v1::DecodeEvent event;
  ASSERT_TRUE(stream->Read(&event));
  ASSERT_TRUE(event.has_handoff());

  grpc::ClientContext prefill_context;
  std::thread prefill_call([&] {
    v1::PrefillResponse response;
    grpc::Status status =
        prefill_->Prefill(&prefill_context, Prefill(reserve, event.handoff()), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::CANCELLED) << status.error_message();
  });
  absl::SleepFor(absl::Milliseconds(60));
  const absl::Time cancelled = absl::Now();
  prefill_context.TryCancel();
  prefill_call.join();
  // The prefill node tells the decode node it stopped writing: the request fails now, not at the
  // lease deadline, and the blocks are free without waiting for the grace period.
  while (stream->Read(&event)) {
  }
  grpc::Status status = stream->Finish();
  EXPECT_FALSE(status.ok());
  EXPECT_LT(absl::Now() - cancelled, absl::Seconds(2)) << status.error_message();
  EXPECT_TRUE(DecodeBlocksReturn(absl::Seconds(2))) << cluster_.Logs();
  EXPECT_TRUE(cluster_.WaitForLoad(
      cluster_.prefill(0).grpc_address(), /*decode=*/false,
      [](const v1::NodeLoad& l) { return l.num_held_kv_blocks() == 0 && l.num_running() == 0; },
      absl::Seconds(2)));
}

TEST_F(NodeFaultsTest, CancelMidStreamFreesTheDecodeNodesBlocks) {
  const v1::ReserveRequest reserve = Reserve(LongPrompt(40), 5000);
  grpc::ClientContext decode_context;
  auto stream = decode_->Reserve(&decode_context, reserve);
  v1::DecodeEvent event;
  ASSERT_TRUE(stream->Read(&event));
  grpc::ClientContext prefill_context;
  v1::PrefillResponse response;
  ASSERT_TRUE(
      prefill_->Prefill(&prefill_context, Prefill(reserve, event.handoff()), &response).ok());
  int tokens = 0;
  while (tokens < 3 && stream->Read(&event)) tokens += event.tokens_size();
  ASSERT_GE(tokens, 3);
  decode_context.TryCancel();
  while (stream->Read(&event)) {
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(DecodeBlocksReturn(absl::Seconds(2))) << cluster_.Logs();
}

TEST_F(NodeFaultsTest, HandoffFromAnotherIncarnationIsRefused) {
  const v1::ReserveRequest reserve = Reserve(LongPrompt(20), 2);
  grpc::ClientContext decode_context;
  auto stream = decode_->Reserve(&decode_context, reserve);
  v1::DecodeEvent event;
  ASSERT_TRUE(stream->Read(&event));
  v1::KvHandoff stale = event.handoff();
  stale.set_decode_incarnation(stale.decode_incarnation() ^ 1);
  grpc::ClientContext prefill_context;
  v1::PrefillResponse response;
  // The writes land (same address and key) but the completion names an incarnation that is not
  // the decode node's: it is dropped, and the request runs into its lease.
  prefill_->Prefill(&prefill_context, Prefill(reserve, stale), &response);
  while (stream->Read(&event)) {
    EXPECT_EQ(event.tokens_size(), 0);
  }
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
}

// A handoff altered on its way (here its layout) no longer carries its decode node's MAC: the
// prefill node refuses it before it writes or sends anything. (A genuine layout mismatch between
// two nodes is INVALID_ARGUMENT naming the field: handoff_codec_test, kv_block_writer_test.)
TEST_F(NodeFaultsTest, AlteredHandoffIsPermissionDenied) {
  const v1::ReserveRequest reserve = Reserve(LongPrompt(20), 2);
  grpc::ClientContext decode_context;
  auto stream = decode_->Reserve(&decode_context, reserve);
  v1::DecodeEvent event;
  ASSERT_TRUE(stream->Read(&event));
  v1::KvHandoff bad = event.handoff();
  bad.mutable_layout()->set_head_dim(bad.layout().head_dim() * 2);
  grpc::ClientContext prefill_context;
  v1::PrefillResponse response;
  grpc::Status status = prefill_->Prefill(&prefill_context, Prefill(reserve, bad), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(status.error_message().find("MAC"), std::string::npos) << status.error_message();
  decode_context.TryCancel();
  while (stream->Read(&event)) {
  }
  stream->Finish();
  EXPECT_TRUE(DecodeBlocksReturn(absl::Seconds(8)));
}

}  // namespace
}  // namespace tandem::testing
