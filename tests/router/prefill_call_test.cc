// PrefillCall's states: a failed answer before the first token cuts the decode stream; after it,
// or once the router cancelled the call, it does not; an answer that never comes is reported.
#include "router/prefill_call.h"

#include <memory>

#include "gtest/gtest.h"

namespace tandem {
namespace {

// A NodeClient whose Prefill answers when the test says so.
class HeldPrefillClient : public NodeClient {
 public:
  std::unique_ptr<DecodeEventReader> Reserve(grpc::ClientContext*,
                                             const v1::ReserveRequest&) override {
    return nullptr;
  }
  std::unique_ptr<DecodeEventReader> Generate(grpc::ClientContext*,
                                              const v1::NodeGenerateRequest&) override {
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
    call->Start(client_, [this] { ++stream_cancels_; });
    return call;
  }

  HeldPrefillClient client_;
  int stream_cancels_ = 0;
};

const grpc::Status kBusy(grpc::StatusCode::RESOURCE_EXHAUSTED, "busy");

TEST_F(PrefillCallTest, AFailureBeforeTheFirstTokenCutsTheDecodeStream) {
  auto call = Start();
  EXPECT_EQ(call->state(), PrefillCall::State::kInFlight);
  client_.Answer(kBusy);
  EXPECT_EQ(stream_cancels_, 1);
  EXPECT_EQ(call->state(), PrefillCall::State::kAnswered);
  const PrefillCall::Result r = call->Finish(false, absl::ZeroDuration(), absl::Seconds(1));
  EXPECT_EQ(r.end, PrefillEnd::kFailed);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
}

TEST_F(PrefillCallTest, AFailureAfterTheFirstTokenLeavesTheStreamAlone) {
  auto call = Start();
  call->ProtectStream();
  EXPECT_EQ(call->state(), PrefillCall::State::kStreamLive);
  client_.Answer(kBusy);
  EXPECT_EQ(stream_cancels_, 0);
  EXPECT_EQ(call->Finish(true, absl::ZeroDuration(), absl::Seconds(1)).end, PrefillEnd::kFailed);
}

TEST_F(PrefillCallTest, AnOkAnswerCarriesTheNodesQueueTime) {
  auto call = Start();
  client_.Answer(grpc::Status::OK, 1234);
  const PrefillCall::Result r = call->Finish(true, absl::ZeroDuration(), absl::Seconds(1));
  EXPECT_EQ(r.end, PrefillEnd::kOk);
  EXPECT_EQ(r.queue_us, 1234);
  EXPECT_EQ(stream_cancels_, 0);
}

TEST_F(PrefillCallTest, AnUnfinishedStreamCancelsTheCallAndItsAnswerIsNotTheNodesFault) {
  auto call = Start();
  // No answer yet and the stream did not finish: Finish cancels; the answer arrives meanwhile.
  std::thread answer([&] {
    while (call->state() != PrefillCall::State::kCancelling) absl::SleepFor(absl::Milliseconds(1));
    client_.Answer(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  });
  const PrefillCall::Result r = call->Finish(false, absl::Seconds(5), absl::Seconds(5));
  answer.join();
  EXPECT_EQ(r.end, PrefillEnd::kCancelledByRouter);
  EXPECT_EQ(call->state(), PrefillCall::State::kAnsweredAfterCancel);
  EXPECT_EQ(stream_cancels_, 0);
}

TEST_F(PrefillCallTest, AFinishedStreamGivesTheAnswerItsGrace) {
  auto call = Start();
  std::thread answer([&] {
    absl::SleepFor(absl::Milliseconds(20));
    client_.Answer(grpc::Status::OK);
  });
  const PrefillCall::Result r = call->Finish(true, absl::Seconds(5), absl::Seconds(5));
  answer.join();
  EXPECT_EQ(r.end, PrefillEnd::kOk);
}

TEST_F(PrefillCallTest, AnAnswerThatNeverComesIsReportedAsSuch) {
  auto call = Start();
  call->ProtectStream();
  // Cancelled by the router (the stream finished, the grace ran out) and still no answer.
  const PrefillCall::Result r = call->Finish(true, absl::Milliseconds(1), absl::Milliseconds(1));
  EXPECT_EQ(r.end, PrefillEnd::kCancelledByRouter);
  client_.Answer(kBusy);  // late: changes nothing, touches no stream
  EXPECT_EQ(call->state(), PrefillCall::State::kAnsweredAfterCancel);
  EXPECT_EQ(stream_cancels_, 0);
}

}  // namespace
}  // namespace tandem
