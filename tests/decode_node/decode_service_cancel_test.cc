// DecodeNode.Cancel on a node that also prefills for others (tandem-decode --serve-prefill): the
// router sends its Cancels of both roles there, so each also reaches the prefill service
// (DecodeServiceOptions::cancel_prefill), and `found` says whether either service had the id.
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "tests/decode_node/decode_test_node.h"

namespace tandem {
namespace {

using testing::DecodeNode;
using testing::DecodeStreamReader;

struct PrefillCancels {
  absl::Mutex mu;
  std::vector<std::string> ids ABSL_GUARDED_BY(mu);
  std::string held;  // the id a prefill of this node runs
};

v1::CancelResponse Cancel(DecodeNode& node, const std::string& id) {
  grpc::ClientContext ctx;
  v1::CancelRequest request;
  request.set_request_id(id);
  v1::CancelResponse response;
  EXPECT_TRUE(node.stub->Cancel(&ctx, request, &response).ok());
  return response;
}

TEST(DecodeServiceCancelTest, ACancelAlsoReachesThePrefillServiceOfTheNode) {
  PrefillCancels prefill;
  prefill.held = "prefilling-for-another-node";
  DecodeNode node({}, 32, [&prefill](DecodeServiceOptions& o) {
    o.cancel_prefill = [&prefill](const std::string& id) {
      absl::MutexLock lock(&prefill.mu);
      prefill.ids.push_back(id);
      return id == prefill.held;
    };
  });
  // A reservation of this node, waiting for its KV under its lease.
  DecodeStreamReader reserve;
  v1::ReserveRequest request = DecodeStreamReader::MakeRequest<v1::ReserveRequest>({5, 6, 7, 8}, 8);
  request.set_request_id("reserved-here");
  reserve.reader = node.stub->Reserve(&reserve.context, request);
  v1::DecodeEvent handoff;
  ASSERT_TRUE(reserve.reader->Read(&handoff));
  ASSERT_TRUE(handoff.has_handoff());

  EXPECT_TRUE(Cancel(node, "prefilling-for-another-node").found());
  EXPECT_FALSE(Cancel(node, "unknown").found());
  EXPECT_TRUE(Cancel(node, "reserved-here").found());
  // The reservation ended (aborted, before its KV came); each id was also offered to the prefill
  // service.
  EXPECT_TRUE(reserve.Finish().ok());
  ASSERT_FALSE(reserve.events.empty());
  EXPECT_EQ(reserve.events.back().finish_reason(), "abort");
  absl::MutexLock lock(&prefill.mu);
  EXPECT_EQ(prefill.ids,
            (std::vector<std::string>{"prefilling-for-another-node", "unknown", "reserved-here"}));
}

TEST(DecodeServiceCancelTest, WithoutAPrefillServiceACancelFindsOnlyTheNodesOwnRequests) {
  DecodeNode node;
  EXPECT_FALSE(Cancel(node, "prefilling-for-another-node").found());
}

}  // namespace
}  // namespace tandem
