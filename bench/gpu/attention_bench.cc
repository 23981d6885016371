#include "bench/gpu/attention_bench.h"

#include <cmath>
#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/gpu/model_costs.h"
#include "bench/gpu/timing.h"
#include "common/util/status_macros.h"
#include "kernels/cuda_status.h"
#include "kernels/decode_attention.h"
#include "kernels/device_buffer.h"
#include "kernels/fill_random.h"

namespace tandem::bench {
namespace {

using kernels::DeviceBuffer;

constexpr double kGoal = 0.85;

std::string CaseName(int batch, int context, bool tensor_cores, DType kv_dtype) {
  return absl::StrCat("batch ", batch, ", context ", context,
                      tensor_cores ? ", tensor cores" : ", cuda cores",
                      kv_dtype == DType::kFP8E4M3 ? ", fp8" : "");
}

absl::StatusOr<BenchRow> RunCase(const ModelConfig& config, int batch, int context,
                                 bool tensor_cores, DType kv_dtype, const AttentionBenchOptions& o,
                                 const DeviceRoofline& roofline) {
  ASSIGN_OR_RETURN(OwnedStream stream, OwnedStream::Create());
  const int block_size = 16;
  const int blocks_per_seq = (context + block_size - 1) / block_size;
  KvLayout layout;
  layout.dtype = kv_dtype;
  layout.num_layers = o.layers;
  layout.num_kv_heads = config.num_kv_heads;
  layout.head_dim = config.head_dim;
  layout.block_size = block_size;
  layout.num_blocks = batch * blocks_per_seq;

  ASSIGN_OR_RETURN(DeviceBuffer pool, DeviceBuffer::Allocate(layout.total_bytes()));
  if (kv_dtype == DType::kFP8E4M3) {
    // Random bf16 values over the pool's bytes, each byte then an E4M3 code (the time does not
    // depend on the values; a code that is NaN only makes its row's output NaN).
    RETURN_IF_ERROR(kernels::FillRandomBf16(pool.as<__nv_bfloat16>(),
                                            size_t(layout.total_elements()) / 2, -1.0f, 1.0f,
                                            o.seed, stream.get()));
  } else {
    RETURN_IF_ERROR(kernels::FillRandomBf16(pool.as<__nv_bfloat16>(),
                                            size_t(layout.total_elements()), -1.0f, 1.0f, o.seed,
                                            stream.get()));
  }
  const std::vector<float> ones(size_t{2} * o.layers * config.num_kv_heads, 1.0f);
  ASSIGN_OR_RETURN(DeviceBuffer scales, DeviceBuffer::Allocate(ones.size() * sizeof(float)));
  TANDEM_RETURN_IF_CUDA_ERROR(
      cudaMemcpy(scales.data(), ones.data(), scales.bytes(), cudaMemcpyHostToDevice),
      "copying the fp8 scales");
  const size_t q_elements = size_t(batch) * config.q_size();
  ASSIGN_OR_RETURN(DeviceBuffer q, DeviceBuffer::Allocate(q_elements * 2));
  ASSIGN_OR_RETURN(DeviceBuffer out, DeviceBuffer::Allocate(q_elements * 2));
  RETURN_IF_ERROR(kernels::FillRandomBf16(q.as<__nv_bfloat16>(), q_elements, -1.0f, 1.0f,
                                          o.seed + 1, stream.get()));

  ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> tables,
                   DistinctBlockTables(batch, blocks_per_seq, layout.num_blocks, o.seed + 2));
  std::vector<int32_t> flat_tables;
  for (const auto& t : tables) flat_tables.insert(flat_tables.end(), t.begin(), t.end());
  std::vector<int32_t> rows(batch);
  std::iota(rows.begin(), rows.end(), 0);
  const std::vector<int32_t> context_lens(batch, context);
  ASSIGN_OR_RETURN(DeviceBuffer tables_d, UploadInt32(flat_tables, stream.get()));
  ASSIGN_OR_RETURN(DeviceBuffer rows_d, UploadInt32(rows, stream.get()));
  ASSIGN_OR_RETURN(DeviceBuffer lens_d, UploadInt32(context_lens, stream.get()));
  const size_t workspace_bytes = kernels::DecodeAttentionWorkspaceBytes(
      batch, config.num_heads, config.num_kv_heads, config.head_dim, blocks_per_seq * block_size);
  ASSIGN_OR_RETURN(DeviceBuffer workspace, DeviceBuffer::Allocate(workspace_bytes));

  kernels::DecodeAttentionArgs a;
  a.q = q.as<const __nv_bfloat16>();
  a.out = out.as<__nv_bfloat16>();
  a.kv_pool = pool.data();
  a.layout = layout;
  a.kv_scales = kv_dtype == DType::kFP8E4M3 ? scales.as<const float>() : nullptr;
  a.num_heads = config.num_heads;
  a.num_seqs = batch;
  a.token_rows = rows_d.as<const int32_t>();
  a.context_lens = lens_d.as<const int32_t>();
  a.block_tables = tables_d.as<const int32_t>();
  a.max_blocks_per_seq = blocks_per_seq;
  a.max_context = blocks_per_seq * block_size;
  a.sliding_window = 0;
  a.scale = static_cast<float>(1.0 / std::sqrt(double(config.head_dim)));
  a.tensor_cores = tensor_cores;
  a.workspace = workspace.as<float>();
  a.workspace_bytes = workspace_bytes;

  int call = 0;
  auto launch = [&]() -> absl::Status {
    a.layer = call++ % o.layers;
    return kernels::PagedDecodeAttention(a, stream.get());
  };
  ASSIGN_OR_RETURN(const std::vector<double> per_call,
                   TimeCalls(launch, stream.get(), o.warmup, o.iterations, o.repeats));

  // K and V of every position of every sequence, one layer: what one call must read.
  const double kv_bytes = 2.0 * batch * double(context) * config.num_kv_heads * config.head_dim *
                          double(DTypeSize(kv_dtype));
  const double best = Min(per_call);
  BenchRow row;
  row.section = kAttentionSection;
  row.name = CaseName(batch, context, tensor_cores, kv_dtype);
  row.value = kv_bytes / best * 1e-9;
  row.unit = "GB/s";
  BenchReport::Compare(row, roofline.copy_rw_bytes_per_s * 1e-9, absl::StrFormat(">= %.2f", kGoal));
  row.note = absl::StrFormat("%.1f us per layer (median %.1f us), %.0f MiB of K+V", best * 1e6,
                             Median(per_call) * 1e6, kv_bytes / double(1 << 20));
  row.details = {{"batch", batch},
                 {"context", context},
                 {"kv_dtype", DTypeName(kv_dtype)},
                 {"num_heads", config.num_heads},
                 {"num_kv_heads", config.num_kv_heads},
                 {"head_dim", config.head_dim},
                 {"block_size", block_size},
                 {"kv_bytes_per_call", kv_bytes},
                 {"best_us", best * 1e6},
                 {"median_us", Median(per_call) * 1e6},
                 {"iterations_per_repeat", o.iterations},
                 {"repeats", o.repeats},
                 {"layers_cycled", o.layers},
                 {"workspace_bytes", workspace_bytes}};
  return row;
}

}  // namespace

void RunAttentionBench(const ModelConfig& config, const AttentionBenchOptions& o,
                       const DeviceRoofline& roofline, BenchReport* report) {
  for (int context : o.contexts) {
    for (int batch : o.batches) {
      for (const bool tensor_cores : o.tensor_cores) {
        for (const DType kv_dtype : o.kv_dtypes) {
          const std::string name = CaseName(batch, context, tensor_cores, kv_dtype);
          if (context < 1 || o.layers < 1 || o.iterations < 1 || o.repeats < 1 || batch < 1) {
            report->AddFailed(kAttentionSection, name,
                              absl::InvalidArgumentError("context, layers, iterations, repeats and "
                                                         "batch must be >= 1"));
            continue;
          }
          absl::StatusOr<BenchRow> row =
              RunCase(config, batch, context, tensor_cores, kv_dtype, o, roofline);
          if (row.ok()) {
            report->Add(*std::move(row));
          } else if (absl::IsResourceExhausted(row.status())) {
            report->AddSkipped(kAttentionSection, name,
                               absl::StrCat("out of device memory: ", row.status().message()));
          } else {
            report->AddFailed(kAttentionSection, name, row.status());
          }
        }
      }
    }
  }
}

}  // namespace tandem::bench
