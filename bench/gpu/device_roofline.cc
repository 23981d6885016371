#include "bench/gpu/device_roofline.h"

#include <algorithm>
#include <memory>

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

struct CopyResult {
  std::vector<double> seconds;  // one per timed copy
};

absl::StatusOr<CopyResult> TimeCopies(size_t bytes, int warmup, int repeats, cudaStream_t stream) {
  ASSIGN_OR_RETURN(DeviceBuffer src, DeviceBuffer::Allocate(bytes));
  ASSIGN_OR_RETURN(DeviceBuffer dst, DeviceBuffer::Allocate(bytes));
  TANDEM_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(src.data(), 1, bytes, stream), "cudaMemsetAsync");
  TANDEM_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(dst.data(), 0, bytes, stream), "cudaMemsetAsync");
  ASSIGN_OR_RETURN(EventTimer timer, EventTimer::Create());
  CopyResult result;
  for (int i = 0; i < warmup + repeats; ++i) {
    RETURN_IF_ERROR(timer.Start(stream));
    TANDEM_RETURN_IF_CUDA_ERROR(
        cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice, stream),
        "cudaMemcpyAsync device to device");
    ASSIGN_OR_RETURN(double s, timer.StopSeconds(stream));
    if (i >= warmup) result.seconds.push_back(s);
  }
  return result;
}

struct GemmBuffers {
  DeviceBuffer x, w, y;
};

absl::StatusOr<GemmBuffers> AllocateGemmBuffers(const std::vector<GemmShape>& shapes,
                                                cudaStream_t stream) {
  size_t x = 0, w = 0, y = 0;
  for (const GemmShape& s : shapes) {
    x = std::max(x, size_t(s.rows) * s.k);
    w = std::max(w, size_t(s.n) * s.k);
    y = std::max(y, size_t(s.rows) * s.n);
  }
  GemmBuffers b;
  ASSIGN_OR_RETURN(b.x, DeviceBuffer::Allocate(x * 2));
  ASSIGN_OR_RETURN(b.w, DeviceBuffer::Allocate(w * 2));
  ASSIGN_OR_RETURN(b.y, DeviceBuffer::Allocate(y * 2));
  // Random inputs: GEMM power (and so clocks) depend on the data; zeros would flatter.
  RETURN_IF_ERROR(kernels::FillRandomBf16(b.x.as<__nv_bfloat16>(), x, -1.0f, 1.0f, 11, stream));
  RETURN_IF_ERROR(kernels::FillRandomBf16(b.w.as<__nv_bfloat16>(), w, -0.05f, 0.05f, 12, stream));
  return b;
}

// Seconds per GEMM of each timed repeat (each repeat runs `iterations` GEMMs back to back).
absl::StatusOr<std::vector<double>> TimeGemm(kernels::GemmRunner& gemm, const GemmBuffers& b,
                                             const GemmShape& s, const RooflineOptions& o,
                                             cudaStream_t stream) {
  const kernels::LinearArgs args{
      b.x.as<const __nv_bfloat16>(), b.w.as<const __nv_bfloat16>(), b.y.data(), s.rows, s.k, s.n,
      kernels::GemmOutput::kBf16};
  for (int i = 0; i < o.gemm_warmup; ++i) RETURN_IF_ERROR(gemm.Linear(args, stream));
  ASSIGN_OR_RETURN(EventTimer timer, EventTimer::Create());
  std::vector<double> per_gemm;
  for (int r = 0; r < o.gemm_repeats; ++r) {
    RETURN_IF_ERROR(timer.Start(stream));
    for (int i = 0; i < o.gemm_iterations; ++i) RETURN_IF_ERROR(gemm.Linear(args, stream));
    ASSIGN_OR_RETURN(double s_total, timer.StopSeconds(stream));
    per_gemm.push_back(s_total / o.gemm_iterations);
  }
  return per_gemm;
}

}  // namespace

std::vector<GemmShape> DefaultGemmShapes() {
  return {{8192, 8192, 8192, "8192 x 8192 x 8192"},
          {16384, 8192, 8192, "16384 x 8192 x 8192"},
          {4096, 4096, 28672, "4096 x 4096 x 28672 (gate/up)"},
          {4096, 14336, 4096, "4096 x 14336 x 4096 (down)"}};
}

absl::StatusOr<DeviceRoofline> MeasureDeviceRoofline(const RooflineOptions& o,
                                                     BenchReport* report) {
  if (o.copy_bytes == 0 || o.copy_repeats < 1 || o.gemm_iterations < 1 || o.gemm_repeats < 1) {
    return absl::InvalidArgumentError("roofline: copy_bytes, repeats and iterations must be >= 1");
  }
  ASSIGN_OR_RETURN(OwnedStream stream, OwnedStream::Create());
  DeviceRoofline roofline;

  const std::string copy_name =
      absl::StrFormat("D2D cudaMemcpyAsync %.2f GiB", o.copy_bytes / double(1 << 30));
  absl::StatusOr<CopyResult> copy =
      TimeCopies(o.copy_bytes, o.copy_warmup, o.copy_repeats, stream.get());
  if (!copy.ok()) {
    report->AddFailed(kRooflineSection, copy_name, copy.status());
    return copy.status();
  }
  const double best = Min(copy->seconds);
  roofline.copy_rw_bytes_per_s = 2.0 * o.copy_bytes / best;
  roofline.copy_read_bytes_per_s = o.copy_bytes / best;
  const nlohmann::json copy_details = {{"bytes", o.copy_bytes},
                                       {"repeats", o.copy_repeats},
                                       {"best_seconds", best},
                                       {"median_seconds", Median(copy->seconds)}};
  BenchRow rw;
  rw.section = kRooflineSection;
  rw.name = copy_name + ", read+write";
  rw.value = roofline.copy_rw_bytes_per_s * 1e-9;
  rw.unit = "GB/s";
  rw.note = "the bandwidth floor of every other section";
  rw.details = copy_details;
  report->Add(rw);
  BenchRow read;
  read.section = kRooflineSection;
  read.name = copy_name + ", read-only conv.";
  read.value = roofline.copy_read_bytes_per_s * 1e-9;
  read.unit = "GB/s";
  read.note = "bytes copied / time (= read+write / 2); for comparison only";
  read.details = copy_details;
  report->Add(read);

  absl::StatusOr<GemmBuffers> buffers = AllocateGemmBuffers(o.gemm_shapes, stream.get());
  absl::StatusOr<std::unique_ptr<kernels::GemmRunner>> gemm =
      buffers.ok() ? kernels::GemmRunner::Create() : buffers.status();
  for (const GemmShape& s : o.gemm_shapes) {
    const std::string name = absl::StrCat("GEMM bf16 ", s.label);
    if (!gemm.ok()) {
      report->AddFailed(kRooflineSection, name, gemm.status());
      continue;
    }
    absl::StatusOr<std::vector<double>> seconds = TimeGemm(**gemm, *buffers, s, o, stream.get());
    if (!seconds.ok()) {
      report->AddFailed(kRooflineSection, name, seconds.status());
      continue;
    }
    const double flops = 2.0 * s.rows * double(s.k) * s.n;
    const double rate = flops / Min(*seconds);
    BenchRow row;
    row.section = kRooflineSection;
    row.name = name;
    row.value = rate * 1e-12;
    row.unit = "TFLOP/s";
    row.details = {{"rows", s.rows},
                   {"k", s.k},
                   {"n", s.n},
                   {"flops", flops},
                   {"best_seconds", Min(*seconds)},
                   {"median_seconds", Median(*seconds)},
                   {"iterations_per_repeat", o.gemm_iterations},
                   {"repeats", o.gemm_repeats}};
    if (rate > roofline.gemm_peak_flops_per_s) {
      roofline.gemm_peak_flops_per_s = rate;
      roofline.gemm_peak_shape = s.label;
    }
    report->Add(row);
  }
  if (roofline.gemm_peak_flops_per_s <= 0) {
    return absl::InternalError("roofline: no GEMM shape could be measured (see the table)");
  }
  BenchRow peak;
  peak.section = kRooflineSection;
  peak.name = "GEMM bf16 peak (best shape)";
  peak.value = roofline.gemm_peak_flops_per_s * 1e-12;
  peak.unit = "TFLOP/s";
  peak.note = absl::StrCat("from ", roofline.gemm_peak_shape, "; the compute peak of prefill");
  report->Add(peak);
  return roofline;
}

}  // namespace tandem::bench
