// Timing helpers for the GPU benchmark: an owned CUDA stream, a pair of CUDA events for work
// enqueued on a stream, a monotonic wall clock for synchronous calls, and the order statistics the
// tables report.
#ifndef TANDEM_BENCH_GPU_TIMING_H_
#define TANDEM_BENCH_GPU_TIMING_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/device_buffer.h"

namespace tandem::bench {

// A non-blocking CUDA stream on the current device, destroyed (after a sync) with its owner.
class OwnedStream {
 public:
  static absl::StatusOr<OwnedStream> Create();
  ~OwnedStream();
  OwnedStream(OwnedStream&& other) noexcept;
  OwnedStream& operator=(OwnedStream&&) = delete;
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;

  cudaStream_t get() const { return stream_; }

 private:
  OwnedStream() = default;
  cudaStream_t stream_ = nullptr;
};

// Times the work enqueued on one stream between Start and Stop.
class EventTimer {
 public:
  static absl::StatusOr<EventTimer> Create();
  ~EventTimer();
  EventTimer(EventTimer&& other) noexcept;
  EventTimer& operator=(EventTimer&&) = delete;
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  absl::Status Start(cudaStream_t stream);
  // Records the end, waits for it, and returns the seconds between the two events.
  absl::StatusOr<double> StopSeconds(cudaStream_t stream);

 private:
  EventTimer() = default;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

// Monotonic seconds since an arbitrary epoch.
double WallSeconds();

// Per-call seconds of `launch` (which enqueues one call on `stream`): `warmup` untimed calls,
// then `repeats` timed runs of `iterations` calls each, one value per run.
absl::StatusOr<std::vector<double>> TimeCalls(const std::function<absl::Status()>& launch,
                                              cudaStream_t stream, int warmup, int iterations,
                                              int repeats);

// `host` copied into a new device buffer (waits for the copy).
absl::StatusOr<kernels::DeviceBuffer> UploadInt32(const std::vector<int32_t>& host,
                                                  cudaStream_t stream);

double Median(std::vector<double> values);
double Min(const std::vector<double>& values);
double Mean(const std::vector<double>& values);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_GPU_TIMING_H_
