// A decode node's integrity checks before admission (decode_node/kv_import_verifier.h), through
// its real service: every handoff is sealed (epoch, checksum key); a completion whose checksums
// match the landed KV is admitted; a byte corrupted in the pool, missing checksums or a stale epoch
// fail the request with DATA_LOSS, counted by reason, and its blocks are freed (the writer
// finished) or quarantined (a stale epoch: the reservation's own writer may still write).
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/metrics/prometheus_text.h"
#include "gtest/gtest.h"
#include "tests/common/serving/metrics_scrape.h"
#include "tests/decode_node/decode_test_node.h"

namespace tandem::testing {
namespace {

std::vector<int> Prompt() {
  std::vector<int> prompt;
  for (int i = 0; i < 10; ++i) prompt.push_back(3 + i % 5);
  return prompt;
}

double Refused(DecodeMetrics& metrics, const std::string& reason) {
  const PrometheusText scrape = ScrapeUntil(metrics, [&](const PrometheusText& s) {
    return s.Sum("tandem_decode_kv_imports_refused_total") >= 1;
  });
  return scrape.Value("tandem_decode_kv_imports_refused_total", {{"reason", reason}}).value_or(-1);
}

v1::NodeLoad Load(DecodeNode& node) {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  v1::NodeLoad load;
  EXPECT_TRUE(node.stub->GetLoad(&context, v1::LoadRequest(), &load).ok());
  return load;
}

// Polls the node's load until `pred` holds (up to 5 s).
template <typename Pred>
bool LoadBecomes(DecodeNode& node, Pred pred) {
  for (int i = 0; i < 250; ++i) {
    if (pred(Load(node))) return true;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return false;
}

class DecodeServiceIntegrityTest : public ::testing::Test {
 protected:
  // Reserves the prompt and reads the handoff.
  v1::KvHandoff Reserve() {
    v1::DecodeEvent first;
    EXPECT_TRUE(call_.reader->Read(&first));
    EXPECT_TRUE(first.has_handoff());
    return first.handoff();
  }
  // Flips one byte of the landed KV: layer 0's K of the first written block.
  void CorruptLandedByte(const v1::KvHandoff& handoff) {
    const KvLayout layout = node_.backend.kv_layout();
    const int32_t block = handoff.block_ids(handoff.num_cached_tokens() / layout.block_size);
    node_.pool[layout.Offset(0, 0, block, 0, 1) * DTypeSize(layout.dtype)] ^= 0x20;
  }

  DecodeNode node_;
  ReserveCall call_{node_, Prompt(), 3};
};

TEST_F(DecodeServiceIntegrityTest, HandoffsAreSealedWithFreshEpochsAndKeys) {
  const v1::KvHandoff a = Reserve();
  ReserveCall other(node_, {9, 9, 9, 9, 9}, 3);
  v1::DecodeEvent first;
  ASSERT_TRUE(other.reader->Read(&first));
  const v1::KvHandoff& b = first.handoff();
  EXPECT_GT(a.epoch(), 0u);
  EXPECT_NE(a.epoch(), b.epoch());
  EXPECT_EQ(a.checksum_key().size(), kKvChecksumKeyBytes);
  EXPECT_NE(a.checksum_key(), b.checksum_key());
}

TEST_F(DecodeServiceIntegrityTest, MatchingChecksumsAreAdmittedAndCounted) {
  const v1::KvHandoff handoff = Reserve();
  WriteKv(node_.backend, handoff, Prompt());
  SendCompletion(handoff, /*ok=*/true, /*first_token=*/5);
  const grpc::Status status = call_.Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  const PrometheusText scrape = ScrapeUntil(node_.metrics, [](const PrometheusText& s) {
    return s.Sum("tandem_decode_kv_imports_verified_total") >= 1;
  });
  EXPECT_EQ(scrape.Value("tandem_decode_kv_imports_verified_total").value_or(0), 1);
  EXPECT_EQ(scrape.Sum("tandem_decode_kv_imports_refused_total"), 0);
}

TEST_F(DecodeServiceIntegrityTest, ACorruptedByteFailsTheImportAndFreesTheBlocks) {
  const v1::KvHandoff handoff = Reserve();
  // The writer hashed what it sent; one byte landed different.
  SendCompletion(handoff, /*ok=*/true, 5, 0,
                 [&](v1::KvCompletion&) { CorruptLandedByte(handoff); });
  const grpc::Status status = call_.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DATA_LOSS) << status.error_message();
  EXPECT_NE(status.error_message().find("checksum_mismatch"), std::string::npos)
      << status.error_message();
  EXPECT_TRUE(call_.events.empty()) << "no token of unverified KV may go out";
  EXPECT_EQ(Refused(node_.metrics, "checksum_mismatch"), 1);
  EXPECT_TRUE(LoadBecomes(node_, [](const v1::NodeLoad& l) {
    return l.num_free_kv_blocks() == l.num_kv_blocks() && l.num_held_kv_blocks() == 0;
  }));
}

TEST_F(DecodeServiceIntegrityTest, MissingChecksumsFailTheImport) {
  const v1::KvHandoff handoff = Reserve();
  SendCompletion(handoff, /*ok=*/true, 5, 0,
                 [](v1::KvCompletion& c) { c.mutable_block_checksums()->RemoveLast(); });
  EXPECT_EQ(call_.Finish().error_code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_EQ(Refused(node_.metrics, "missing_checksums"), 1);
}

// A completion of the previous epoch (what the writer of these blocks' previous reservation would
// send) fails the import, and the blocks stay quarantined, since this reservation's own writer may
// still be writing, until that writer's completion says it is done.
TEST_F(DecodeServiceIntegrityTest, AStaleEpochFailsTheImportAndQuarantinesTheBlocks) {
  const v1::KvHandoff handoff = Reserve();
  SendCompletion(handoff, /*ok=*/true, 5, 0,
                 [](v1::KvCompletion& c) { c.set_epoch(c.epoch() - 1); });
  const grpc::Status status = call_.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DATA_LOSS) << status.error_message();
  EXPECT_NE(status.error_message().find("stale_epoch"), std::string::npos);
  EXPECT_EQ(Refused(node_.metrics, "stale_epoch"), 1);
  const int held = handoff.block_ids_size();
  EXPECT_TRUE(
      LoadBecomes(node_, [held](const v1::NodeLoad& l) { return l.num_held_kv_blocks() == held; }));
  SendCompletion(handoff, /*ok=*/true, 5);  // the reservation's writer finishes
  EXPECT_TRUE(LoadBecomes(node_, [](const v1::NodeLoad& l) {
    return l.num_held_kv_blocks() == 0 && l.num_free_kv_blocks() == l.num_kv_blocks();
  }));
}

TEST(DecodeServiceIntegrityOffTest, WithoutChecksumsHandoffsCarryNoKeyButAnEpoch) {
  DecodeNode node(GrpcServerOptions{}, 32,
                  [](DecodeServiceOptions& options) { options.kv_checksums = false; });
  ReserveCall call(node, Prompt(), 3);
  v1::DecodeEvent first;
  ASSERT_TRUE(call.reader->Read(&first));
  EXPECT_TRUE(first.handoff().checksum_key().empty());
  EXPECT_GT(first.handoff().epoch(), 0u);
  WriteKv(node.backend, first.handoff(), Prompt());
  SendCompletion(first.handoff(), /*ok=*/true, 5);
  EXPECT_TRUE(call.Finish().ok());
}

}  // namespace
}  // namespace tandem::testing
