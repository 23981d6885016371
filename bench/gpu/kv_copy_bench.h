// Section 5, the reference half: how fast the device copies the bytes of one prompt's KV cache
// (Llama-3-8B, 4096 tokens: 512 MiB) with cudaMemcpyAsync, as one contiguous copy and as one copy
// per (layer, K|V) run, the way a pool stores a sequence's consecutive blocks. The KV transports'
// own numbers come from bench/kv_transfer (tandem-bench-kv-transfer), not from this binary.
#ifndef TANDEM_BENCH_GPU_KV_COPY_BENCH_H_
#define TANDEM_BENCH_GPU_KV_COPY_BENCH_H_

#include "bench/gpu/bench_report.h"
#include "common/model/model_config.h"

namespace tandem::bench {

inline constexpr char kKvCopySection[] = "kv_copy";

struct KvCopyOptions {
  int tokens = 4096;
  int warmup = 3;
  int repeats = 20;  // the fastest counts
};

// Adds the two cudaMemcpy rows and a row pointing at bench/kv_transfer for the transport.
void RunKvCopyReference(const ModelConfig& config, const KvCopyOptions& options,
                        BenchReport* report);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_GPU_KV_COPY_BENCH_H_
