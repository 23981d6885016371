#include "bench/gpu/bench_report.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace tandem::bench {
namespace {

std::string FormatValue(double v, const std::string& unit) {
  if (unit.empty()) return absl::StrFormat("%.3f", v);
  if (v >= 1000) return absl::StrFormat("%.0f %s", v, unit);
  if (v >= 100) return absl::StrFormat("%.1f %s", v, unit);
  return absl::StrFormat("%.3f %s", v, unit);
}

// `text` broken into lines of at most `width` characters at spaces, each line prefixed by `indent`.
std::string Wrap(const std::string& text, size_t width, const std::string& indent) {
  std::string out, line;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      absl::StrAppend(&out, indent, line, "\n");
      line.clear();
    }
    absl::StrAppend(&line, line.empty() ? "" : " ", word);
  }
  if (!line.empty()) absl::StrAppend(&out, indent, line, "\n");
  return out;
}

const char* StateName(BenchRow::State s) {
  switch (s) {
    case BenchRow::State::kMeasured:
      return "measured";
    case BenchRow::State::kSkipped:
      return "skipped";
    case BenchRow::State::kFailed:
      return "failed";
  }
  return "?";
}

nlohmann::json RowJson(const BenchRow& r) {
  nlohmann::json j = {{"name", r.name}, {"state", StateName(r.state)}};
  if (r.state == BenchRow::State::kMeasured) {
    j["value"] = r.value;
    j["unit"] = r.unit;
  }
  j["reference"] = r.reference ? nlohmann::json(*r.reference) : nlohmann::json(nullptr);
  j["ratio"] = r.ratio ? nlohmann::json(*r.ratio) : nlohmann::json(nullptr);
  j["goal"] = r.goal;
  j["meets_goal"] = r.meets_goal ? nlohmann::json(*r.meets_goal) : nlohmann::json(nullptr);
  j["note"] = r.note;
  j["details"] = r.details;
  return j;
}

}  // namespace

void BenchReport::DeclareSection(const std::string& key, const std::string& title,
                                 const std::string& convention) {
  sections_.push_back({key, title, convention});
}

void BenchReport::Add(BenchRow row) { rows_.push_back(std::move(row)); }

void BenchReport::AddSkipped(const std::string& section, const std::string& name,
                             const std::string& reason) {
  BenchRow row;
  row.section = section;
  row.name = name;
  row.state = BenchRow::State::kSkipped;
  row.note = reason;
  rows_.push_back(std::move(row));
}

void BenchReport::AddFailed(const std::string& section, const std::string& name,
                            const absl::Status& error) {
  BenchRow row;
  row.section = section;
  row.name = name;
  row.state = BenchRow::State::kFailed;
  row.note = error.ToString();
  rows_.push_back(std::move(row));
}

void BenchReport::Compare(BenchRow& row, double reference, const std::string& goal) {
  row.reference = reference;
  row.ratio = reference > 0 ? row.value / reference : 0.0;
  row.goal = goal;
  double bound = 0;
  if (goal.size() > 3 && std::sscanf(goal.c_str() + 3, "%lf", &bound) == 1) {
    if (goal.rfind("<= ", 0) == 0) row.meets_goal = *row.ratio <= bound;
    if (goal.rfind(">= ", 0) == 0) row.meets_goal = *row.ratio >= bound;
  }
}

int BenchReport::failed_rows() const {
  int n = 0;
  for (const BenchRow& r : rows_) n += r.state == BenchRow::State::kFailed;
  return n;
}

std::string BenchReport::FormatTable() const {
  std::string out;
  for (const Section& s : sections_) {
    absl::StrAppend(&out, "\n== ", s.title, " ==\n", Wrap(s.convention, 96, "   "));
    absl::StrAppend(&out, absl::StrFormat("   %-40s %-16s %-16s %-7s %-8s %-4s %s\n", "case",
                                          "measured", "floor/peak", "ratio", "goal", "ok", "note"));
    for (const BenchRow& r : rows_) {
      if (r.section != s.key) continue;
      if (r.state != BenchRow::State::kMeasured) {
        absl::StrAppend(
            &out,
            absl::StrFormat("   %-40s %-16s %s\n", r.name,
                            r.state == BenchRow::State::kSkipped ? "SKIPPED" : "FAILED", r.note));
        continue;
      }
      const std::string reference = r.reference ? FormatValue(*r.reference, r.unit) : "-";
      const std::string ratio = r.ratio ? absl::StrFormat("%.3f", *r.ratio) : "-";
      const std::string ok = r.meets_goal ? (*r.meets_goal ? "yes" : "NO") : "";
      std::string line = absl::StrFormat("   %-40s %-16s %-16s %-7s %-8s %-4s %s", r.name,
                                         FormatValue(r.value, r.unit), reference, ratio,
                                         r.goal.empty() ? "-" : r.goal, ok, r.note);
      line.erase(line.find_last_not_of(' ') + 1);
      absl::StrAppend(&out, line, "\n");
    }
  }
  return out;
}

nlohmann::json BenchReport::ToJson() const {
  nlohmann::json sections = nlohmann::json::array();
  for (const Section& s : sections_) {
    nlohmann::json rows = nlohmann::json::array();
    for (const BenchRow& r : rows_) {
      if (r.section == s.key) rows.push_back(RowJson(r));
    }
    sections.push_back(
        {{"key", s.key}, {"title", s.title}, {"convention", s.convention}, {"rows", rows}});
  }
  return {{"sections", sections}};
}

absl::Status WriteJsonFile(const std::string& dir, const std::string& file_name,
                           const nlohmann::json& json) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("creating ", dir, ": ", ec.message()));
  const std::string path = (std::filesystem::path(dir) / file_name).string();
  std::ofstream file(path);
  file << json.dump(2) << "\n";
  file.close();
  if (!file) return absl::InternalError(absl::StrCat("writing ", path, " failed"));
  return absl::OkStatus();
}

}  // namespace tandem::bench
