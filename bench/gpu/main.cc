// tandem-bench-gpu: the cuda backend and its kernels against the GPU's own roofline (issue 5),
// every floor measured in the same run:
//
//   1. device-to-device copy rate and cuBLASLt bf16 GEMM peak,
//   2. decode step time for Llama-3-8B shapes (random weights) at batch 1/8/32/128 and context
//      1024/8192 vs (bytes the step must move) / copy rate, with a bf16 KV pool and then an fp8
//      one,
//   3. prefill of a 4096-token prompt, achieved FLOP/s vs the GEMM peak,
//   4. paged decode attention alone at 1k/8k/32k contexts, batch 1/8/32, bf16 and fp8 K/V, K/V
//      bytes/s vs the copy rate,
//   5. cudaMemcpy of a 4096-token KV cache's bytes (the reference for bench/kv_transfer),
//   6. each linear layer alone at decode and prefill row counts, cuBLASLt's heuristic pick and
//      GemmRunner::Autotune's,
//   7. prefill attention alone at 1k/4k/16k tokens, FLOP/s vs the GEMM peak.
//
//   tandem-bench-gpu [--out DIR] [--quick] [--device N] [--sections LIST]
//
// Prints a table and writes DIR/bench_gpu.json. Exit status: 0 when every row ran or was skipped
// for a stated reason (goals missed included), 1 when a measurement failed, 2 when there is no
// usable CUDA device, 64 for bad flags.
#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "bench/gpu/attention_bench.h"
#include "bench/gpu/bench_backend.h"
#include "bench/gpu/bench_report.h"
#include "bench/gpu/decode_step_bench.h"
#include "bench/gpu/device_roofline.h"
#include "bench/gpu/gpu_info.h"
#include "bench/gpu/kv_copy_bench.h"
#include "bench/gpu/linear_bench.h"
#include "bench/gpu/model_costs.h"
#include "bench/gpu/prefill_attention_bench.h"
#include "bench/gpu/prefill_bench.h"
#include "common/util/cli_flags.h"
#include "kernels/cuda_status.h"

namespace tandem::bench {
namespace {

constexpr int kExitFailed = 1;
constexpr int kExitNoGpu = 2;
constexpr int kExitUsage = 64;

constexpr char kIntro[] =
    "usage: tandem-bench-gpu [--out DIR] [--quick] [--device N] [--sections LIST]\n";

struct MainOptions {
  std::string out_dir;
  bool quick = false;
  int device = 0;
  std::set<std::string> sections = {"decode",  "prefill", "attention",
                                    "kv_copy", "linear",  "prefill_attention"};
};

void DeclareSections(BenchReport& report) {
  report.DeclareSection(
      kRooflineSection, "1. Device roofline (measured in this run)",
      "copy: cudaMemcpyAsync device to device, fastest of N; 'read+write' counts bytes read plus "
      "bytes written (2 x size / time) and is the bandwidth every floor below uses; the read-only "
      "convention counts the size once. GEMM: kernels::GemmRunner (cuBLASLt) bf16 in, f32 "
      "accumulate, bf16 out, 2*M*N*K FLOPs, fastest repeat.");
  report.DeclareSection(
      kDecodeSection, "2. Decode step, Llama-3-8B shapes (random bf16 weights, cuda backend)",
      "time: median wall time of one synchronous CudaBackend::Forward (one token per sequence at "
      "position context-1, plan upload, CUDA graph, f32 logits to the host). floor: HBM bytes "
      "the step must move (weights once + every position's K/V + new K/V + logits) / copy "
      "read+write rate. ratio = time / floor; goal <= 1.10 at batch 1.");
  report.DeclareSection(
      kPrefillSection, "3. Prefill, one 4096-token prompt (Llama-3-8B shapes)",
      "rate: FLOPs / median wall time of Forward; FLOPs = 2 x linear weights (6.98e9) x tokens + "
      "causal attention 2*L*H*d*T^2 + LM head on the last row (the embedding gather counts none; "
      "the JSON also has the 2 x all-params x tokens count). peak: the GEMM peak above; goal "
      ">= 0.70.");
  report.DeclareSection(
      kAttentionSection, "4. Paged decode attention alone (kernels::PagedDecodeAttention)",
      "rate: one layer's K+V bytes of every sequence / fastest per-call time (32 query heads, 8 KV "
      "heads, head_dim 128, block 16, shuffled distinct blocks, calls cycle over 4 layers so L2 "
      "holds nothing useful). peak: copy read+write rate; goal >= 0.85.");
  report.DeclareSection(
      kLinearSection,
      "6. Each linear layer alone (kernels::GemmRunner, cuBLASLt), Llama-3-8B shapes",
      "decode rows (< 1024): time per call against its floor (weight + x + y bytes / copy "
      "read+write rate; ratio = time / floor); prefill rows: TFLOP/s against the GEMM peak. The "
      "value is the heuristic's algorithm; the note has GemmRunner::Autotune's pick among up to 8 "
      "of the heuristic's candidates. Weight copies are cycled so none is read from L2.");
  report.DeclareSection(
      kPrefillAttentionSection, "7. Prefill attention alone (kernels::PrefillAttention)",
      "one prompt from position 0, one layer per call (32 heads, 8 KV heads, head_dim 128): causal "
      "FLOPs (4 * heads * head_dim * T(T+1)/2) / fastest per-call time, against the GEMM peak.");
  report.DeclareSection(
      kKvCopySection, "5. KV transfer reference: the same bytes as a 4096-token Llama-3-8B KV",
      "rate: bytes / fastest time (each byte counted once, as a transfer delivers it). Only the "
      "cudaMemcpy reference is measured here; the KV transport row comes from bench/kv_transfer "
      "(tandem-bench-kv-transfer).");
}

int Run(const MainOptions& m) {
  const absl::Status available = kernels::CudaDeviceAvailable();
  if (!available.ok()) {
    std::fprintf(stderr,
                 "tandem-bench-gpu: no usable CUDA device (%s).\n"
                 "This benchmark needs an NVIDIA GPU (H100/H200 class) and its driver; nothing "
                 "was measured.\n",
                 available.ToString().c_str());
    return kExitNoGpu;
  }
  if (const cudaError_t e = cudaSetDevice(m.device); e != cudaSuccess) {
    std::fprintf(
        stderr, "tandem-bench-gpu: %s\n",
        kernels::CudaStatus(e, absl::StrCat("cudaSetDevice(", m.device, ")")).ToString().c_str());
    return kExitNoGpu;
  }
  absl::StatusOr<GpuInfo> info = QueryGpuInfo(m.device);
  if (!info.ok()) {
    std::fprintf(stderr, "tandem-bench-gpu: %s\n", info.status().ToString().c_str());
    return kExitFailed;
  }
  std::printf("tandem-bench-gpu on %s%s\n", info->Summary().c_str(),
              m.quick ? " [--quick: few repetitions]" : "");
  std::fflush(stdout);

  const ModelConfig config = Llama3_8BConfig();
  BenchReport report;
  DeclareSections(report);
  nlohmann::json json = {{"benchmark", "tandem-bench-gpu"},
                         {"gpu", info->ToJson()},
                         {"quick", m.quick},
                         {"model",
                          {{"name", "Llama-3-8B shapes, random bf16 weights"},
                           {"parameters", config.NumParameters()},
                           {"linear_weight_elements", LinearWeightElements(config)},
                           {"kv_bytes_per_token", KvBytesPerToken(config)}}}};

  RooflineOptions roofline_options;
  if (m.quick) {
    roofline_options.copy_repeats = 5;
    roofline_options.gemm_iterations = 3;
    roofline_options.gemm_repeats = 2;
  }
  std::printf("measuring the roofline...\n");
  std::fflush(stdout);
  const absl::StatusOr<DeviceRoofline> roofline = MeasureDeviceRoofline(roofline_options, &report);
  if (roofline.ok()) {
    json["roofline"] = {{"copy_rw_bytes_per_s", roofline->copy_rw_bytes_per_s},
                        {"copy_read_bytes_per_s", roofline->copy_read_bytes_per_s},
                        {"gemm_peak_flops_per_s", roofline->gemm_peak_flops_per_s},
                        {"gemm_peak_shape", roofline->gemm_peak_shape}};
    if (m.sections.count("attention")) {
      std::printf("paged decode attention...\n");
      std::fflush(stdout);
      AttentionBenchOptions o;
      if (m.quick) {
        o.iterations = 5;
        o.repeats = 2;
      }
      RunAttentionBench(config, o, *roofline, &report);
    }
    if (m.sections.count("linear")) {
      std::printf("linear layers alone...\n");
      std::fflush(stdout);
      LinearBenchOptions o;
      if (m.quick) {
        o.iterations = 5;
        o.repeats = 2;
      }
      RunLinearBench(config, o, *roofline, &report);
    }
    if (m.sections.count("prefill_attention")) {
      std::printf("prefill attention alone...\n");
      std::fflush(stdout);
      PrefillAttentionBenchOptions o;
      if (m.quick) o.repeats = 2;
      RunPrefillAttentionBench(config, o, *roofline, &report);
    }
    if (m.sections.count("kv_copy")) {
      std::printf("KV copy reference...\n");
      std::fflush(stdout);
      KvCopyOptions o;
      if (m.quick) o.repeats = 5;
      RunKvCopyReference(config, o, &report);
    }
    const bool decode = m.sections.count("decode") > 0;
    const bool prefill = m.sections.count("prefill") > 0;
    if (decode || prefill) {
      DecodeBenchOptions decode_options;
      PrefillBenchOptions prefill_options;
      if (m.quick) {
        decode_options.warmup_steps = 2;
        decode_options.timed_steps = 5;
        prefill_options.repeats = 2;
      }
      BenchBackendOptions backend_options;
      backend_options.device = m.device;
      backend_options.wanted_kv_tokens = std::max<size_t>(
          decode ? DecodeBenchKvTokens(decode_options) : 0, size_t(prefill_options.tokens));
      backend_options.max_batch_tokens = prefill_options.tokens;
      std::printf("creating the Llama-3-8B-shaped cuda backend...\n");
      std::fflush(stdout);
      absl::StatusOr<BenchBackend> backend = CreateBenchBackend(config, backend_options);
      if (!backend.ok()) {
        if (decode) report.AddFailed(kDecodeSection, "cuda backend", backend.status());
        if (prefill) report.AddFailed(kPrefillSection, "cuda backend", backend.status());
      } else {
        json["backend"] = backend->details;
        std::printf("%s\n", backend->sizing_note.c_str());
        if (decode) {
          std::printf("decode steps...\n");
          std::fflush(stdout);
          const absl::Status status =
              RunDecodeBench(*backend->backend, decode_options, *roofline, &report);
          if (!status.ok()) report.AddFailed(kDecodeSection, "decode bench", status);
        }
        if (prefill) {
          std::printf("prefill...\n");
          std::fflush(stdout);
          RunPrefillBench(*backend->backend, prefill_options, *roofline, &report);
        }
      }
    }
    if (decode) {
      // The same decode cases over an fp8 KV pool: a backend of its own, made once the bf16 one
      // is gone, with half the KV bytes per token.
      DecodeBenchOptions fp8_options;
      if (m.quick) {
        fp8_options.warmup_steps = 2;
        fp8_options.timed_steps = 5;
      }
      BenchBackendOptions fp8_backend_options;
      fp8_backend_options.device = m.device;
      fp8_backend_options.wanted_kv_tokens = DecodeBenchKvTokens(fp8_options);
      fp8_backend_options.kv_dtype = DType::kFP8E4M3;
      std::printf("creating the Llama-3-8B-shaped cuda backend with fp8 KV...\n");
      std::fflush(stdout);
      absl::StatusOr<BenchBackend> fp8 = CreateBenchBackend(config, fp8_backend_options);
      if (!fp8.ok()) {
        report.AddFailed(kDecodeSection, "cuda backend, fp8 KV", fp8.status());
      } else {
        json["backend_fp8_kv"] = fp8->details;
        std::printf("%s\n", fp8->sizing_note.c_str());
        const absl::Status status = RunDecodeBench(*fp8->backend, fp8_options, *roofline, &report);
        if (!status.ok()) report.AddFailed(kDecodeSection, "decode bench, fp8 KV", status);
      }
    }
  } else {
    std::fprintf(stderr, "tandem-bench-gpu: the roofline failed, so nothing has a floor: %s\n",
                 roofline.status().ToString().c_str());
  }

  std::printf("%s\n", report.FormatTable().c_str());
  int goals = 0, met = 0;
  for (const BenchRow& row : report.rows()) {
    if (row.meets_goal) {
      ++goals;
      met += *row.meets_goal;
    }
  }
  std::printf("goals met: %d of %d; failed rows: %d\n", met, goals, report.failed_rows());
  const nlohmann::json sections = report.ToJson();
  json["sections"] = sections["sections"];
  json["goals"] = {{"met", met}, {"checked", goals}};
  if (!m.out_dir.empty()) {
    const absl::Status written = WriteJsonFile(m.out_dir, "bench_gpu.json", json);
    if (!written.ok()) {
      std::fprintf(stderr, "tandem-bench-gpu: %s\n", written.ToString().c_str());
      return kExitFailed;
    }
    std::printf("wrote %s/bench_gpu.json\n", m.out_dir.c_str());
  } else {
    std::printf("(no --out DIR: JSON not written)\n");
  }
  return (!roofline.ok() || report.failed_rows() > 0) ? kExitFailed : 0;
}

}  // namespace
}  // namespace tandem::bench

int main(int argc, char** argv) {
  tandem::bench::MainOptions options;
  std::string sections;
  tandem::FlagSet flags;
  flags.String("out", &options.out_dir, {"DIR", "write DIR/bench_gpu.json (created if missing)"});
  flags.Switch("quick", &options.quick,
               "few repetitions: a smoke run of every section (numbers are noisier)");
  flags.Number("device", &options.device, {"N", "CUDA device (default 0)"});
  flags.String("sections", &sections,
               {"LIST",
                "comma-separated subset of decode,prefill,attention,kv_copy,linear,"
                "prefill_attention (default: all; the roofline always runs: the other sections' "
                "floors come from it)"});
  const std::string usage = flags.Help(tandem::bench::kIntro);
  bool help = false;
  const std::string error = flags.Parse(argc, argv, &help);
  if (help) {
    std::fputs(usage.c_str(), stdout);
    return 0;
  }
  if (!error.empty()) {
    std::fprintf(stderr, "tandem-bench-gpu: %s\n%s", error.c_str(), usage.c_str());
    return tandem::bench::kExitUsage;
  }
  if (!sections.empty()) {
    options.sections.clear();
    for (absl::string_view s : absl::StrSplit(sections, ',', absl::SkipEmpty())) {
      const std::string name(s);
      if (!tandem::bench::MainOptions().sections.contains(name)) {
        std::fprintf(stderr, "tandem-bench-gpu: unknown section '%s'\n%s", name.c_str(),
                     usage.c_str());
        return tandem::bench::kExitUsage;
      }
      options.sections.insert(name);
    }
  }
  return tandem::bench::Run(options);
}
