#include "common/backend/sim/step_time_model.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace tandem {
namespace {

constexpr double kBf16Bytes = 2.0;

// sum_{k=c+1}^{c+n} min(k, w); w <= 0 means no window.
double AttendedKeys(int64_t c, int64_t n, int64_t w) {
  auto triangle = [](int64_t a, int64_t b) {  // sum_{k=a}^{b} k, 0 when b < a
    return b < a ? 0.0 : (static_cast<double>(a) + static_cast<double>(b)) * (b - a + 1) / 2.0;
  };
  if (w <= 0) return triangle(c + 1, c + n);
  const int64_t last_full = std::min(c + n, w);  // k <= w count k
  double sum = triangle(c + 1, last_full);
  const int64_t capped = (c + n) - std::max(c, w);  // k > w count w
  if (capped > 0) sum += static_cast<double>(capped) * w;
  return sum;
}

}  // namespace

absl::StatusOr<StepTimeModel> StepTimeModel::Create(const GpuSpec& gpu, const ModelConfig& model,
                                                    int tensor_parallel, DType kv_dtype) {
  if (model.hidden_size < 1 || model.num_layers < 1 || model.num_heads < 1 ||
      model.num_kv_heads < 1 || model.head_dim < 1 || model.intermediate_size < 1 ||
      model.vocab_size < 1) {
    return absl::InvalidArgumentError("sim: the model's shape is incomplete");
  }
  if (tensor_parallel < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sim-tp must be at least 1, not ", tensor_parallel));
  }
  if (model.num_kv_heads % tensor_parallel != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--sim-tp ", tensor_parallel,
                                                   " does not divide the model's ",
                                                   model.num_kv_heads, " KV heads"));
  }
  if (gpu.peak_bf16_flops <= 0 || gpu.hbm_bytes_per_s <= 0 || gpu.memory_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("sim: GPU '", gpu.name, "' has no peaks"));
  }
  return StepTimeModel(gpu, model, tensor_parallel, kv_dtype);
}

int64_t StepTimeModel::LayerLinearParameters() const {
  const int64_t h = model_.hidden_size, q = model_.q_size(), kv = model_.kv_size();
  return h * (q + 2 * kv) + q * h + 3 * h * model_.intermediate_size;
}

int64_t StepTimeModel::WeightBytes() const {
  return model_.NumParameters() * static_cast<int64_t>(kBf16Bytes);
}

int64_t StepTimeModel::KvBytesPerToken() const {
  return int64_t{2} * model_.num_layers * model_.num_kv_heads * model_.head_dim *
         static_cast<int64_t>(DTypeSize(kv_dtype_));
}

absl::StatusOr<int64_t> StepTimeModel::KvCacheBytes(double memory_utilization) const {
  if (!(memory_utilization > 0 && memory_utilization <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--sim-memory-utilization must be in (0, 1], not ", memory_utilization));
  }
  const double per_gpu = static_cast<double>(gpu_.memory_bytes) * memory_utilization -
                         static_cast<double>(gpu_.reserved_bytes);
  const double kv = tp_ * per_gpu - static_cast<double>(WeightBytes());
  if (kv <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sim: ", WeightBytes() >> 20, " MiB of weights do not fit ", tp_, " x ", gpu_.name,
        " at memory utilization ", memory_utilization, " (raise --sim-tp)"));
  }
  return static_cast<int64_t>(kv);
}

StepTotals StepTimeModel::Totals(std::span<const SimStepItem> items) const {
  StepTotals t;
  const int64_t w = model_.sliding_window;
  for (const SimStepItem& it : items) {
    t.tokens += it.new_tokens;
    if (it.wants_logits) t.logits_rows += std::max(1, it.num_logits);
    t.attended_keys += AttendedKeys(it.context_before, it.new_tokens, w);
    const int64_t span = it.context_before + it.new_tokens;
    t.kv_tokens_read += static_cast<double>(w > 0 ? std::min(span, w + it.new_tokens - 1) : span);
  }
  return t;
}

StepWork StepTimeModel::CostFromTotals(const StepTotals& totals) const {
  StepWork c;
  c.tokens = totals.tokens;
  c.logits_rows = totals.logits_rows;
  const double attended = totals.attended_keys, kv_tokens_read = totals.kv_tokens_read;
  const double layers = model_.num_layers, hidden = model_.hidden_size, vocab = model_.vocab_size;
  const double layer_params = static_cast<double>(LayerLinearParameters());
  const double lm_head = vocab * hidden;
  c.gemm_flops = 2.0 * c.tokens * layers * layer_params + 2.0 * c.logits_rows * lm_head;
  if (c.tokens > 0) {
    c.weight_bytes = kBf16Bytes * (layers * layer_params + (c.logits_rows > 0 ? lm_head : 0.0));
  }
  c.attention_flops = 4.0 * layers * model_.num_heads * model_.head_dim * attended;
  const double kv_per_token = static_cast<double>(KvBytesPerToken());
  c.kv_read_bytes = kv_per_token * kv_tokens_read;
  c.kv_write_bytes = kv_per_token * static_cast<double>(c.tokens);
  if (tp_ > 1 && c.tokens > 0) {
    c.allreduce_calls = 2 * model_.num_layers;
    c.allreduce_bytes = static_cast<double>(c.tokens) * hidden * kBf16Bytes;
  }
  return c;
}

StepTime StepTimeModel::TimeFromTotals(const StepTotals& totals) const {
  const StepWork c = CostFromTotals(totals);
  StepTime t;
  if (c.tokens == 0) return t;
  const double flops = tp_ * gpu_.peak_bf16_flops;
  const double bw = tp_ * gpu_.hbm_bytes_per_s * gpu_.bandwidth_efficiency;
  t.gemm_s = std::max(c.gemm_flops / (flops * gpu_.gemm_efficiency), c.weight_bytes / bw);
  t.attention_s = std::max(c.attention_flops / (flops * gpu_.attention_efficiency),
                           (c.kv_read_bytes + c.kv_write_bytes) / bw);
  if (c.allreduce_calls > 0) {
    const double ring = 2.0 * (tp_ - 1) / tp_ * c.allreduce_bytes / gpu_.allreduce_bytes_per_s;
    t.allreduce_s = c.allreduce_calls * (gpu_.allreduce_latency_s + ring);
  }
  t.overhead_s = gpu_.step_overhead_s;
  return t;
}

}  // namespace tandem
