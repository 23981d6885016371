#include "bench/gpu/prefill_bench.h"

#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/gpu/model_costs.h"
#include "bench/gpu/timing.h"
#include "common/util/status_macros.h"

namespace tandem::bench {
namespace {

constexpr double kGoal = 0.70;

absl::StatusOr<BenchRow> RunPrefill(CudaBackend& backend, const PrefillBenchOptions& o,
                                    const DeviceRoofline& roofline) {
  if (o.tokens < 1 || o.repeats < 1 || o.warmup < 0) {
    return absl::InvalidArgumentError("prefill bench: tokens and repeats must be >= 1");
  }
  const ModelConfig& config = backend.config();
  const KvLayout& layout = backend.kv_layout();
  ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> tables,
                   DistinctBlockTables(1, (o.tokens + layout.block_size - 1) / layout.block_size,
                                       layout.num_blocks, o.seed));
  const std::vector<int32_t> tokens = RandomTokenIds(o.tokens, config.vocab_size, o.seed);
  const ForwardItem item{tokens, 0, tables[0], /*want_logits=*/true};
  const ForwardBatch batch{std::span<const ForwardItem>(&item, 1)};
  std::vector<float> logits(config.vocab_size);
  for (int i = 0; i < o.warmup; ++i) RETURN_IF_ERROR(backend.Forward(batch, LogitsOutput{logits}));
  std::vector<double> seconds;
  for (int i = 0; i < o.repeats; ++i) {
    const double start = WallSeconds();
    RETURN_IF_ERROR(backend.Forward(batch, LogitsOutput{logits}));
    seconds.push_back(WallSeconds() - start);
  }
  int non_finite = 0;
  for (float v : logits) non_finite += !std::isfinite(v);

  const PrefillFlops flops = PrefillFlopCount(config, o.tokens);
  const double median_s = Median(seconds);
  BenchRow row;
  row.section = kPrefillSection;
  row.name = absl::StrCat("prefill ", o.tokens, " tokens, 1 sequence");
  row.value = flops.total() / median_s * 1e-12;
  row.unit = "TFLOP/s";
  BenchReport::Compare(row, roofline.gemm_peak_flops_per_s * 1e-12,
                       absl::StrFormat(">= %.2f", kGoal));
  row.note =
      absl::StrFormat("median %.1f ms (best %.1f ms) for %.1f TFLOP, %.0f tok/s", median_s * 1e3,
                      Min(seconds) * 1e3, flops.total() * 1e-12, o.tokens / median_s);
  if (non_finite > 0) absl::StrAppend(&row.note, ", ", non_finite, " non-finite logits!");
  row.details = {{"tokens", o.tokens},
                 {"median_ms", median_s * 1e3},
                 {"min_ms", Min(seconds) * 1e3},
                 {"mean_ms", Mean(seconds) * 1e3},
                 {"repeats", o.repeats},
                 {"warmup", o.warmup},
                 {"flops",
                  {{"linear", flops.linear},
                   {"attention", flops.attention},
                   {"lm_head", flops.lm_head},
                   {"total", flops.total()},
                   {"two_params_tokens_convention", flops.two_params_tokens_convention}}},
                 {"tflops_two_params_tokens_convention",
                  flops.two_params_tokens_convention / median_s * 1e-12},
                 {"gemm_peak_shape", roofline.gemm_peak_shape},
                 {"non_finite_logits", non_finite}};
  return row;
}

}  // namespace

void RunPrefillBench(CudaBackend& backend, const PrefillBenchOptions& o,
                     const DeviceRoofline& roofline, BenchReport* report) {
  absl::StatusOr<BenchRow> row = RunPrefill(backend, o, roofline);
  if (!row.ok()) {
    report->AddFailed(kPrefillSection, absl::StrCat("prefill ", o.tokens, " tokens, 1 sequence"),
                      row.status());
    return;
  }
  report->Add(*std::move(row));
}

}  // namespace tandem::bench
