// A real DecodeService on loopback gRPC over LocalTransport and a FakeBackend engine (32 blocks of
// 4 tokens unless told, quarantined blocks kept 30 s), its metrics wired; one Reserve call and one
// Generate call read event by event; and what a prefill node does for a reservation (its KV
// writes, its completion notice).
#ifndef TANDEM_TESTS_DECODE_NODE_DECODE_TEST_NODE_H_
#define TANDEM_TESTS_DECODE_NODE_DECODE_TEST_NODE_H_

#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/engine/engine.h"
#include "common/handoff/handoff_codec.h"
#include "common/handoff/kv_checksum.h"
#include "common/serving/grpc_server.h"
#include "common/transport/local_transport.h"
#include "decode_node/decode_metrics.h"
#include "decode_node/decode_service.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tandem/v1/node.grpc.pb.h"
#include "tests/common/engine/engine_test_util.h"
#include "tests/common/engine/fake_backend.h"

namespace tandem::testing {

struct DecodeNode {
  // `adjust` changes the service's options before it is built.
  explicit DecodeNode(const GrpcServerOptions& server_options = {}, int num_blocks = 32,
                      const std::function<void(DecodeServiceOptions&)>& adjust = nullptr)
      : backend(kVocab, num_blocks, 4), pool(backend.kv_layout().total_bytes()) {
    EXPECT_TRUE(transport.RegisterPool(pool.data(), pool.size()).ok());
    EngineOptions options;
    options.kv_write_grace = absl::Seconds(30);  // quarantined blocks stay visible
    options.on_step = [this](const EngineStepStats& s) { metrics.engine_metrics().ObserveStep(s); };
    auto created = Engine::Create(&backend, options);
    EXPECT_TRUE(created.ok()) << created.status();
    engine = *std::move(created);
    engine->Start();
    metrics.SetEngine(engine.get());
    DecodeServiceOptions service_options{.model_name = "m",
                                         .default_lease = absl::Seconds(30),
                                         .max_lease = absl::Seconds(60),
                                         .metrics = &metrics};
    if (adjust) adjust(service_options);
    service = std::make_unique<DecodeService>(engine.get(), &transport, std::move(service_options));
    auto started = StartGrpcServer("127.0.0.1:0", {service.get()}, {}, server_options);
    EXPECT_TRUE(started.ok()) << started.status();
    server = std::move(*started);
    channel = grpc::CreateChannel(server.address, grpc::InsecureChannelCredentials());
    stub = v1::DecodeNode::NewStub(channel);
  }
  ~DecodeNode() {
    server.server->Shutdown(std::chrono::system_clock::now());
    engine->Stop();
  }

  FakeBackend backend;
  std::vector<char> pool;
  LocalTransport transport;
  DecodeMetrics metrics;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<DecodeService> service;
  RunningServer server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::DecodeNode::Stub> stub;
};

// One of a DecodeNode's streams (Reserve or Generate), read event by event.
struct DecodeStreamReader {
  // A request of `prompt` for `max_tokens` greedy tokens (EOS ignored).
  template <typename Request>
  static Request MakeRequest(const std::vector<int>& prompt, int max_tokens) {
    Request request;
    request.mutable_prompt_token_ids()->Assign(prompt.begin(), prompt.end());
    request.mutable_sampling()->set_temperature(0);
    request.mutable_sampling()->set_max_tokens(max_tokens);
    request.mutable_sampling()->set_ignore_eos(true);
    return request;
  }
  DecodeStreamReader() {
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
  }
  // Reads to the end; returns the call's status.
  grpc::Status Finish() {
    v1::DecodeEvent event;
    while (reader->Read(&event)) events.push_back(event);
    return reader->Finish();
  }

  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::DecodeEvent>> reader;
  std::vector<v1::DecodeEvent> events;
};

// One Reserve call.
struct ReserveCall : DecodeStreamReader {
  ReserveCall(DecodeNode& node, const std::vector<int>& prompt, int max_tokens,
              int64_t lease_ms = 0) {
    v1::ReserveRequest request = MakeRequest<v1::ReserveRequest>(prompt, max_tokens);
    request.set_lease_ms(lease_ms);
    reader = node.stub->Reserve(&context, request);
  }
};

// One local Generate call.
struct GenerateCall : DecodeStreamReader {
  GenerateCall(DecodeNode& node, const std::vector<int>& prompt, int max_tokens) {
    reader =
        node.stub->Generate(&context, MakeRequest<v1::NodeGenerateRequest>(prompt, max_tokens));
  }
};

// Puts the prompt's KV into the reserved blocks, as a prefill node's writes would (FakeBackend
// keeps its KV in its own slot store; the decode engine waits for the completion meanwhile).
inline void WriteKv(FakeBackend& backend, const v1::KvHandoff& handoff,
                    const std::vector<int>& prompt) {
  const std::vector<int32_t> blocks(handoff.block_ids().begin(), handoff.block_ids().end());
  const std::vector<TokenId> tokens(prompt.begin(), prompt.end());
  ForwardItem item;
  item.tokens = tokens;
  item.block_table = blocks;
  const std::vector<ForwardItem> items = {item};
  ASSERT_TRUE(backend.Forward(ForwardBatch{items}, LogitsOutput{}).ok());
}

// The block checksums a writer of exactly what the decode node's pool holds now would send: the
// handoff's key and epoch over its written blocks (LocalTransport's pool base is the pool's
// address in this process).
inline std::vector<uint64_t> LandedChecksums(const v1::KvHandoff& handoff) {
  if (handoff.checksum_key().empty()) return {};
  auto layout = KvLayoutFromProto(handoff.layout());
  auto hasher = KvBlockHasher::Create(handoff.checksum_key(), handoff.epoch());
  EXPECT_TRUE(layout.ok() && hasher.ok());
  const std::span<const uint8_t> pool(reinterpret_cast<const uint8_t*>(handoff.remote_base()),
                                      layout->total_bytes());
  const std::vector<int32_t> written(
      handoff.block_ids().begin() + handoff.num_cached_tokens() / layout->block_size,
      handoff.block_ids().end());
  auto sums = hasher->HashBlocks(pool, *layout, written);
  EXPECT_TRUE(sums.ok()) << sums.status();
  return sums.value_or(std::vector<uint64_t>());
}

// Sends the decode node the completion a prefill node sends once its writes are done, with the
// prefill node's sampler draws for the first token and (ok) the checksums of the landed blocks;
// `edit` may change it before it is sent.
inline void SendCompletion(const v1::KvHandoff& handoff, bool ok, int first_token,
                           uint64_t rng_counter = 0,
                           const std::function<void(v1::KvCompletion&)>& edit = nullptr) {
  auto target = KvWriteTargetFromHandoff(handoff, "local");
  ASSERT_TRUE(target.ok()) << target.status();
  LocalTransport prefill_transport;
  GenerationEvent first;
  first.token = first_token;
  const std::vector<uint64_t> sums = ok ? LandedChecksums(handoff) : std::vector<uint64_t>();
  v1::KvCompletion completion =
      MakeKvCompletion(*target, prefill_transport.incarnation(),
                       ok ? absl::OkStatus() : absl::UnavailableError("prefill node lost the KV"),
                       ok ? &first : nullptr, rng_counter, sums);
  if (edit) edit(completion);
  absl::Notification sent;
  absl::Status result;
  prefill_transport.Notify(target->target, completion.SerializeAsString(),
                           absl::Now() + absl::Seconds(10), [&](absl::Status s) {
                             result = s;
                             sent.Notify();
                           });
  sent.WaitForNotification();
  ASSERT_TRUE(result.ok()) << result;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_DECODE_NODE_DECODE_TEST_NODE_H_
