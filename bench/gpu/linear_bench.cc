#include "bench/gpu/linear_bench.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/gpu/timing.h"
#include "common/util/status_macros.h"
#include "kernels/cuda_status.h"
#include "kernels/device_buffer.h"
#include "kernels/fill_random.h"
#include "kernels/gemm.h"

namespace tandem::bench {
namespace {

using kernels::DeviceBuffer;
using kernels::GemmOutput;

// Rows at or above this are a prefill's GEMM (compared with the peak); below, a decode step's
// (compared with its bytes).
constexpr int kPrefillRows = 1024;

struct LinearShape {
  std::string name;  // "gate_up 4096 -> 28672"
  int k = 0;
  int n = 0;
  GemmOutput output = GemmOutput::kBf16;
};

// The cuda backend's five GEMMs (common/backend/cuda/cuda_backend.cc), with its output types.
std::vector<LinearShape> Shapes(const ModelConfig& c) {
  const int qkv = c.q_size() + 2 * c.kv_size();
  auto named = [](const char* what, int k, int n) { return absl::StrCat(what, " ", k, " -> ", n); };
  return {{named("qkv", c.hidden_size, qkv), c.hidden_size, qkv, GemmOutput::kF32},
          {named("o", c.q_size(), c.hidden_size), c.q_size(), c.hidden_size, GemmOutput::kBf16},
          {named("gate_up", c.hidden_size, 2 * c.intermediate_size), c.hidden_size,
           2 * c.intermediate_size, GemmOutput::kBf16},
          {named("down", c.intermediate_size, c.hidden_size), c.intermediate_size, c.hidden_size,
           GemmOutput::kBf16},
          {named("lm_head", c.hidden_size, c.vocab_size), c.hidden_size, c.vocab_size,
           GemmOutput::kF32}};
}

absl::StatusOr<double> TimePerCall(kernels::GemmRunner& runner, kernels::LinearArgs args,
                                   const std::vector<const __nv_bfloat16*>& weights,
                                   const LinearBenchOptions& o, cudaStream_t stream) {
  int call = 0;
  auto launch = [&]() {
    args.w = weights[static_cast<size_t>(call++) % weights.size()];
    return runner.Linear(args, stream);
  };
  ASSIGN_OR_RETURN(const std::vector<double> per_call,
                   TimeCalls(launch, stream, o.warmup, o.iterations, o.repeats));
  return Min(per_call);
}

absl::StatusOr<BenchRow> RunCase(const LinearShape& shape, int rows, const LinearBenchOptions& o,
                                 const DeviceRoofline& roofline, cudaStream_t stream) {
  const size_t w_elements = size_t(shape.n) * shape.k;
  const double w_bytes = 2.0 * double(w_elements);
  const int copies = std::max(1, int(std::ceil(o.cycle_bytes / w_bytes)));
  std::vector<DeviceBuffer> w_buffers;
  std::vector<const __nv_bfloat16*> weights;
  for (int i = 0; i < copies; ++i) {
    ASSIGN_OR_RETURN(DeviceBuffer w, DeviceBuffer::Allocate(w_elements * 2));
    RETURN_IF_ERROR(
        kernels::FillRandomBf16(w.as<__nv_bfloat16>(), w_elements, -0.05f, 0.05f, 100 + i, stream));
    weights.push_back(w.as<const __nv_bfloat16>());
    w_buffers.push_back(std::move(w));
  }
  const size_t x_elements = size_t(rows) * shape.k;
  const int y_bytes_each = shape.output == GemmOutput::kF32 ? 4 : 2;
  ASSIGN_OR_RETURN(DeviceBuffer x, DeviceBuffer::Allocate(x_elements * 2));
  ASSIGN_OR_RETURN(DeviceBuffer y, DeviceBuffer::Allocate(size_t(rows) * shape.n * y_bytes_each));
  RETURN_IF_ERROR(
      kernels::FillRandomBf16(x.as<__nv_bfloat16>(), x_elements, -1.0f, 1.0f, 7, stream));

  // A runner per case: the first timing uses the heuristic's plan, Autotune then replaces it.
  ASSIGN_OR_RETURN(std::unique_ptr<kernels::GemmRunner> runner, kernels::GemmRunner::Create());
  kernels::LinearArgs args;
  args.x = x.as<const __nv_bfloat16>();
  args.w = weights.front();
  args.y = y.data();
  args.rows = rows;
  args.k = shape.k;
  args.n = shape.n;
  args.output = shape.output;
  ASSIGN_OR_RETURN(const double heuristic, TimePerCall(*runner, args, weights, o, stream));
  ASSIGN_OR_RETURN(const kernels::GemmTuning tuning,
                   runner->Autotune(args, stream, o.autotune_candidates, o.iterations, weights));
  ASSIGN_OR_RETURN(const double tuned, TimePerCall(*runner, args, weights, o, stream));

  BenchRow row;
  row.section = kLinearSection;
  row.name = absl::StrCat(shape.name, ", rows ", rows);
  const double bytes = w_bytes + 2.0 * double(x_elements) + double(rows) * shape.n * y_bytes_each;
  const double flops = 2.0 * rows * double(shape.k) * shape.n;
  if (rows >= kPrefillRows) {
    row.value = flops / heuristic * 1e-12;
    row.unit = "TFLOP/s";
    BenchReport::Compare(row, roofline.gemm_peak_flops_per_s * 1e-12, "");
    row.note = absl::StrFormat(
        "autotuned %.1f TFLOP/s (%.3f of peak; candidate %d of %d)", flops / tuned * 1e-12,
        flops / tuned / roofline.gemm_peak_flops_per_s, tuning.chosen, tuning.candidates);
  } else {
    row.value = heuristic * 1e6;
    row.unit = "us";
    BenchReport::Compare(row, bytes / roofline.copy_rw_bytes_per_s * 1e6, "");
    row.note = absl::StrFormat("autotuned %.1f us (ratio %.3f; candidate %d of %d), %.0f GB/s",
                               tuned * 1e6, tuned / (bytes / roofline.copy_rw_bytes_per_s),
                               tuning.chosen, tuning.candidates, bytes / tuned * 1e-9);
  }
  row.details = {{"k", shape.k},
                 {"n", shape.n},
                 {"rows", rows},
                 {"output", shape.output == GemmOutput::kF32 ? "f32" : "bf16"},
                 {"bytes", bytes},
                 {"flops", flops},
                 {"heuristic_us", heuristic * 1e6},
                 {"autotuned_us", tuned * 1e6},
                 {"autotune_timing_heuristic_us", tuning.heuristic_seconds * 1e6},
                 {"autotune_timing_best_us", tuning.best_seconds * 1e6},
                 {"autotune_chosen", tuning.chosen},
                 {"autotune_candidates", tuning.candidates},
                 {"weight_copies_cycled", copies}};
  return row;
}

}  // namespace

void RunLinearBench(const ModelConfig& config, const LinearBenchOptions& o,
                    const DeviceRoofline& roofline, BenchReport* report) {
  absl::StatusOr<OwnedStream> stream = OwnedStream::Create();
  for (const LinearShape& shape : Shapes(config)) {
    for (int rows : o.rows) {
      const std::string name = absl::StrCat(shape.name, ", rows ", rows);
      if (!stream.ok()) {
        report->AddFailed(kLinearSection, name, stream.status());
        continue;
      }
      absl::StatusOr<BenchRow> row = RunCase(shape, rows, o, roofline, stream->get());
      if (row.ok()) {
        report->Add(*std::move(row));
      } else if (absl::IsResourceExhausted(row.status())) {
        report->AddSkipped(kLinearSection, name,
                           absl::StrCat("out of device memory: ", row.status().message()));
      } else {
        report->AddFailed(kLinearSection, name, row.status());
      }
    }
  }
}

}  // namespace tandem::bench
