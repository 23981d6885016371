#include "bench/gpu/decode_step_bench.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/gpu/model_costs.h"
#include "bench/gpu/timing.h"
#include "common/util/status_macros.h"

namespace tandem::bench {
namespace {

constexpr double kBatchOneGoal = 1.10;

std::string CaseName(int batch, int context, DType kv_dtype) {
  return absl::StrCat("batch ", batch, ", context ", context,
                      kv_dtype == DType::kFP8E4M3 ? ", fp8 KV" : "");
}

int BlocksFor(int tokens, int block_size) { return (tokens + block_size - 1) / block_size; }

absl::StatusOr<BenchRow> RunCase(CudaBackend& backend, int batch, int context,
                                 const DecodeBenchOptions& o, const DeviceRoofline& roofline) {
  const ModelConfig& config = backend.config();
  const KvLayout& layout = backend.kv_layout();
  ASSIGN_OR_RETURN(std::vector<std::vector<int32_t>> tables,
                   DistinctBlockTables(batch, BlocksFor(context, layout.block_size),
                                       layout.num_blocks, o.seed + 1000 * batch + context));
  const std::vector<int32_t> tokens = RandomTokenIds(batch, config.vocab_size, o.seed + batch);
  std::vector<ForwardItem> items(batch);
  for (int b = 0; b < batch; ++b) {
    // One new token at the last position: a decode step that reads the whole context. The KV
    // contents do not matter for the time, so no prefill runs first.
    items[b] = ForwardItem{std::span<const TokenId>(&tokens[b], 1), context - 1, tables[b], true};
  }
  std::vector<float> logits(size_t(batch) * config.vocab_size);
  const ForwardBatch step{items};
  for (int i = 0; i < o.warmup_steps; ++i) {
    RETURN_IF_ERROR(backend.Forward(step, LogitsOutput{logits}));
  }
  const int64_t replays_before = backend.graph_replays();
  std::vector<double> seconds;
  for (int i = 0; i < o.timed_steps; ++i) {
    const double start = WallSeconds();
    RETURN_IF_ERROR(backend.Forward(step, LogitsOutput{logits}));
    seconds.push_back(WallSeconds() - start);
  }
  const bool graphed = backend.graph_replays() - replays_before == o.timed_steps;
  const size_t non_finite = static_cast<size_t>(
      std::count_if(logits.begin(), logits.end(), [](float v) { return !std::isfinite(v); }));

  DecodeTraffic traffic = DecodeStepTraffic(config, batch, context);  // bf16 KV
  traffic.kv_read_bytes = traffic.kv_read_bytes / 2 * DTypeSize(layout.dtype);
  traffic.kv_write_bytes = traffic.kv_write_bytes / 2 * DTypeSize(layout.dtype);
  const double floor_s = double(traffic.total()) / roofline.copy_rw_bytes_per_s;
  const double median_s = Median(seconds);
  BenchRow row;
  row.section = kDecodeSection;
  row.name = CaseName(batch, context, layout.dtype);
  row.value = median_s * 1e3;
  row.unit = "ms";
  BenchReport::Compare(row, floor_s * 1e3,
                       batch == 1 ? absl::StrFormat("<= %.2f", kBatchOneGoal) : "");
  row.note = absl::StrFormat("%.0f tok/s, %.2f GB moved, %s", batch / median_s,
                             traffic.total() * 1e-9, graphed ? "CUDA graph" : "eager (no graph!)");
  if (non_finite > 0) {
    absl::StrAppend(&row.note, ", ", non_finite, " non-finite logits!");
  }
  row.details = {{"batch", batch},
                 {"context", context},
                 {"kv_dtype", DTypeName(layout.dtype)},
                 {"median_ms", median_s * 1e3},
                 {"min_ms", Min(seconds) * 1e3},
                 {"mean_ms", Mean(seconds) * 1e3},
                 {"floor_ms", floor_s * 1e3},
                 {"tokens_per_s", batch / median_s},
                 {"timed_steps", o.timed_steps},
                 {"warmup_steps", o.warmup_steps},
                 {"cuda_graph", graphed},
                 {"graphs_captured", backend.graphs_captured()},
                 {"non_finite_logits", non_finite},
                 {"bytes",
                  {{"weights", traffic.weight_bytes},
                   {"embedding_rows", traffic.embedding_bytes},
                   {"kv_read", traffic.kv_read_bytes},
                   {"kv_write", traffic.kv_write_bytes},
                   {"logits", traffic.logits_bytes},
                   {"total", traffic.total()}}}};
  return row;
}

void RunAndReport(CudaBackend& backend, int batch, int context, const std::string& extra_note,
                  const DecodeBenchOptions& o, const DeviceRoofline& roofline,
                  BenchReport* report) {
  std::string name = CaseName(batch, context, backend.kv_layout().dtype);
  if (!extra_note.empty()) absl::StrAppend(&name, " (shrunk)");
  absl::StatusOr<BenchRow> row = RunCase(backend, batch, context, o, roofline);
  if (!row.ok()) {
    report->AddFailed(kDecodeSection, name, row.status());
    return;
  }
  row->name = name;
  if (!extra_note.empty()) {
    absl::StrAppend(&row->note, "; ", extra_note);
    row->details["shrunk"] = extra_note;
  }
  report->Add(*std::move(row));
}

}  // namespace

size_t DecodeBenchKvTokens(const DecodeBenchOptions& o) {
  size_t most = 0;
  for (int b : o.batches) {
    for (int c : o.contexts) most = std::max(most, size_t(b) * size_t(c));
  }
  return most;
}

absl::Status RunDecodeBench(CudaBackend& backend, const DecodeBenchOptions& o,
                            const DeviceRoofline& roofline, BenchReport* report) {
  if (o.timed_steps < 1 || o.warmup_steps < 1) {
    return absl::InvalidArgumentError("decode bench: warmup_steps and timed_steps must be >= 1");
  }
  if (roofline.copy_rw_bytes_per_s <= 0) {
    return absl::FailedPreconditionError("decode bench: no copy bandwidth measured");
  }
  const KvLayout& layout = backend.kv_layout();
  const double pool_gib = double(layout.total_bytes()) / double(size_t{1} << 30);
  const double token_kib = double(layout.bytes_per_token()) / 1024.0;
  for (int batch : o.batches) {
    for (int context : o.contexts) {
      const int64_t needed = int64_t{batch} * BlocksFor(context, layout.block_size);
      if (needed <= layout.num_blocks) {
        RunAndReport(backend, batch, context, "", o, roofline, report);
        continue;
      }
      const double needed_gib =
          double(needed) * layout.block_size * layout.bytes_per_token() / double(size_t{1} << 30);
      report->AddSkipped(kDecodeSection, CaseName(batch, context, layout.dtype),
                         absl::StrFormat("does not fit: %d seqs x %d tokens x %.0f KiB/token = "
                                         "%.1f GiB of KV; the pool holds %.1f GiB",
                                         batch, context, token_kib, needed_gib, pool_gib));
      // The longest context (a multiple of 1024) that fits, unless already measured.
      const int fitting_blocks = layout.num_blocks / batch;
      const int shrunk = fitting_blocks * layout.block_size / 1024 * 1024;
      if (shrunk < 1024 ||
          std::find(o.contexts.begin(), o.contexts.end(), shrunk) != o.contexts.end()) {
        continue;
      }
      RunAndReport(backend, batch, shrunk,
                   absl::StrCat("context ", context, " does not fit the pool"), o, roofline,
                   report);
    }
  }
  return absl::OkStatus();
}

}  // namespace tandem::bench
