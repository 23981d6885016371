// A timing run, not a test (speed is asserted in benchmarks, not tests): decode steps of a
// ~100M-parameter f32 Llama shape next to this machine's memory bandwidth. Run with
//   tandem_backend_tests --gtest_also_run_disabled_tests --gtest_filter='*DecodeTiming*'
// Environment: TANDEM_TIMING_THREADS (default 2).
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/backend/aligned_buffer.h"
#include "common/backend/cpu_backend.h"
#include "gtest/gtest.h"
#include "tests/common/backend/backend_harness.h"
#include "tests/common/backend/test_model.h"

namespace tandem::testing {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// CPU seconds of the whole process: on a shared machine, CPU time per thread shows what the
// code would take without being descheduled (the pool's idle workers sleep, they do not spin).
double ProcessCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// Best of a few passes: memcpy (bytes read + written) and a streaming read, over `threads`.
void MeasureBandwidth(ThreadPool& pool, double* copy_gbs, double* read_gbs) {
  const size_t n = size_t{64} << 20;  // 256 MiB of floats per buffer
  AlignedFloats src, dst;
  ASSERT_TRUE(src.Reset(n) && dst.Reset(n));
  for (size_t i = 0; i < n; ++i) src.data()[i] = static_cast<float>(i & 1023);
  *copy_gbs = *read_gbs = 0;
  std::vector<float> sums(pool.num_threads() * 16);
  for (int pass = 0; pass < 4; ++pass) {
    auto t0 = Clock::now();
    pool.ParallelFor(
        n,
        [&](int64_t b, int64_t e) {
          std::memcpy(dst.data() + b, src.data() + b, (e - b) * sizeof(float));
        },
        1 << 16);
    auto t1 = Clock::now();
    *copy_gbs = std::max(*copy_gbs, 2.0 * n * sizeof(float) / Seconds(t0, t1) / 1e9);
    t0 = Clock::now();
    pool.ParallelFor(pool.num_threads(), [&](int64_t b, int64_t e) {
      for (int64_t tid = b; tid < e; ++tid) {
        const size_t per = n / pool.num_threads();
        const float* p = src.data() + tid * per;
        float acc[8] = {};
        for (size_t i = 0; i < per; i += 8) {
          for (int l = 0; l < 8; ++l) acc[l] += p[i + l];
        }
        sums[tid * 16] = acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7];
      }
    });
    t1 = Clock::now();
    *read_gbs = std::max(*read_gbs, n * sizeof(float) / Seconds(t0, t1) / 1e9);
  }
}

TEST(DecodeTiming, DISABLED_Llama100MShapeF32) {
  const char* env = std::getenv("TANDEM_TIMING_THREADS");
  const int threads = env != nullptr ? std::atoi(env) : 2;
  ModelConfig c = TinyLlamaConfig();
  c.vocab_size = 128256;
  c.hidden_size = 768;
  c.intermediate_size = 2048;
  c.num_layers = 12;
  c.num_heads = 12;
  c.num_kv_heads = 4;
  c.head_dim = 64;
  c.max_position_embeddings = 8192;
  c.rope_theta = 500000.0f;
  auto model = std::make_unique<TestModel>(c, DType::kF32, 1);
  CpuBackendOptions options;
  options.num_threads = threads;
  options.num_kv_blocks = 256;
  auto created = CpuBackend::Create(model->weights(), options);
  ASSERT_TRUE(created.ok()) << created.status();
  CpuBackend& backend = **created;
  model.reset();

  ThreadPool pool(threads);
  double copy_gbs, read_gbs;
  MeasureBandwidth(pool, &copy_gbs, &read_gbs);

  // Bytes one decode step streams: every weight but the embedding table (only gathered).
  const double step_bytes =
      backend.weight_bytes() - double(c.vocab_size) * c.hidden_size * sizeof(float);
  const int prompt = 64, steps = 16;
  const int max_batch = 8;
  std::vector<Sequence> seqs;
  for (int s = 0; s < max_batch; ++s) {
    Sequence seq;
    seq.tokens = RandomTokens(prompt + steps + 1, c.vocab_size, s);
    for (int b = 0; b < 6; ++b) seq.blocks.push_back(s * 6 + b);
    seqs.push_back(std::move(seq));
  }
  auto t0 = Clock::now();
  ASSERT_TRUE(RunForward(backend, {seqs[0].Next(prompt, true)}).ok());
  const double prefill_s = Seconds(t0, Clock::now());
  for (int s = 1; s < max_batch; ++s)
    ASSERT_TRUE(RunForward(backend, {seqs[s].Next(prompt, false)}).ok());

  std::printf(
      "\nmodel: %.1fM params (f32 weights %.0f MB, %.0f MB read per decode step), %d threads\n",
      c.NumParameters() / 1e6, backend.weight_bytes() / 1e6, step_bytes / 1e6, threads);
  std::printf("memory: memcpy %.1f GB/s (read+write), streaming read %.1f GB/s\n", copy_gbs,
              read_gbs);
  std::printf("prefill %d tokens: %.3f s (%.1f tok/s)\n", prompt, prefill_s, prompt / prefill_s);
  std::printf("%-6s %-9s %-8s %-13s %-10s %-14s\n", "batch", "ms/step", "tok/s", "weights GB/s",
              "% of read", "cpu ms/thread");
  for (int batch : {1, 2, 4, 8}) {
    for (Sequence& s : seqs) s.cached = prompt;
    ASSERT_TRUE(RunForward(backend, {seqs[0].Next(1, true)}).ok());  // warm up
    seqs[0].cached = prompt;
    double best = 1e9, best_cpu = 1e9;
    for (int step = 0; step < steps; ++step) {
      std::vector<ForwardItem> items;
      for (int s = 0; s < batch; ++s) items.push_back(seqs[s].Next(1, true));
      const double cpu = ProcessCpuSeconds();
      auto t = Clock::now();
      ASSERT_TRUE(RunForward(backend, items).ok());
      best = std::min(best, Seconds(t, Clock::now()));
      best_cpu = std::min(best_cpu, (ProcessCpuSeconds() - cpu) / threads);
    }
    const double gbs = step_bytes / best / 1e9;
    std::printf("%-6d %-9.2f %-8.1f %-13.1f %-10.0f %-14.2f\n", batch, best * 1e3, batch / best,
                gbs, 100 * gbs / read_gbs, best_cpu * 1e3);
  }
}

}  // namespace
}  // namespace tandem::testing
