// Section 2: the cuda backend's decode step for Llama-3-8B's shapes at several batch sizes and
// context lengths, each against its floor: the HBM bytes the step must move over the device's
// measured copy rate. Every sequence's block table points at its own pool blocks, so every
// position's K/V really is read from memory.
#ifndef TANDEM_BENCH_GPU_DECODE_STEP_BENCH_H_
#define TANDEM_BENCH_GPU_DECODE_STEP_BENCH_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "bench/gpu/bench_report.h"
#include "bench/gpu/device_roofline.h"
#include "common/backend/cuda/cuda_backend.h"

namespace tandem::bench {

inline constexpr char kDecodeSection[] = "decode";

struct DecodeBenchOptions {
  std::vector<int> batches = {1, 8, 32, 128};
  std::vector<int> contexts = {1024, 8192};
  int warmup_steps = 3;  // the first captures the CUDA graph
  int timed_steps = 50;
  uint64_t seed = 7;
};

// The most KV tokens one case holds at once (the largest batch x the longest context).
size_t DecodeBenchKvTokens(const DecodeBenchOptions& options);

// Runs every (batch, context) case on `backend` and adds a row each. A case whose KV does not fit
// the pool is skipped with the sizes, and run again at the longest context (a multiple of 1024)
// that fits, marked as shrunk. Errors of single cases become failed rows; the returned status is
// for misuse only.
absl::Status RunDecodeBench(CudaBackend& backend, const DecodeBenchOptions& options,
                            const DeviceRoofline& roofline, BenchReport* report);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_GPU_DECODE_STEP_BENCH_H_
