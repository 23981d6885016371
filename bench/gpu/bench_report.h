// The GPU benchmark's results: rows grouped into sections (one per measurement of issue 5), each
// row a measurement beside its floor or peak from the same run, printed as a table and written as
// JSON. Rows that could not run (a shape that does not fit, a kernel error) stay in the report
// with the reason, so a run always shows what it did and did not measure.
#ifndef TANDEM_BENCH_GPU_BENCH_REPORT_H_
#define TANDEM_BENCH_GPU_BENCH_REPORT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace tandem::bench {

struct BenchRow {
  std::string section;  // a key declared with BenchReport::DeclareSection
  std::string name;     // "batch 8, context 8192"
  enum class State { kMeasured, kSkipped, kFailed };
  State state = State::kMeasured;
  double value = 0;  // in `unit`
  std::string unit;  // "ms", "GB/s", "TFLOP/s"
  // The floor (for times) or the peak (for rates) it is compared with, in `unit`.
  std::optional<double> reference;
  std::optional<double> ratio;  // value / reference
  std::string goal;             // "<= 1.10", ">= 0.70" or empty
  std::optional<bool> meets_goal;
  std::string note;  // the reason for skipped/failed rows; else remarks
  nlohmann::json details = nlohmann::json::object();
};

class BenchReport {
 public:
  // Sections print in declaration order; `convention` says what the numbers count.
  void DeclareSection(const std::string& key, const std::string& title,
                      const std::string& convention);
  void Add(BenchRow row);
  void AddSkipped(const std::string& section, const std::string& name, const std::string& reason);
  void AddFailed(const std::string& section, const std::string& name, const absl::Status& error);

  // Sets ratio = value / reference, and meets_goal when `goal` is "<= x" or ">= x".
  static void Compare(BenchRow& row, double reference, const std::string& goal);

  const std::vector<BenchRow>& rows() const { return rows_; }
  int failed_rows() const;
  std::string FormatTable() const;
  // {"sections": [{key, title, convention, rows: [...]}, ...]}
  nlohmann::json ToJson() const;

 private:
  struct Section {
    std::string key, title, convention;
  };
  std::vector<Section> sections_;
  std::vector<BenchRow> rows_;
};

// Writes `json` (pretty-printed) to dir/file_name, creating `dir` when needed.
absl::Status WriteJsonFile(const std::string& dir, const std::string& file_name,
                           const nlohmann::json& json);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_GPU_BENCH_REPORT_H_
