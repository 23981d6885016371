// Helpers shared by the engine tests: building engines over FakeBackend and running requests.
#ifndef TANDEM_TESTS_COMMON_ENGINE_ENGINE_TEST_UTIL_H_
#define TANDEM_TESTS_COMMON_ENGINE_ENGINE_TEST_UTIL_H_

#include <memory>
#include <vector>

#include "common/engine/engine.h"
#include "common/engine/request_stream.h"
#include "gtest/gtest.h"
#include "tests/common/engine/fake_backend.h"

namespace tandem {

inline constexpr int kVocab = 64;

inline std::unique_ptr<Engine> MakeEngine(Backend* backend, int max_num_batched_tokens = 2048,
                                          int max_num_seqs = 32, bool prefix_caching = true) {
  EngineOptions options;
  options.scheduler.max_num_batched_tokens = max_num_batched_tokens;
  options.scheduler.max_num_seqs = max_num_seqs;
  options.enable_prefix_caching = prefix_caching;
  auto engine = Engine::Create(backend, options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return std::move(engine).value();
}

inline GenerateRequest GreedyRequest(std::vector<TokenId> prompt, int max_tokens) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.params.temperature = 0.0f;
  r.params.max_tokens = max_tokens;
  return r;
}

// Deterministic prompt of `n` tokens in [0, kVocab), different for each `salt`.
inline std::vector<TokenId> MakePrompt(int n, int salt) {
  std::vector<TokenId> p(n);
  for (int i = 0; i < n; ++i) p[i] = static_cast<TokenId>((i * 31 + salt * 17 + i * i) % kVocab);
  return p;
}

// Submits all requests, runs the engine on this thread until idle, returns results in order.
inline std::vector<GenerationResult> RunAll(Engine& engine, std::vector<GenerateRequest> requests) {
  std::vector<std::unique_ptr<RequestStream>> streams;
  for (GenerateRequest& r : requests) {
    streams.push_back(std::make_unique<RequestStream>());
    r.on_event = streams.back()->Callback();
    auto id = engine.Submit(std::move(r));
    EXPECT_TRUE(id.ok()) << id.status();
  }
  absl::Status status = engine.RunUntilIdle();
  EXPECT_TRUE(status.ok()) << status;
  std::vector<GenerationResult> results;
  for (auto& s : streams) {
    EXPECT_TRUE(s->finished());
    results.push_back(s->Wait());
  }
  return results;
}

inline GenerationResult RunOne(Engine& engine, GenerateRequest request) {
  std::vector<GenerateRequest> v;
  v.push_back(std::move(request));
  return RunAll(engine, std::move(v))[0];
}

}  // namespace tandem

#endif  // TANDEM_TESTS_COMMON_ENGINE_ENGINE_TEST_UTIL_H_
