// The GPU Backend: bf16 weights and a bf16 or fp8 (E4M3) paged KV pool on one CUDA device, cuBLASLt
// GEMMs and the kernels in kernels/, one stream per engine. A forward pass is: one host-to-device
// copy of the step's metadata (common/backend/device_forward_plan.h), the layers (f32 residual
// stream, fused RMSNorm+residual, QKV GEMM, RoPE fused with the KV write, prefill and/or paged
// decode attention, O GEMM, gate/up GEMM, SwiGLU, down GEMM), the LM head over the rows that want
// logits, and one device-to-host copy of those logits: the only synchronization of the step.
//
// Decode-only steps (one new token per sequence, logits for each) replay a CUDA graph captured
// once per (padded batch size, padded block-table width); other steps launch eagerly.
#ifndef TANDEM_COMMON_BACKEND_CUDA_CUDA_BACKEND_H_
#define TANDEM_COMMON_BACKEND_CUDA_CUDA_BACKEND_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/backend/backend.h"
#include "common/backend/cuda/cuda_weights.h"
#include "common/backend/device_forward_plan.h"
#include "common/kv/kv_scales.h"
#include "common/model/model_weights.h"
#include "kernels/device_buffer.h"
#include "kernels/gemm.h"

namespace tandem {

struct CudaBackendOptions {
  int device = 0;
  int block_size = 16;
  // KV pool size: num_kv_blocks when > 0, else as many blocks as fit in kv_cache_bytes.
  int num_kv_blocks = 0;
  size_t kv_cache_bytes = 0;
  // Scratch is sized for this many tokens per Forward (a bigger batch grows it).
  int max_batch_tokens = 512;
  // Sequences per Forward; sizes the logits and decode-attention buffers and the largest graph.
  int max_num_seqs = 64;
  // Longest context attention must handle; 0: the model's max_position_embeddings.
  int max_context = 0;
  bool cuda_graphs = true;
  // What the pool stores: kBF16, or kFP8E4M3 with a scale per (layer, K|V, kv head) that a
  // calibration prefill at load picks (common/kv/kv_scales.h; cuda_kv_calibration.cc).
  DType kv_cache_dtype = DType::kBF16;
  // Where the KV pool lives. Unset: cudaMalloc. Set: called once with the pool's size in bytes;
  // must return device memory on `device` that outlives the backend (a KV transport's, registered
  // for transfers). The backend zeroes it.
  std::function<absl::StatusOr<void*>(size_t bytes)> kv_pool_allocator;
};

class CudaBackend : public Backend {
 public:
  // Uploads `weights` (bf16) to options.device and allocates the pool and scratch.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(const ModelWeights& weights,
                                                             const CudaBackendOptions& options);
  // The same with random weights of `config`'s shapes made on the device (benchmarks).
  static absl::StatusOr<std::unique_ptr<CudaBackend>> CreateWithRandomWeights(
      const ModelConfig& config, uint64_t seed, const CudaBackendOptions& options);
  ~CudaBackend() override;

  std::string_view name() const override { return "cuda"; }
  const ModelConfig& config() const override { return config_; }
  const KvLayout& kv_layout() const override { return layout_; }
  // Not reentrant: one caller (the engine thread) at a time.
  absl::Status Forward(const ForwardBatch& batch, LogitsOutput out) override;
  // The pass, then temperature/top-k/top-p sampling on the GPU (kernels/sampling.h); only the
  // tokens come back to the host.
  bool CanSampleOnDevice() const override { return true; }
  absl::Status ForwardAndSample(const ForwardBatch& batch, std::span<const DeviceSampling> rows,
                                std::span<TokenId> tokens) override;

  void* kv_pool() const { return kv_pool_; }
  // An fp8 pool's scales (empty for bf16); kv_layout().scale_fingerprint names them.
  const KvScales& kv_scales() const { return kv_scales_; }
  size_t kv_pool_bytes() const { return layout_.total_bytes(); }
  int device() const { return options_.device; }
  size_t weight_bytes() const { return weights_.bytes(); }
  cudaStream_t stream() const { return stream_; }
  int graphs_captured() const { return static_cast<int>(graphs_.size()); }
  int64_t graph_replays() const { return graph_replays_; }

 private:
  CudaBackend(const ModelConfig& config, const CudaBackendOptions& options);
  absl::Status Init(CudaWeights weights);
  // Grows the scratch buffers for `tokens` rows (dropping captured graphs when they move).
  absl::Status EnsureScratch(int tokens);
  // fp8: runs the calibration prefill over a temporary bf16 pool and sets kv_scales_,
  // kv_scales_device_ and layout_.scale_fingerprint.
  absl::Status CalibrateFp8Scales();
  // Grows the buffers of logits rows (the normed rows, logits, sampling) to hold `rows`.
  absl::Status EnsureLogitRows(int rows);
  // Enqueues the whole pass for `plan`, whose bytes are already at meta_ on the device; logits
  // rows end in logits_.
  absl::Status EnqueuePass(const DeviceForwardPlan& plan);
  // Copies the plan's bytes to the device (through the pinned staging buffer).
  absl::Status UploadPlan(const DeviceForwardPlan& plan);
  absl::Status RunGraph(const ForwardBatch& batch);
  // Validates `batch` and enqueues its pass (graph or eager); the logits of its `*logit_rows` rows
  // are left in logits_ on the device.
  absl::Status RunPass(const ForwardBatch& batch, int* logit_rows);
  // The graph shape a decode-only batch pads to, or {0, 0} when it is too big for graphs.
  std::pair<int, int> GraphShape(const ForwardBatch& batch) const;

  ModelConfig config_;
  CudaBackendOptions options_;
  KvLayout layout_;
  int max_context_ = 0;
  int max_table_width_ = 0;
  float attention_scale_ = 0;
  cudaStream_t stream_ = nullptr;
  CudaWeights weights_;
  std::unique_ptr<kernels::GemmRunner> gemm_;
  kernels::DeviceBuffer owned_pool_;
  void* kv_pool_ = nullptr;
  kernels::DeviceBuffer inv_freq_;
  KvScales kv_scales_;
  kernels::DeviceBuffer kv_scales_device_;  // kv_scales_.values; empty for bf16
  // Scratch, sized for scratch_tokens_ rows.
  int scratch_tokens_ = 0;
  kernels::DeviceBuffer x_, h_, qkv_, q_, attn_, o_, gate_up_, act_, mlp_out_;
  kernels::DeviceBuffer decode_workspace_;  // sized for max_num_seqs
  size_t decode_workspace_bytes_ = 0;
  kernels::DeviceBuffer meta_;
  kernels::PinnedHostBuffer meta_host_;
  // Logits rows (at least max_num_seqs; more once a pass verifies drafts): the normed rows, the
  // logits, and device sampling's per-row parameters in and tokens out.
  int logit_rows_capacity_ = 0;
  kernels::DeviceBuffer h_rows_, logits_;
  kernels::PinnedHostBuffer logits_host_;
  kernels::DeviceBuffer sampling_params_, sampled_tokens_;
  kernels::PinnedHostBuffer sampling_params_host_, sampled_tokens_host_;
  DeviceForwardPlan plan_;
  std::map<std::pair<int, int>, cudaGraphExec_t> graphs_;
  int64_t graph_replays_ = 0;
};

}  // namespace tandem

#endif  // TANDEM_COMMON_BACKEND_CUDA_CUDA_BACKEND_H_
