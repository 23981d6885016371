#include "common/backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/backend/batch_validation.h"
#include "common/backend/rope.h"
#include "common/kv/kv_dtype.h"
#include "common/util/status_macros.h"
#include "common/util/thread_pool.h"
#include "kernels/cuda_status.h"
#include "kernels/decode_attention.h"
#include "kernels/embedding.h"
#include "kernels/prefill_attention.h"
#include "kernels/rms_norm.h"
#include "kernels/rope_kv_write.h"
#include "kernels/sampling.h"
#include "kernels/swiglu.h"
#include "spdlog/spdlog.h"

namespace tandem {
namespace {

using kernels::DeviceBuffer;

size_t Align16(size_t n) { return (n + 15) / 16 * 16; }

// The largest DeviceForwardPlan for `tokens` rows, `seqs` items and tables `width` blocks wide.
size_t MaxPlanBytes(int tokens, int seqs, int width) {
  const size_t t = tokens, s = seqs, w = width;
  return Align16(4 * t) * 2 + Align16(8 * t) + Align16(4 * s) * 6 + Align16(4 * s * w) * 2;
}

absl::StatusOr<DeviceBuffer> Allocate(size_t bytes, const char* what) {
  auto buffer = DeviceBuffer::Allocate(bytes);
  if (!buffer.ok()) {
    return absl::Status(buffer.status().code(),
                        absl::StrCat("cuda backend: ", what, ": ", buffer.status().message()));
  }
  return buffer;
}

// Powers of two from `lo`, capped at `cap` (which is always the last bucket).
int Bucket(int n, int lo, int cap) {
  int b = lo;
  while (b < n) b *= 2;
  return std::min(b, cap);
}

}  // namespace

CudaBackend::CudaBackend(const ModelConfig& config, const CudaBackendOptions& options)
    : config_(config), options_(options) {}

CudaBackend::~CudaBackend() {
  for (auto& [shape, exec] : graphs_) cudaGraphExecDestroy(exec);
  if (stream_ != nullptr) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(
    const ModelWeights& weights, const CudaBackendOptions& options) {
  TANDEM_RETURN_IF_CUDA_ERROR(cudaSetDevice(options.device),
                              absl::StrCat("cudaSetDevice(", options.device, ")"));
  ThreadPool pool(0);
  ASSIGN_OR_RETURN(CudaWeights device_weights, UploadCudaWeights(weights, pool));
  auto backend = std::unique_ptr<CudaBackend>(new CudaBackend(weights.config, options));
  RETURN_IF_ERROR(backend->Init(std::move(device_weights)));
  return backend;
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::CreateWithRandomWeights(
    const ModelConfig& config, uint64_t seed, const CudaBackendOptions& options) {
  TANDEM_RETURN_IF_CUDA_ERROR(cudaSetDevice(options.device),
                              absl::StrCat("cudaSetDevice(", options.device, ")"));
  ASSIGN_OR_RETURN(CudaWeights device_weights, RandomCudaWeights(config, seed));
  auto backend = std::unique_ptr<CudaBackend>(new CudaBackend(config, options));
  RETURN_IF_ERROR(backend->Init(std::move(device_weights)));
  return backend;
}

absl::Status CudaBackend::Init(CudaWeights weights) {
  const ModelConfig& c = config_;
  if (c.head_dim != 64 && c.head_dim != 128) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the cuda backend's attention kernels take head_dim 64 or 128; this model has ",
        c.head_dim));
  }
  if (options_.block_size <= 0 || options_.max_batch_tokens <= 0 || options_.max_num_seqs <= 0) {
    return absl::InvalidArgumentError(
        "cuda backend: block_size, max_batch_tokens and max_num_seqs must be positive");
  }
  weights_ = std::move(weights);
  TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
                              "cudaStreamCreate");
  ASSIGN_OR_RETURN(gemm_, kernels::GemmRunner::Create());

  max_context_ = options_.max_context > 0 ? options_.max_context : c.max_position_embeddings;
  if (max_context_ <= 0) max_context_ = 4096;
  max_table_width_ = (max_context_ + options_.block_size - 1) / options_.block_size;
  attention_scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.head_dim)));

  if (options_.kv_cache_dtype != DType::kBF16 && options_.kv_cache_dtype != DType::kFP8E4M3) {
    return absl::InvalidArgumentError(absl::StrCat("cuda backend: KV dtype ",
                                                   KvDTypeName(options_.kv_cache_dtype),
                                                   "; it stores bf16 or fp8_e4m3"));
  }
  layout_.dtype = options_.kv_cache_dtype;
  layout_.num_layers = c.num_layers;
  layout_.num_kv_heads = c.num_kv_heads;
  layout_.head_dim = c.head_dim;
  layout_.block_size = options_.block_size;
  if (options_.num_kv_blocks > 0) {
    layout_.num_blocks = options_.num_kv_blocks;
  } else {
    layout_.num_blocks = 1;
    const size_t per_block = layout_.total_bytes();
    layout_.num_blocks = static_cast<int>(options_.kv_cache_bytes / per_block);
  }
  if (layout_.num_blocks <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("cuda backend: the KV cache holds no block (",
                                                   options_.kv_cache_bytes, " bytes)"));
  }
  const size_t pool_bytes = layout_.total_bytes();
  if (options_.kv_pool_allocator) {
    ASSIGN_OR_RETURN(kv_pool_, options_.kv_pool_allocator(pool_bytes));
  } else {
    ASSIGN_OR_RETURN(owned_pool_, Allocate(pool_bytes, "KV pool"));
    kv_pool_ = owned_pool_.data();
  }
  TANDEM_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(kv_pool_, 0, pool_bytes, stream_),
                              "zeroing the pool");

  const std::vector<float> inv_freq = RopeInvFreq(c);
  ASSIGN_OR_RETURN(inv_freq_, Allocate(inv_freq.size() * sizeof(float), "inv_freq"));
  TANDEM_RETURN_IF_CUDA_ERROR(
      cudaMemcpy(inv_freq_.data(), inv_freq.data(), inv_freq_.bytes(), cudaMemcpyHostToDevice),
      "copying inv_freq");

  RETURN_IF_ERROR(EnsureLogitRows(options_.max_num_seqs));
  decode_workspace_bytes_ =
      kernels::DecodeAttentionWorkspaceBytes(options_.max_num_seqs, c.num_heads, c.num_kv_heads,
                                             c.head_dim, max_table_width_ * options_.block_size);
  ASSIGN_OR_RETURN(decode_workspace_, Allocate(decode_workspace_bytes_, "decode workspace"));
  RETURN_IF_ERROR(EnsureScratch(std::max(options_.max_batch_tokens, options_.max_num_seqs)));
  if (layout_.dtype == DType::kFP8E4M3) RETURN_IF_ERROR(CalibrateFp8Scales());
  TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_), "initializing the cuda backend");
  return absl::OkStatus();
}

absl::Status CudaBackend::EnsureScratch(int tokens) {
  if (tokens <= scratch_tokens_) return absl::OkStatus();
  TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_), "growing scratch");
  for (auto& [shape, exec] : graphs_) cudaGraphExecDestroy(exec);
  graphs_.clear();
  const ModelConfig& c = config_;
  const size_t t = tokens;
  const size_t qkv = c.q_size() + 2 * c.kv_size();
  ASSIGN_OR_RETURN(x_, Allocate(t * c.hidden_size * sizeof(float), "residual"));
  ASSIGN_OR_RETURN(h_, Allocate(t * c.hidden_size * 2, "normed rows"));
  ASSIGN_OR_RETURN(qkv_, Allocate(t * qkv * sizeof(float), "qkv"));
  ASSIGN_OR_RETURN(q_, Allocate(t * c.q_size() * 2, "queries"));
  ASSIGN_OR_RETURN(attn_, Allocate(t * c.q_size() * 2, "attention output"));
  ASSIGN_OR_RETURN(o_, Allocate(t * c.hidden_size * 2, "o_proj output"));
  ASSIGN_OR_RETURN(gate_up_, Allocate(t * 2 * c.intermediate_size * 2, "gate/up"));
  ASSIGN_OR_RETURN(act_, Allocate(t * c.intermediate_size * 2, "activation"));
  ASSIGN_OR_RETURN(mlp_out_, Allocate(t * c.hidden_size * 2, "mlp output"));
  const size_t meta_bytes = MaxPlanBytes(tokens, options_.max_num_seqs, max_table_width_);
  ASSIGN_OR_RETURN(meta_, Allocate(meta_bytes, "step metadata"));
  ASSIGN_OR_RETURN(meta_host_, kernels::PinnedHostBuffer::Allocate(meta_bytes));
  scratch_tokens_ = tokens;
  return absl::OkStatus();
}

absl::Status CudaBackend::EnsureLogitRows(int rows) {
  if (rows <= logit_rows_capacity_) return absl::OkStatus();
  TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_), "growing the logits buffers");
  for (auto& [shape, exec] : graphs_) cudaGraphExecDestroy(exec);  // they hold the old pointers
  graphs_.clear();
  const ModelConfig& c = config_;
  const size_t r = rows;
  ASSIGN_OR_RETURN(h_rows_, Allocate(r * c.hidden_size * 2, "logits rows"));
  ASSIGN_OR_RETURN(logits_, Allocate(r * c.vocab_size * sizeof(float), "logits"));
  ASSIGN_OR_RETURN(logits_host_, kernels::PinnedHostBuffer::Allocate(logits_.bytes()));
  ASSIGN_OR_RETURN(sampling_params_,
                   Allocate(r * sizeof(kernels::SamplingRowParams), "sampling parameters"));
  ASSIGN_OR_RETURN(sampled_tokens_, Allocate(r * sizeof(int32_t), "sampled tokens"));
  ASSIGN_OR_RETURN(sampling_params_host_,
                   kernels::PinnedHostBuffer::Allocate(sampling_params_.bytes()));
  ASSIGN_OR_RETURN(sampled_tokens_host_,
                   kernels::PinnedHostBuffer::Allocate(sampled_tokens_.bytes()));
  logit_rows_capacity_ = rows;
  return absl::OkStatus();
}

absl::Status CudaBackend::UploadPlan(const DeviceForwardPlan& plan) {
  if (plan.bytes.size() > meta_.bytes()) {
    return absl::InternalError(absl::StrCat("step metadata of ", plan.bytes.size(),
                                            " bytes exceeds its buffer of ", meta_.bytes()));
  }
  std::memcpy(meta_host_.data(), plan.bytes.data(), plan.bytes.size());
  TANDEM_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(meta_.data(), meta_host_.data(), plan.bytes.size(),
                                              cudaMemcpyHostToDevice, stream_),
                              "copying step metadata");
  return absl::OkStatus();
}

absl::Status CudaBackend::EnqueuePass(const DeviceForwardPlan& plan) {
  const ModelConfig& c = config_;
  const int t = plan.num_tokens;
  const int hidden = c.hidden_size;
  const int q_size = c.q_size();
  const int qkv_size = q_size + 2 * c.kv_size();
  const int inter = c.intermediate_size;
  const auto* meta = meta_.as<const uint8_t>();
  auto i32 = [&](size_t offset) { return reinterpret_cast<const int32_t*>(meta + offset); };
  void* const pool = kv_pool_;
  // Set only while the pool is fp8 (the calibration prefill runs on a bf16 pool).
  const float* const kv_scales =
      layout_.dtype == DType::kFP8E4M3 ? kv_scales_device_.as<const float>() : nullptr;
  auto* x = x_.as<float>();
  auto* h = h_.as<__nv_bfloat16>();
  auto* mlp_out = mlp_out_.as<__nv_bfloat16>();

  RETURN_IF_ERROR(kernels::EmbeddingGather(weights_.embed, c.vocab_size, hidden,
                                           i32(plan.token_ids), t, x, stream_));
  for (int l = 0; l < c.num_layers; ++l) {
    const CudaLayerWeights& w = weights_.layers[l];
    kernels::RmsNormResidualArgs input_norm;
    input_norm.residual = x;
    input_norm.delta = l == 0 ? nullptr : mlp_out;
    input_norm.weight = w.input_norm;
    input_norm.n = t;
    input_norm.hidden = hidden;
    input_norm.eps = c.rms_norm_eps;
    input_norm.out = h;
    RETURN_IF_ERROR(kernels::RmsNormResidual(input_norm, stream_));

    RETURN_IF_ERROR(gemm_->Linear(
        {h, w.wqkv, qkv_.data(), t, hidden, qkv_size, kernels::GemmOutput::kF32}, stream_));
    kernels::RopeKvWriteArgs rope;
    rope.qkv = qkv_.as<const float>();
    rope.qkv_bias = w.bqkv;
    rope.q_norm = w.q_norm;
    rope.k_norm = w.k_norm;
    rope.eps = c.rms_norm_eps;
    rope.inv_freq = inv_freq_.as<const float>();
    rope.positions = i32(plan.positions);
    rope.slot_mapping = reinterpret_cast<const int64_t*>(meta + plan.slot_mapping);
    rope.n = t;
    rope.num_heads = c.num_heads;
    rope.layout = layout_;
    rope.layer = l;
    rope.kv_pool = pool;
    rope.kv_scales = kv_scales;
    rope.q_out = q_.as<__nv_bfloat16>();
    RETURN_IF_ERROR(kernels::RopeKvWrite(rope, stream_));

    if (plan.num_prefill > 0) {
      kernels::PrefillAttentionArgs a;
      a.q = q_.as<const __nv_bfloat16>();
      a.out = attn_.as<__nv_bfloat16>();
      a.kv_pool = pool;
      a.kv_scales = kv_scales;
      a.layout = layout_;
      a.layer = l;
      a.num_heads = c.num_heads;
      a.num_items = plan.num_prefill;
      a.q_starts = i32(plan.prefill_q_starts);
      a.q_lens = i32(plan.prefill_q_lens);
      a.start_positions = i32(plan.prefill_start_positions);
      a.block_tables = i32(plan.prefill_block_tables);
      a.max_blocks_per_seq = plan.prefill_table_width;
      a.max_q_len = plan.prefill_max_q_len;
      a.sliding_window = c.sliding_window;
      a.scale = attention_scale_;
      RETURN_IF_ERROR(kernels::PrefillAttention(a, stream_));
    }
    if (plan.num_decode > 0) {
      kernels::DecodeAttentionArgs a;
      a.q = q_.as<const __nv_bfloat16>();
      a.out = attn_.as<__nv_bfloat16>();
      a.kv_pool = pool;
      a.kv_scales = kv_scales;
      a.layout = layout_;
      a.layer = l;
      a.num_heads = c.num_heads;
      a.num_seqs = plan.num_decode;
      a.token_rows = i32(plan.decode_token_rows);
      a.context_lens = i32(plan.decode_context_lens);
      a.block_tables = i32(plan.decode_block_tables);
      a.max_blocks_per_seq = plan.decode_table_width;
      // The table width, not the batch's longest context: a graph replays with other contexts.
      a.max_context = plan.decode_table_width * layout_.block_size;
      a.sliding_window = c.sliding_window;
      a.scale = attention_scale_;
      a.workspace = decode_workspace_.as<float>();
      a.workspace_bytes = decode_workspace_bytes_;
      RETURN_IF_ERROR(kernels::PagedDecodeAttention(a, stream_));
    }

    RETURN_IF_ERROR(gemm_->Linear({attn_.as<const __nv_bfloat16>(), w.wo, o_.data(), t, q_size,
                                   hidden, kernels::GemmOutput::kBf16},
                                  stream_));
    kernels::RmsNormResidualArgs post_norm;
    post_norm.residual = x;
    post_norm.delta = o_.as<const __nv_bfloat16>();
    post_norm.delta_bias = w.bo;
    post_norm.weight = w.post_norm;
    post_norm.n = t;
    post_norm.hidden = hidden;
    post_norm.eps = c.rms_norm_eps;
    post_norm.out = h;
    RETURN_IF_ERROR(kernels::RmsNormResidual(post_norm, stream_));
    RETURN_IF_ERROR(gemm_->Linear(
        {h, w.w_gate_up, gate_up_.data(), t, hidden, 2 * inter, kernels::GemmOutput::kBf16},
        stream_));
    RETURN_IF_ERROR(kernels::SwiGlu(gate_up_.as<const __nv_bfloat16>(), t, inter,
                                    act_.as<__nv_bfloat16>(), stream_));
    RETURN_IF_ERROR(gemm_->Linear({act_.as<const __nv_bfloat16>(), w.w_down, mlp_out, t, inter,
                                   hidden, kernels::GemmOutput::kBf16},
                                  stream_));
  }
  if (plan.num_logit_rows == 0) return absl::OkStatus();
  kernels::RmsNormResidualArgs final_norm;
  final_norm.residual = x;
  final_norm.delta = mlp_out;
  final_norm.weight = weights_.final_norm;
  final_norm.n = t;
  final_norm.hidden = hidden;
  final_norm.eps = c.rms_norm_eps;
  final_norm.out = h;
  RETURN_IF_ERROR(kernels::RmsNormResidual(final_norm, stream_));
  RETURN_IF_ERROR(kernels::GatherRows(h, hidden, i32(plan.logit_rows), plan.num_logit_rows,
                                      h_rows_.as<__nv_bfloat16>(), stream_));
  return gemm_->Linear({h_rows_.as<const __nv_bfloat16>(), weights_.lm_head, logits_.data(),
                        plan.num_logit_rows, hidden, c.vocab_size, kernels::GemmOutput::kF32},
                       stream_);
}

std::pair<int, int> CudaBackend::GraphShape(const ForwardBatch& batch) const {
  const int seqs = static_cast<int>(batch.items.size());
  int width = 0;
  for (const ForwardItem& item : batch.items) {
    width = std::max(width, (item.start_pos + layout_.block_size) / layout_.block_size);
  }
  if (seqs > options_.max_num_seqs || width > max_table_width_) return {0, 0};
  return {Bucket(seqs, 1, options_.max_num_seqs), Bucket(width, 16, max_table_width_)};
}

absl::Status CudaBackend::RunGraph(const ForwardBatch& batch) {
  const auto [seqs, width] = GraphShape(batch);
  const PlanPadding padding{seqs, width};
  RETURN_IF_ERROR(BuildDeviceForwardPlan(batch, layout_.block_size, &padding, &plan_));
  RETURN_IF_ERROR(UploadPlan(plan_));
  auto it = graphs_.find({seqs, width});
  if (it == graphs_.end()) {
    // One eager pass first, so everything a pass sets up on first use (cuBLASLt's algorithm choice
    // per shape, kernel attributes) happens outside the capture. Its K/V writes are the ones the
    // replay makes again, with the same values.
    RETURN_IF_ERROR(EnqueuePass(plan_));
    cudaGraph_t graph = nullptr;
    TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal),
                                "cudaStreamBeginCapture");
    const absl::Status enqueued = EnqueuePass(plan_);
    const cudaError_t ended = cudaStreamEndCapture(stream_, &graph);
    if (!enqueued.ok()) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      return enqueued;
    }
    TANDEM_RETURN_IF_CUDA_ERROR(ended, "cudaStreamEndCapture");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    TANDEM_RETURN_IF_CUDA_ERROR(instantiated, "cudaGraphInstantiate");
    it = graphs_.emplace(std::make_pair(seqs, width), exec).first;
  }
  TANDEM_RETURN_IF_CUDA_ERROR(cudaGraphLaunch(it->second, stream_), "cudaGraphLaunch");
  ++graph_replays_;
  return absl::OkStatus();
}

absl::Status CudaBackend::RunPass(const ForwardBatch& batch, int* logit_rows) {
  if (static_cast<int>(batch.items.size()) > options_.max_num_seqs) {
    return absl::InvalidArgumentError(absl::StrCat("batch of ", batch.items.size(),
                                                   " sequences; the cuda backend takes at most ",
                                                   options_.max_num_seqs));
  }
  int tokens = 0;
  int longest = 0;
  int logits_rows = 0;
  for (const ForwardItem& item : batch.items) {
    tokens += static_cast<int>(item.tokens.size());
    logits_rows += LogitsRows(item);
    longest = std::max(longest, item.start_pos + static_cast<int>(item.tokens.size()));
  }
  if (longest > max_context_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "context of ", longest, " positions; the cuda backend was sized for ", max_context_));
  }
  TANDEM_RETURN_IF_CUDA_ERROR(cudaSetDevice(options_.device), "cudaSetDevice");
  RETURN_IF_ERROR(EnsureScratch(tokens));
  // Speculative verification asks for several rows per sequence: grown here, kept from then on.
  RETURN_IF_ERROR(EnsureLogitRows(logits_rows));
  if (options_.cuda_graphs && IsDecodeOnly(batch) && GraphShape(batch).first > 0) {
    const absl::Status graph = RunGraph(batch);
    if (graph.ok()) {
      *logit_rows = static_cast<int>(batch.items.size());  // padding rows follow, ignored
      return absl::OkStatus();
    }
    // A capture the driver refuses should not take the node down: the eager path is correct,
    // only slower. (A sticky device error fails the eager pass below as well.)
    spdlog::warn("cuda backend: CUDA graph failed ({}); decode steps run eagerly from now on",
                 graph.ToString());
    options_.cuda_graphs = false;
    cudaGetLastError();
  }
  RETURN_IF_ERROR(BuildDeviceForwardPlan(batch, layout_.block_size, nullptr, &plan_));
  RETURN_IF_ERROR(UploadPlan(plan_));
  RETURN_IF_ERROR(EnqueuePass(plan_));
  *logit_rows = plan_.num_logit_rows;
  return absl::OkStatus();
}

absl::Status CudaBackend::Forward(const ForwardBatch& batch, LogitsOutput out) {
  RETURN_IF_ERROR(ValidateForwardBatch(batch, out, config_, layout_));
  if (batch.items.empty()) return absl::OkStatus();
  int logit_rows = 0;
  RETURN_IF_ERROR(RunPass(batch, &logit_rows));
  const size_t logits_bytes = size_t{static_cast<size_t>(logit_rows)} * config_.vocab_size * 4;
  if (logits_bytes > 0) {
    TANDEM_RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(logits_host_.data(), logits_.data(), logits_bytes,
                                                cudaMemcpyDeviceToHost, stream_),
                                "copying logits to the host");
  }
  TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_), "cuda backend step");
  if (logits_bytes > 0) std::memcpy(out.logits.data(), logits_host_.data(), logits_bytes);
  return absl::OkStatus();
}

absl::Status CudaBackend::ForwardAndSample(const ForwardBatch& batch,
                                           std::span<const DeviceSampling> rows,
                                           std::span<TokenId> tokens) {
  size_t wanted = 0;
  for (const ForwardItem& item : batch.items) wanted += LogitsRows(item);
  if (rows.size() != wanted || tokens.size() < wanted) {
    return absl::InvalidArgumentError(absl::StrCat("ForwardAndSample: ", wanted, " logits rows, ",
                                                   rows.size(), " sampling rows, room for ",
                                                   tokens.size(), " tokens"));
  }
  // Validation needs an output span of the right size; no logits are written to it.
  RETURN_IF_ERROR(ValidateForwardBatch(
      batch, {std::span<float>(static_cast<float*>(nullptr), wanted * config_.vocab_size)}, config_,
      layout_));
  if (batch.items.empty()) return absl::OkStatus();
  int logit_rows = 0;
  RETURN_IF_ERROR(RunPass(batch, &logit_rows));
  if (wanted == 0) {
    TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_), "cuda backend step");
    return absl::OkStatus();
  }
  auto* params = sampling_params_host_.as<kernels::SamplingRowParams>();
  for (size_t r = 0; r < wanted; ++r) {
    params[r] = {rows[r].temperature, rows[r].top_k, rows[r].top_p, rows[r].seed, rows[r].counter};
  }
  TANDEM_RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(sampling_params_.data(), params, wanted * sizeof(*params),
                      cudaMemcpyHostToDevice, stream_),
      "copying sampling parameters");
  RETURN_IF_ERROR(kernels::TopKTopPSample(logits_.as<const float>(), static_cast<int>(wanted),
                                          config_.vocab_size,
                                          sampling_params_.as<const kernels::SamplingRowParams>(),
                                          sampled_tokens_.as<int32_t>(), stream_));
  TANDEM_RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(sampled_tokens_host_.data(), sampled_tokens_.data(), wanted * sizeof(int32_t),
                      cudaMemcpyDeviceToHost, stream_),
      "copying sampled tokens");
  TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream_), "cuda backend step");
  std::memcpy(tokens.data(), sampled_tokens_host_.data(), wanted * sizeof(int32_t));
  return absl::OkStatus();
}

}  // namespace tandem
