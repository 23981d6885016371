#include "bench/gpu/timing.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <utility>

#include "kernels/cuda_status.h"

namespace tandem::bench {

absl::StatusOr<OwnedStream> OwnedStream::Create() {
  OwnedStream stream;
  TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamCreateWithFlags(&stream.stream_, cudaStreamNonBlocking),
                              "cudaStreamCreateWithFlags");
  return stream;
}

OwnedStream::~OwnedStream() {
  if (stream_ != nullptr) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
}

OwnedStream::OwnedStream(OwnedStream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)) {}

absl::StatusOr<EventTimer> EventTimer::Create() {
  EventTimer timer;
  TANDEM_RETURN_IF_CUDA_ERROR(cudaEventCreate(&timer.start_), "cudaEventCreate");
  TANDEM_RETURN_IF_CUDA_ERROR(cudaEventCreate(&timer.stop_), "cudaEventCreate");
  return timer;
}

EventTimer::~EventTimer() {
  if (start_ != nullptr) cudaEventDestroy(start_);
  if (stop_ != nullptr) cudaEventDestroy(stop_);
}

EventTimer::EventTimer(EventTimer&& other) noexcept
    : start_(std::exchange(other.start_, nullptr)), stop_(std::exchange(other.stop_, nullptr)) {}

absl::Status EventTimer::Start(cudaStream_t stream) {
  TANDEM_RETURN_IF_CUDA_ERROR(cudaEventRecord(start_, stream), "cudaEventRecord(start)");
  return absl::OkStatus();
}

absl::StatusOr<double> EventTimer::StopSeconds(cudaStream_t stream) {
  TANDEM_RETURN_IF_CUDA_ERROR(cudaEventRecord(stop_, stream), "cudaEventRecord(stop)");
  TANDEM_RETURN_IF_CUDA_ERROR(cudaEventSynchronize(stop_), "cudaEventSynchronize");
  float ms = 0;
  TANDEM_RETURN_IF_CUDA_ERROR(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
  return ms * 1e-3;
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double Min(const std::vector<double>& values) {
  return values.empty() ? 0 : *std::min_element(values.begin(), values.end());
}

double Mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  return std::accumulate(values.begin(), values.end(), 0.0) / values.size();
}

}  // namespace tandem::bench
