// PrefillCall's states: a failed answer before the first token cuts the decode stream; after it,
// or once the router cancelled the call, it does not; what result() reports in each case.
#include "router/prefill_call.h"

#include <memory>

#include "gtest/gtest.h"

namespace tandem {
namespace {

// A NodeClient whose Prefill answers when the test says so.
class HeldPrefillClient : public NodeClient {
 public:
  std::shared_ptr<DecodeStream> StartReserve(grpc::ClientContext*, const v1::ReserveRequest&,
                                             std::shared_ptr<DecodeStreamReceiver>) override {
    return nullptr;
  }
  std::shared_ptr<DecodeStream> StartGenerate(grpc::ClientContext*, const v1::NodeGenerateRequest&,
                                              std::shared_ptr<DecodeStreamReceiver>) override {
    return nullptr;
  }
  void Prefill(grpc::ClientContext*, const v1::PrefillRequest*, v1::PrefillResponse* response,
               Done done) override {
    response_ = response;
    done_ = std::move(done);
  }
  void Cancel(grpc::ClientContext*, const v1::CancelRequest*, v1::CancelResponse*,
              Done done) override {
    done(grpc::Status::OK);
  }
  void PauseOrResume(grpc::ClientContext*, bool, const v1::MigrationRequest*,
                     v1::MigrationResponse*, Done done) override {
    done(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "not a decode node"));
  }
  void ExportKv(grpc::ClientContext*, const v1::ExportKvRequest*, v1::ExportKvResponse*,
                Done done) override {
    done(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "not a decode node"));
  }
  void Answer(grpc::Status status, int64_t queue_us = 0) {
    response_->mutable_timings()->set_queue_us(queue_us);
    done_(std::move(status));
  }

 private:
  v1::PrefillResponse* response_ = nullptr;
  Done done_;
};

class PrefillCallTest : public ::testing::Test {
 protected:
  std::shared_ptr<PrefillCall> Start() {
    auto call = PrefillCall::Create(v1::PrefillRequest(), absl::InfiniteFuture());
    call->Start(
        client_, [this] { ++stream_cancels_; }, [this] { ++answers_; });
    return call;
  }

  HeldPrefillClient client_;
  int stream_cancels_ = 0;
  int answers_ = 0;
};

const grpc::Status kBusy(grpc::StatusCode::RESOURCE_EXHAUSTED, "busy");

TEST_F(PrefillCallTest, AFailureBeforeTheFirstTokenCutsTheDecodeStream) {
  auto call = Start();
  EXPECT_EQ(call->state(), PrefillCall::State::kInFlight);
  client_.Answer(kBusy);
  EXPECT_EQ(stream_cancels_, 1);
  EXPECT_EQ(answers_, 1);
  EXPECT_EQ(call->state(), PrefillCall::State::kAnswered);
  const PrefillCall::Result r = call->result();
  EXPECT_EQ(r.end, PrefillEnd::kFailed);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(PrefillCallTest, AFailureAfterTheFirstTokenLeavesTheStreamAlone) {
  auto call = Start();
  call->ProtectStream();
  EXPECT_EQ(call->state(), PrefillCall::State::kStreamLive);
  client_.Answer(kBusy);
  EXPECT_EQ(stream_cancels_, 0);
  EXPECT_TRUE(call->answered());
  EXPECT_EQ(call->result().end, PrefillEnd::kFailed);
}

TEST_F(PrefillCallTest, AnOkAnswerCarriesTheNodesQueueTime) {
  auto call = Start();
  client_.Answer(grpc::Status::OK, 1234);
  const PrefillCall::Result r = call->result();
  EXPECT_EQ(r.end, PrefillEnd::kOk);
  EXPECT_EQ(r.queue_us, 1234);
  EXPECT_EQ(stream_cancels_, 0);
}

TEST_F(PrefillCallTest, ACancelledCallsAnswerIsNotTheNodesFault) {
  auto call = Start();
  call->ProtectStream();
  call->Cancel();
  EXPECT_EQ(call->state(), PrefillCall::State::kCancelling);
  EXPECT_FALSE(call->answered());
  EXPECT_EQ(call->result().end, PrefillEnd::kCancelledByRouter);  // even before it answers
  client_.Answer(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  EXPECT_EQ(call->state(), PrefillCall::State::kAnsweredAfterCancel);
  EXPECT_EQ(call->result().end, PrefillEnd::kCancelledByRouter);
  EXPECT_EQ(stream_cancels_, 0);
  EXPECT_EQ(answers_, 1);
}

TEST_F(PrefillCallTest, AnOkAnswerThatRacesTheCancelStillCounts) {
  auto call = Start();
  call->Cancel();
  client_.Answer(grpc::Status::OK);
  EXPECT_EQ(call->result().end, PrefillEnd::kOk);
}

TEST_F(PrefillCallTest, CancelAfterTheAnswerChangesNothing) {
  auto call = Start();
  client_.Answer(kBusy);
  call->Cancel();
  EXPECT_EQ(call->state(), PrefillCall::State::kAnswered);
  EXPECT_EQ(call->result().end, PrefillEnd::kFailed);
}

}  // namespace
}  // namespace tandem
