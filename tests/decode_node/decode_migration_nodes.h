// Real DecodeServices on loopback gRPC for live KV migration tests. Each runs the CPU backend over
// the same random-weight tiny Llama (so the tokens depend on the very KV bytes that move), its KV
// pool the memory its LocalTransport registered (what another node's writer writes into), and all
// share one cluster secret (each checks the others' handoffs and completions). A GatedBackend lets
// a test hold the engine between steps, so a pause lands mid-stream however fast the model is.
#ifndef TANDEM_TESTS_DECODE_NODE_DECODE_MIGRATION_NODES_H_
#define TANDEM_TESTS_DECODE_NODE_DECODE_MIGRATION_NODES_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/backend/cpu_backend.h"
#include "common/engine/engine.h"
#include "common/serving/grpc_server.h"
#include "common/transport/handoff_auth.h"
#include "common/transport/local_transport.h"
#include "decode_node/decode_metrics.h"
#include "decode_node/decode_service.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tandem/v1/node.grpc.pb.h"
#include "tests/common/backend/test_model.h"

namespace tandem::testing {

// A Backend that runs another one's Forward, and can be told to let only so many more run: the
// next one then waits (at most kMaxHold) until Open.
class GatedBackend : public Backend {
 public:
  static constexpr absl::Duration kMaxHold = absl::Seconds(20);

  explicit GatedBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  std::string_view name() const override { return inner_->name(); }
  const ModelConfig& config() const override { return inner_->config(); }
  const KvLayout& kv_layout() const override { return inner_->kv_layout(); }
  absl::Status Forward(const ForwardBatch& batch, LogitsOutput out) override {
    {
      absl::MutexLock lock(&mu_);
      auto may_run = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return !allowed_.has_value() || *allowed_ > 0;
      };
      mu_.AwaitWithTimeout(absl::Condition(&may_run), kMaxHold);
      if (allowed_.has_value() && *allowed_ > 0) --*allowed_;
    }
    return inner_->Forward(batch, out);
  }

  // From now on `steps` more Forward calls run; the one after waits for Open.
  void AllowSteps(int steps) {
    absl::MutexLock lock(&mu_);
    allowed_ = steps;
  }
  void Open() {
    absl::MutexLock lock(&mu_);
    allowed_.reset();
  }

 private:
  const std::unique_ptr<Backend> inner_;
  absl::Mutex mu_;
  std::optional<int> allowed_ ABSL_GUARDED_BY(mu_);
};

inline std::shared_ptr<const HandoffAuthenticator> ClusterAuth(char fill = 's') {
  return *HandoffAuthenticator::FromSecret(std::string(32, fill));
}

inline constexpr int kMigrationBlockSize = 4;

// One decode node: 64 blocks of 4 tokens of the tiny Llama's KV.
struct MigrationNode {
  explicit MigrationNode(std::shared_ptr<const HandoffAuthenticator> auth = ClusterAuth())
      : model(TinyLlamaConfig(), DType::kF32, /*seed=*/5) {
    CpuBackendOptions backend_options;
    backend_options.num_threads = 1;
    backend_options.block_size = kMigrationBlockSize;
    backend_options.num_kv_blocks = 64;
    backend_options.kv_pool_allocator = [this](size_t bytes) {
      return transport.AllocatePool(bytes);
    };
    auto cpu = CpuBackend::Create(model.weights(), backend_options);
    EXPECT_TRUE(cpu.ok()) << cpu.status();
    backend = std::make_unique<GatedBackend>(*std::move(cpu));
    EngineOptions options;
    options.on_step = [this](const EngineStepStats& s) { metrics.engine_metrics().ObserveStep(s); };
    auto created = Engine::Create(backend.get(), options);
    EXPECT_TRUE(created.ok()) << created.status();
    engine = *std::move(created);
    engine->Start();
    metrics.SetEngine(engine.get());
    service = std::make_unique<DecodeService>(
        engine.get(), &transport,
        DecodeServiceOptions{
            .model_name = "m", .handoff_auth = std::move(auth), .metrics = &metrics});
    auto started = StartGrpcServer("127.0.0.1:0", {service.get()}, {});
    EXPECT_TRUE(started.ok()) << started.status();
    server = std::move(*started);
    channel = grpc::CreateChannel(server.address, grpc::InsecureChannelCredentials());
    stub = v1::DecodeNode::NewStub(channel);
  }
  ~MigrationNode() {
    backend->Open();
    server.server->Shutdown(std::chrono::system_clock::now());
    engine->Stop();
  }

  v1::MigrationResponse Pause(const std::string& router_id) { return Migration(router_id, true); }
  v1::MigrationResponse Resume(const std::string& router_id) { return Migration(router_id, false); }
  v1::MigrationResponse Migration(const std::string& router_id, bool pause) {
    v1::MigrationRequest request;
    request.set_request_id(router_id);
    v1::MigrationResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    const grpc::Status status = pause ? stub->PauseForMigration(&context, request, &response)
                                      : stub->ResumePaused(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }
  grpc::Status ExportKv(const std::string& router_id, const v1::KvHandoff& handoff,
                        v1::ExportKvResponse* response) {
    v1::ExportKvRequest request;
    request.set_request_id(router_id);
    *request.mutable_handoff() = handoff;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    return stub->ExportKv(&context, request, response);
  }
  grpc::Status Cancel(const std::string& router_id) {
    v1::CancelRequest request;
    request.set_request_id(router_id);
    v1::CancelResponse response;
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    return stub->Cancel(&context, request, &response);
  }

  // Waits (at most 10 s) until `done` holds of the engine's stats; returns the last ones read.
  template <typename Predicate>
  EngineStats AwaitStats(Predicate done) {
    EngineStats stats = engine->Stats();
    const absl::Time until = absl::Now() + absl::Seconds(10);
    while (!done(stats) && absl::Now() < until) {
      absl::SleepFor(absl::Milliseconds(5));
      stats = engine->Stats();
    }
    return stats;
  }
  // A copy of this node's whole pool.
  std::vector<uint8_t> PoolBytes() const { return transport.PoolSnapshot(); }
  // The bytes of `blocks` in this node's pool, block after block (each layer's K and V).
  std::vector<uint8_t> BlockBytes(const std::vector<int32_t>& blocks) const {
    const KvLayout& layout = backend->kv_layout();
    const std::span<const uint8_t> pool = transport.host_pool();
    const size_t block_bytes = static_cast<size_t>(layout.block_stride()) * DTypeSize(layout.dtype);
    std::vector<uint8_t> out;
    for (int32_t block : blocks) {
      for (int layer = 0; layer < layout.num_layers; ++layer) {
        for (int kv = 0; kv < 2; ++kv) {
          const size_t at =
              static_cast<size_t>(layout.Offset(layer, kv, block, 0, 0)) * DTypeSize(layout.dtype);
          out.insert(out.end(), pool.begin() + at, pool.begin() + at + block_bytes);
        }
      }
    }
    return out;
  }

  // Before the backend: it owns the pool the backend computes in.
  LocalTransport transport;
  TestModel model;
  std::unique_ptr<GatedBackend> backend;
  DecodeMetrics metrics;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<DecodeService> service;
  RunningServer server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::DecodeNode::Stub> stub;
};

// A request for `max_tokens` tokens of `prompt` (EOS ignored): greedy, or seeded sampling.
template <typename Request>
Request MigrationRequestOf(const std::string& router_id, const std::vector<int>& prompt,
                           int max_tokens, bool sampled) {
  Request request;
  request.set_request_id(router_id);
  request.mutable_prompt_token_ids()->Assign(prompt.begin(), prompt.end());
  v1::SamplingParams* sampling = request.mutable_sampling();
  sampling->set_max_tokens(max_tokens);
  sampling->set_ignore_eos(true);
  if (sampled) {
    sampling->set_temperature(0.9f);
    sampling->set_top_p(0.95f);
    sampling->set_seed(1234);
  } else {
    sampling->set_temperature(0);
  }
  return request;
}

// What a stream delivered: its tokens, the rng_counter of the event of each, the pauses, its end.
struct Streamed {
  std::vector<int> tokens;
  std::vector<uint64_t> rng_counters;
  int pauses = 0;
  std::string finish_reason;
};

// One Reserve or Generate stream, read event by event, with what it delivered so far.
struct MigrationStream : Streamed {
  MigrationStream(MigrationNode& node, const v1::NodeGenerateRequest& request) {
    SetDeadline();
    reader = node.stub->Generate(&context, request);
  }
  MigrationStream(MigrationNode& node, const v1::ReserveRequest& request) {
    SetDeadline();
    reader = node.stub->Reserve(&context, request);
  }
  void SetDeadline() { context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30))); }

  // Reads one event; false at the end of the stream.
  bool Next() {
    v1::DecodeEvent event;
    if (!reader->Read(&event)) return false;
    for (const v1::Token& token : event.tokens()) {
      tokens.push_back(token.id());
      rng_counters.push_back(event.rng_counter());
    }
    if (event.migration_paused()) ++pauses;
    if (!event.finish_reason().empty()) finish_reason = event.finish_reason();
    events.push_back(std::move(event));
    return true;
  }
  // Reads until the stream has delivered `n` tokens; false if it ended first.
  bool ReadTokens(size_t n) {
    while (tokens.size() < n) {
      if (!Next()) return false;
    }
    return true;
  }
  // Reads until an event with migration_paused; false if the stream ended first.
  bool ReadUntilPaused() {
    const int before = pauses;
    while (pauses == before) {
      if (!Next()) return false;
    }
    return true;
  }
  // Reads to the end; returns the call's status.
  grpc::Status Finish() {
    while (Next()) {
    }
    return reader->Finish();
  }

  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::DecodeEvent>> reader;
  std::vector<v1::DecodeEvent> events;
};

inline constexpr int kMigrationMaxTokens = 20;

// An 11-token prompt, a different one for each salt.
inline std::vector<int> MigrationPrompt(int salt = 0) {
  std::vector<int> prompt;
  for (int i = 0; i < 11; ++i) prompt.push_back((i * 37 + salt * 13 + 5) % 97);
  return prompt;
}

inline v1::NodeGenerateRequest GenerateOf(const std::string& router_id, bool sampled,
                                          int salt = 0) {
  return MigrationRequestOf<v1::NodeGenerateRequest>(router_id, MigrationPrompt(salt),
                                                     kMigrationMaxTokens, sampled);
}

// What an uninterrupted Generate of kMigrationMaxTokens streams.
inline Streamed RunUninterrupted(MigrationNode& node, const v1::NodeGenerateRequest& request) {
  MigrationStream stream(node, request);
  const grpc::Status status = stream.Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(stream.tokens.size(), static_cast<size_t>(kMigrationMaxTokens));
  EXPECT_EQ(stream.pauses, 0);
  return stream;
}

// For a stream started with the engine held after `steps` forward passes: reads `steps` tokens,
// asks for the pause, lets the engine go on and reads up to the migration_paused event.
inline void PauseAfter(MigrationNode& node, MigrationStream& stream, const std::string& router_id,
                       int steps) {
  ASSERT_TRUE(stream.ReadTokens(steps));
  EXPECT_TRUE(node.Pause(router_id).found());
  node.backend->Open();
  ASSERT_TRUE(stream.ReadUntilPaused());
  const v1::DecodeEvent& paused = stream.events.back();
  EXPECT_TRUE(paused.migration_paused());
  EXPECT_EQ(paused.tokens_size(), 0);
  EXPECT_TRUE(paused.finish_reason().empty());
  EXPECT_EQ(paused.rng_counter(), stream.rng_counters.back());
  EXPECT_LT(stream.tokens.size(), static_cast<size_t>(kMigrationMaxTokens));
}

// The destination's side: a Reserve for `moving`'s request with its output so far, read up to its
// handoff.
inline std::unique_ptr<MigrationStream> ReserveFor(MigrationNode& destination,
                                                   const std::string& router_id,
                                                   const MigrationStream& moving, bool sampled,
                                                   int salt = 0) {
  v1::ReserveRequest reserve = MigrationRequestOf<v1::ReserveRequest>(
      router_id, MigrationPrompt(salt), kMigrationMaxTokens, sampled);
  reserve.mutable_resumed_output_token_ids()->Assign(moving.tokens.begin(), moving.tokens.end());
  reserve.set_resumed_rng_counter(moving.events.back().rng_counter());
  auto stream = std::make_unique<MigrationStream>(destination, reserve);
  EXPECT_TRUE(stream->Next());
  EXPECT_TRUE(!stream->events.empty() && stream->events[0].has_handoff());
  return stream;
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_DECODE_NODE_DECODE_MIGRATION_NODES_H_
