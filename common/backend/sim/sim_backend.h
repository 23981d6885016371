// The sim Backend: no math. Each Forward takes as long as the roofline model (StepTimeModel) of a
// named GPU says the step would, writes a deterministic pattern into the KV blocks it was given
// (so transfers move real bytes that can be checked), and emits deterministic pseudo-random
// tokens. The KV pool has the block count the GPU's memory holds for the real model in the KV
// dtype (bf16 unless --kv-cache-dtype says otherwise); each token's slot in it holds 1/kv_scale of
// the real bytes (head_dim / kv_scale elements per head), and the
// pool lives in host memory so the real UCX transport moves it. Router, scheduler, block manager,
// transport and gRPC around it are the real code: a cluster on a CPU box runs at GPU timescales.
#ifndef TANDEM_COMMON_BACKEND_SIM_SIM_BACKEND_H_
#define TANDEM_COMMON_BACKEND_SIM_SIM_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/backend/backend.h"
#include "common/backend/sim/step_time_model.h"
#include "common/util/clock.h"

namespace tandem {

struct SimBackendOptions {
  std::string gpu = "h100";
  int tensor_parallel = 1;
  int block_size = 16;
  // What a GPU's KV cache would store (bf16, fp8 E4M3 or f32): the block count, each step's KV
  // read and write time and the pool's bytes (so each transfer's) follow its size.
  DType kv_dtype = DType::kBF16;
  double memory_utilization = 0.9;
  // > 0: this many KV blocks instead of what the GPU's memory holds (tests).
  int num_kv_blocks = 0;
  // The pool keeps 1/kv_scale of each token's real KV bytes: a power of two dividing head_dim.
  int kv_scale = 1;
  // Each step takes time_scale times the modelled time (a slower-than-real cluster for machines
  // that cannot keep up with the real token rate; tandem-bench --time-scale reads it back).
  double time_scale = 1.0;
  // Where the pool lives (a KV transport's registered memory); unset: the backend allocates it.
  // Same contract as CpuBackendOptions::kv_pool_allocator.
  std::function<absl::StatusOr<void*>(size_t bytes)> kv_pool_allocator;
  // Waits `d` (the rest of the step). Unset: sleeps. Tests inject a recorder; a virtual-time run
  // injects one that advances its clock.
  std::function<void(absl::Duration d)> wait;
  // The clock a step's start and end are read on (borrowed).
  Clock* clock = Clock::Real();
};

// What the sim has done so far (for logs and tests).
struct SimBackendStats {
  int64_t steps = 0;
  double modelled_busy_s = 0;  // sum of modelled step times (before time_scale)
  StepTime last_step;
  StepWork last_cost;
};

class SimBackend : public Backend {
 public:
  // `config` is the model's shape (config.json, or a preset with the served vocabulary).
  static absl::StatusOr<std::unique_ptr<SimBackend>> Create(const ModelConfig& config,
                                                            const SimBackendOptions& options);
  ~SimBackend() override;

  std::string_view name() const override { return "sim"; }
  const ModelConfig& config() const override { return config_; }
  const KvLayout& kv_layout() const override { return layout_; }
  absl::Status Forward(const ForwardBatch& batch, LogitsOutput out) override;
  bool CanSampleOnDevice() const override { return true; }
  // Sampling parameters are ignored: the sim's tokens are a function of the context only.
  absl::Status ForwardAndSample(const ForwardBatch& batch, std::span<const DeviceSampling> rows,
                                std::span<TokenId> tokens) override;

  const StepTimeModel& time_model() const { return model_; }
  // Real KV bytes of one token (what a GPU would hold and move) and what the pool holds of it.
  int64_t real_kv_bytes_per_token() const { return model_.KvBytesPerToken(); }
  size_t pool_bytes() const { return layout_.total_bytes(); }
  void* kv_pool() const { return pool_; }
  SimBackendStats stats() const;

  // The token the sim emits after `last_token` at `position` (the position of the new token),
  // uniform over [0, token_limit): the same context gives the same token on every node.
  static TokenId NextToken(TokenId last_token, int64_t position, int32_t token_limit);
  // Drafts of known quality for speculative decoding on the sim (--speculative sim): replaces
  // `drafts` with `max_drafts` tokens after `context`, each the sim's own next token with
  // probability `acceptance_rate` and another token otherwise, independently per position (a hash
  // of the position and the token before it decides). Position i of a step is then accepted
  // with probability acceptance_rate^(i+1), the i.i.d. model of Leviathan et al.
  static void ProposeDrafts(std::span<const TokenId> context, int32_t max_drafts,
                            double acceptance_rate, int32_t token_limit,
                            std::vector<TokenId>* drafts);
  // Whether the draft for `position` after `last_token` is the right one (ProposeDrafts; tandem-sim
  // draws its drafts with it too): true with probability `acceptance_rate`.
  static bool DraftIsRight(TokenId last_token, int64_t position, double acceptance_rate);
  // The 16-bit word whose low DTypeSize bytes (repeated for f32) every element of (layer, kv,
  // head) of the token at `position` holds.
  static uint16_t KvPatternWord(TokenId token, int64_t position, int layer, int kv, int head);
  // Ordinary token ids are below this: the vocabulary minus trailing special tokens (BOS/EOS in
  // its upper half), so the sim never emits EOS or a special token.
  int32_t token_limit() const { return token_limit_; }

 private:
  SimBackend(const ModelConfig& config, const KvLayout& layout, StepTimeModel model,
             const SimBackendOptions& options);
  // Validates, writes the KV pattern, returns the modelled time of the step and each logits
  // row's next token.
  absl::StatusOr<absl::Duration> Step(const ForwardBatch& batch, size_t logits_capacity,
                                      std::span<TokenId> next_tokens);
  void WriteKvPattern(const ForwardItem& item);
  void WaitUntil(absl::Time end);

  const ModelConfig config_;
  const KvLayout layout_;
  const StepTimeModel model_;
  const SimBackendOptions options_;
  int32_t token_limit_ = 0;
  uint8_t* pool_ = nullptr;
  bool owns_pool_ = false;

  mutable absl::Mutex mu_;
  SimBackendStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_SIM_SIM_BACKEND_H_
