#include "bench/gpu/prefill_attention_bench.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/gpu/model_costs.h"
#include "bench/gpu/timing.h"
#include "common/util/status_macros.h"
#include "kernels/cuda_status.h"
#include "kernels/device_buffer.h"
#include "kernels/fill_random.h"
#include "kernels/prefill_attention.h"

namespace tandem::bench {
namespace {

using kernels::DeviceBuffer;

absl::StatusOr<BenchRow> RunCase(const ModelConfig& config, int tokens,
                                 const PrefillAttentionBenchOptions& o,
                                 const DeviceRoofline& roofline) {
  ASSIGN_OR_RETURN(OwnedStream stream, OwnedStream::Create());
  const int block_size = 16;
  const int blocks = (tokens + block_size - 1) / block_size;
  KvLayout layout;
  layout.dtype = DType::kBF16;
  layout.num_layers = o.layers;
  layout.num_kv_heads = config.num_kv_heads;
  layout.head_dim = config.head_dim;
  layout.block_size = block_size;
  layout.num_blocks = blocks;
  ASSIGN_OR_RETURN(DeviceBuffer pool, DeviceBuffer::Allocate(layout.total_bytes()));
  RETURN_IF_ERROR(kernels::FillRandomBf16(pool.as<__nv_bfloat16>(), size_t(layout.total_elements()),
                                          -1.0f, 1.0f, 11, stream.get()));
  const size_t q_elements = size_t(tokens) * config.q_size();
  ASSIGN_OR_RETURN(DeviceBuffer q, DeviceBuffer::Allocate(q_elements * 2));
  ASSIGN_OR_RETURN(DeviceBuffer out, DeviceBuffer::Allocate(q_elements * 2));
  RETURN_IF_ERROR(
      kernels::FillRandomBf16(q.as<__nv_bfloat16>(), q_elements, -1.0f, 1.0f, 12, stream.get()));
  ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> tables,
                   DistinctBlockTables(1, blocks, blocks, 13));
  ASSIGN_OR_RETURN(DeviceBuffer table_d, UploadInt32(tables[0], stream.get()));
  ASSIGN_OR_RETURN(DeviceBuffer starts_d, UploadInt32({0}, stream.get()));
  ASSIGN_OR_RETURN(DeviceBuffer lens_d, UploadInt32({tokens}, stream.get()));
  ASSIGN_OR_RETURN(DeviceBuffer positions_d, UploadInt32({0}, stream.get()));

  kernels::PrefillAttentionArgs a;
  a.q = q.as<const __nv_bfloat16>();
  a.out = out.as<__nv_bfloat16>();
  a.kv_pool = pool.as<const __nv_bfloat16>();
  a.layout = layout;
  a.num_heads = config.num_heads;
  a.num_items = 1;
  a.q_starts = starts_d.as<const int32_t>();
  a.q_lens = lens_d.as<const int32_t>();
  a.start_positions = positions_d.as<const int32_t>();
  a.block_tables = table_d.as<const int32_t>();
  a.max_blocks_per_seq = blocks;
  a.max_q_len = tokens;
  a.scale = static_cast<float>(1.0 / std::sqrt(double(config.head_dim)));
  int call = 0;
  auto launch = [&]() {
    a.layer = call++ % o.layers;
    return kernels::PrefillAttention(a, stream.get());
  };
  ASSIGN_OR_RETURN(const std::vector<double> per_call,
                   TimeCalls(launch, stream.get(), o.warmup, o.iterations, o.repeats));
  // Causal: query t sees t + 1 keys; QK^T and PV are 2 * head_dim FLOPs per (query, key, head).
  const double pairs = double(tokens) * (tokens + 1) / 2.0;
  const double flops = 4.0 * config.num_heads * double(config.head_dim) * pairs;
  const double best = Min(per_call);
  BenchRow row;
  row.section = kPrefillAttentionSection;
  row.name = absl::StrCat(tokens, " tokens, one layer");
  row.value = flops / best * 1e-12;
  row.unit = "TFLOP/s";
  BenchReport::Compare(row, roofline.gemm_peak_flops_per_s * 1e-12, "");
  row.note = absl::StrFormat("%.3f ms per layer, %.1f ms for %d layers", best * 1e3,
                             best * 1e3 * config.num_layers, config.num_layers);
  row.details = {{"tokens", tokens},
                 {"flops", flops},
                 {"best_ms", best * 1e3},
                 {"median_ms", Median(per_call) * 1e3},
                 {"num_heads", config.num_heads},
                 {"num_kv_heads", config.num_kv_heads},
                 {"head_dim", config.head_dim}};
  return row;
}

}  // namespace

void RunPrefillAttentionBench(const ModelConfig& config, const PrefillAttentionBenchOptions& o,
                              const DeviceRoofline& roofline, BenchReport* report) {
  for (int tokens : o.tokens) {
    const std::string name = absl::StrCat(tokens, " tokens, one layer");
    absl::StatusOr<BenchRow> row = RunCase(config, tokens, o, roofline);
    if (row.ok()) {
      report->Add(*std::move(row));
    } else if (absl::IsResourceExhausted(row.status())) {
      report->AddSkipped(kPrefillAttentionSection, name,
                         absl::StrCat("out of device memory: ", row.status().message()));
    } else {
      report->AddFailed(kPrefillAttentionSection, name, row.status());
    }
  }
}

}  // namespace tandem::bench
