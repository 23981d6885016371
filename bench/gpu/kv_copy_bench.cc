#include "bench/gpu/kv_copy_bench.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/gpu/model_costs.h"
#include "bench/gpu/timing.h"
#include "common/util/status_macros.h"
#include "kernels/cuda_status.h"
#include "kernels/device_buffer.h"

namespace tandem::bench {
namespace {

using kernels::DeviceBuffer;

// Seconds of each timed repeat; each repeat copies `bytes` from src to dst in `runs` equal pieces.
absl::StatusOr<std::vector<double>> TimeRunCopies(const DeviceBuffer& src, const DeviceBuffer& dst,
                                                  size_t bytes, int runs, const KvCopyOptions& o,
                                                  cudaStream_t stream) {
  const size_t run_bytes = bytes / runs;
  ASSIGN_OR_RETURN(EventTimer timer, EventTimer::Create());
  std::vector<double> seconds;
  for (int r = 0; r < o.warmup + o.repeats; ++r) {
    RETURN_IF_ERROR(timer.Start(stream));
    for (int i = 0; i < runs; ++i) {
      const size_t offset = size_t(i) * run_bytes;
      TANDEM_RETURN_IF_CUDA_ERROR(
          cudaMemcpyAsync(dst.as<char>() + offset, src.as<const char>() + offset, run_bytes,
                          cudaMemcpyDeviceToDevice, stream),
          "cudaMemcpyAsync device to device");
    }
    ASSIGN_OR_RETURN(double s, timer.StopSeconds(stream));
    if (r >= o.warmup) seconds.push_back(s);
  }
  return seconds;
}

absl::Status Run(const ModelConfig& config, const KvCopyOptions& o, BenchReport* report) {
  if (o.tokens < 1 || o.repeats < 1 || o.warmup < 0) {
    return absl::InvalidArgumentError("kv copy: tokens and repeats must be >= 1");
  }
  const size_t bytes = size_t(o.tokens) * KvBytesPerToken(config);
  const int runs = 2 * config.num_layers;  // one (layer, K|V) run each
  ASSIGN_OR_RETURN(OwnedStream stream, OwnedStream::Create());
  ASSIGN_OR_RETURN(DeviceBuffer src, DeviceBuffer::Allocate(bytes));
  ASSIGN_OR_RETURN(DeviceBuffer dst, DeviceBuffer::Allocate(bytes));
  TANDEM_RETURN_IF_CUDA_ERROR(cudaMemsetAsync(src.data(), 1, bytes, stream.get()),
                              "cudaMemsetAsync");
  for (int pieces : {1, runs}) {
    ASSIGN_OR_RETURN(std::vector<double> seconds,
                     TimeRunCopies(src, dst, bytes, pieces, o, stream.get()));
    const double best = Min(seconds);
    BenchRow row;
    row.section = kKvCopySection;
    row.name = pieces == 1 ? absl::StrFormat("cudaMemcpy, 1 copy of %.0f MiB", bytes / 1048576.0)
                           : absl::StrFormat("cudaMemcpy, %d copies of %.0f MiB (layer, K|V)",
                                             pieces, bytes / double(pieces) / 1048576.0);
    row.value = bytes / best * 1e-9;
    row.unit = "GB/s";
    row.note = absl::StrFormat("%.3f ms for the %d-token KV (median %.3f ms)", best * 1e3, o.tokens,
                               Median(seconds) * 1e3);
    row.details = {{"tokens", o.tokens},
                   {"bytes", bytes},
                   {"copies", pieces},
                   {"best_ms", best * 1e3},
                   {"median_ms", Median(seconds) * 1e3},
                   {"repeats", o.repeats}};
    report->Add(row);
  }
  return absl::OkStatus();
}

}  // namespace

void RunKvCopyReference(const ModelConfig& config, const KvCopyOptions& o, BenchReport* report) {
  const absl::Status status = Run(config, o, report);
  if (!status.ok()) {
    report->AddFailed(kKvCopySection, absl::StrCat("cudaMemcpy of a ", o.tokens, "-token KV"),
                      status);
  }
  report->AddSkipped(kKvCopySection, "KV transport (UCX / cuda transports)",
                     "not measured here: run bench/kv_transfer (tandem-bench-kv-transfer) for "
                     "the same bytes and compare with the rows above");
}

}  // namespace tandem::bench
