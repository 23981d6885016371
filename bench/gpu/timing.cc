#include "bench/gpu/timing.h"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <utility>

#include "common/util/status_macros.h"
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

absl::StatusOr<std::vector<double>> TimeCalls(const std::function<absl::Status()>& launch,
                                              cudaStream_t stream, int warmup, int iterations,
                                              int repeats) {
  for (int i = 0; i < warmup; ++i) RETURN_IF_ERROR(launch());
  ASSIGN_OR_RETURN(EventTimer timer, EventTimer::Create());
  std::vector<double> per_call;
  for (int r = 0; r < repeats; ++r) {
    RETURN_IF_ERROR(timer.Start(stream));
    for (int i = 0; i < iterations; ++i) RETURN_IF_ERROR(launch());
    ASSIGN_OR_RETURN(double s, timer.StopSeconds(stream));
    per_call.push_back(s / iterations);
  }
  return per_call;
}

absl::StatusOr<kernels::DeviceBuffer> UploadInt32(const std::vector<int32_t>& host,
                                                  cudaStream_t stream) {
  ASSIGN_OR_RETURN(kernels::DeviceBuffer buffer,
                   kernels::DeviceBuffer::Allocate(host.size() * sizeof(int32_t)));
  TANDEM_RETURN_IF_CUDA_ERROR(
      cudaMemcpyAsync(buffer.data(), host.data(), buffer.bytes(), cudaMemcpyHostToDevice, stream),
      "copying int32 metadata");
  TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream), "copying int32 metadata");
  return buffer;
}

}  // namespace tandem::bench
