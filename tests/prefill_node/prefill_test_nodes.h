// A real PrefillService on loopback gRPC, its KV moving through LocalTransport into a fake decode
// node's pool (no decode engine), both sharing one cluster secret: the decode side signs its
// handoffs and checks the MACs of the completions it receives. And a WatchKvEvents stream.
#ifndef TANDEM_TESTS_PREFILL_NODE_PREFILL_TEST_NODES_H_
#define TANDEM_TESTS_PREFILL_NODE_PREFILL_TEST_NODES_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/engine/engine.h"
#include "common/handoff/handoff_codec.h"
#include "common/handoff/kv_checksum.h"
#include "common/serving/grpc_server.h"
#include "common/transport/handoff_auth.h"
#include "common/transport/handoff_gate.h"
#include "common/transport/local_transport.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "prefill_node/prefill_metrics.h"
#include "prefill_node/prefill_service.h"
#include "tandem/v1/node.grpc.pb.h"
#include "tests/common/engine/engine_test_util.h"
#include "tests/common/engine/fake_backend.h"

namespace tandem::testing {

inline std::shared_ptr<const HandoffAuthenticator> TestClusterAuth(
    const std::string& secret = std::string(32, 's')) {
  return *HandoffAuthenticator::FromSecret(secret);
}

// A decode node's pool and notice inbox, without a decode engine.
struct FakeDecodeNode {
  FakeDecodeNode() : layout(FakeBackend(kVocab, 32, 4).kv_layout()), pool(layout.total_bytes()) {
    EXPECT_TRUE(transport.RegisterPool(pool.data(), pool.size()).ok());
    transport.SetNoticeHandler([this](std::string_view payload) {
      absl::MutexLock lock(&mu);
      auto completion = ParseKvCompletion(payload);
      EXPECT_TRUE(completion.ok()) << completion.status();
      if (!completion.ok()) return;
      // The prefill node signs every completion it sends.
      EXPECT_TRUE(auth->Verify(*completion).ok()) << completion->DebugString();
      completions.push_back(*completion);
    });
  }

  // A handoff as the decode node issues it: stamped now and signed.
  v1::KvHandoff Handoff(RequestId id, std::vector<int32_t> blocks, int32_t cached_tokens = 0,
                        int64_t lease_ms = 30000) const {
    KvReservation reservation;
    reservation.request_id = id;
    reservation.block_ids = std::move(blocks);
    reservation.num_cached_tokens = cached_tokens;
    // Sealed as a decode node seals it: the prefill side hashes what it writes.
    v1::KvHandoff handoff =
        MakeKvHandoff(reservation, transport, layout, transport.incarnation(), lease_ms,
                      KvSeal{.epoch = id, .checksum_key = NewKvChecksumKey()});
    return Signed(std::move(handoff));
  }
  v1::KvHandoff Signed(v1::KvHandoff handoff) const {
    handoff.set_issued_unix_ms(absl::ToUnixMillis(absl::Now()));
    auth->Sign(&handoff);
    return handoff;
  }

  size_t NumCompletions(bool ok) {
    absl::MutexLock lock(&mu);
    size_t n = 0;
    for (const v1::KvCompletion& c : completions) n += c.ok() == ok ? 1 : 0;
    return n;
  }

  std::shared_ptr<const HandoffAuthenticator> auth = TestClusterAuth();
  KvLayout layout;
  std::vector<char> pool;
  // Before the transport: its thread, which runs the notice handler, stops before they go.
  absl::Mutex mu;
  std::vector<v1::KvCompletion> completions ABSL_GUARDED_BY(mu);
  LocalTransport transport;
};

struct PrefillNode {
  explicit PrefillNode(LocalTransportOptions transport_options = {},
                       const GrpcServerOptions& server_options = {})
      : backend(kVocab, 32, 4),
        pool(backend.kv_layout().total_bytes()),
        transport(transport_options) {
    EXPECT_TRUE(transport.RegisterPool(pool.data(), pool.size()).ok());
    EngineOptions options;
    options.on_step = [this](const EngineStepStats& s) { metrics.engine_metrics().ObserveStep(s); };
    auto created = Engine::Create(&backend, options);
    EXPECT_TRUE(created.ok()) << created.status();
    engine = *std::move(created);
    engine->Start();
    metrics.SetEngine(engine.get());
    metrics.SetHandoffGate(&gate);
    service = std::make_unique<PrefillService>(
        engine.get(), &transport,
        PrefillServiceOptions{
            .model_name = "m", .metrics = &metrics, .handoff_gate = &gate, .handoff_auth = auth});
    auto started = StartGrpcServer("127.0.0.1:0", {service.get()}, {}, server_options);
    EXPECT_TRUE(started.ok()) << started.status();
    server = std::move(*started);
    channel = grpc::CreateChannel(server.address, grpc::InsecureChannelCredentials());
    stub = v1::PrefillNode::NewStub(channel);
  }
  ~PrefillNode() {
    server.server->Shutdown();
    engine->Stop();
  }

  grpc::Status Prefill(const std::vector<int>& prompt, const v1::KvHandoff& handoff,
                       v1::PrefillResponse* response, const std::string& request_id = "") {
    v1::PrefillRequest request;
    request.mutable_prompt_token_ids()->Assign(prompt.begin(), prompt.end());
    request.mutable_sampling()->set_temperature(0);
    request.mutable_sampling()->set_max_tokens(1);
    *request.mutable_handoff() = handoff;
    request.set_request_id(request_id);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    return stub->Prefill(&context, request, response);
  }

  std::shared_ptr<const HandoffAuthenticator> auth = TestClusterAuth();
  HandoffGate gate{auth};
  FakeBackend backend;
  std::vector<char> pool;
  LocalTransport transport;
  PrefillMetrics metrics;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<PrefillService> service;
  RunningServer server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::PrefillNode::Stub> stub;
};

// One WatchKvEvents stream; it holds its sync thread once its first event has arrived.
struct WatchCall {
  explicit WatchCall(PrefillNode& node)
      : reader(node.stub->WatchKvEvents(&context, v1::WatchKvEventsRequest())) {}
  // Cancels the stream, reads what is left; returns its status.
  grpc::Status Cancel() {
    context.TryCancel();
    v1::KvEvents events;
    while (reader->Read(&events)) {
    }
    return reader->Finish();
  }

  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::KvEvents>> reader;
};

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_PREFILL_NODE_PREFILL_TEST_NODES_H_
