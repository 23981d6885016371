#include "bench/serve/bench_report.h"

#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::bench {
namespace {

using json = nlohmann::json;

constexpr double kInf = std::numeric_limits<double>::infinity();

int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

RequestResult Ok(double start, double ttft, double e2e, int32_t tokens) {
  RequestResult r;
  r.success = true;
  r.start_s = start;
  r.ttft_s = ttft;
  r.e2e_s = e2e;
  r.prompt_tokens = 20;
  r.output_tokens = tokens;
  for (int i = 1; i < tokens; ++i) r.itl_s.push_back((e2e - ttft) / (tokens - 1));
  return r;
}

RunRecord MakeRun(double rate, double slowdown) {
  RunRecord run;
  run.rate = rate;
  for (int i = 0; i < 20; ++i) {
    run.results.push_back(
        Ok(i * 0.1, 0.03 * slowdown * (1 + i % 5), 0.8 * slowdown + i * 0.005, 8 + i % 3));
  }
  RequestResult failed;
  failed.error = "HTTP 503: overloaded";
  failed.http_status = 503;
  run.results.push_back(failed);
  SloLimits slo{.ttft_s = 0.2, .tpot_s = 0.15};
  run.summary = SummarizeRun(run.results, 3.0, rate, slo);
  return run;
}

BenchReport SweepReport() {
  BenchReport report;
  report.config = {{"backend", "http"}, {"num_prompts", 21}};
  report.slo = {.ttft_s = 0.2, .tpot_s = 0.15};
  report.runs = {MakeRun(2, 1), MakeRun(4, 2), MakeRun(kInf, 4)};
  std::vector<SweepPoint> points;
  for (const RunRecord& r : report.runs) points.push_back({r.rate, r.summary});
  report.goodput = ComputeGoodput(points);
  return report;
}

// A small XML checker: every tag closes in order, attributes are quoted, text holds no raw '<',
// and '&' only starts an entity. Returns "" when well formed, else the problem.
std::string CheckXml(const std::string& s) {
  std::vector<std::string> open;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '&') {
      size_t semi = s.find(';', i);
      std::string entity = s.substr(i, semi == std::string::npos ? 8 : semi - i + 1);
      if (entity != "&amp;" && entity != "&lt;" && entity != "&gt;" && entity != "&quot;" &&
          entity != "&apos;") {
        return "bad entity at " + std::to_string(i) + ": " + entity;
      }
      i = semi + 1;
      continue;
    }
    if (s[i] != '<') {
      ++i;
      continue;
    }
    size_t end = i + 1;
    bool in_quote = false;
    for (; end < s.size() && (in_quote || s[end] != '>'); ++end) {
      if (s[end] == '"') in_quote = !in_quote;
      if (!in_quote && s[end] == '<') return "'<' inside a tag at " + std::to_string(end);
    }
    if (end >= s.size()) return "unterminated tag at " + std::to_string(i);
    std::string tag = s.substr(i + 1, end - i - 1);
    if (Count(tag, "\"") % 2 != 0) return "unbalanced quotes in <" + tag + ">";
    if (tag[0] == '/') {
      std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return "unexpected </" + name + ">";
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find_first_of(" \n")));
    }
    i = end + 1;
  }
  return open.empty() ? "" : "unclosed <" + open.back() + ">";
}

TEST(ReportToJsonTest, RoundTripsEveryField) {
  BenchReport report = SweepReport();
  json j = json::parse(ReportToJson(report).dump());
  EXPECT_EQ(j["config"]["backend"], "http");
  EXPECT_EQ(j["config"]["num_prompts"], 21);
  EXPECT_DOUBLE_EQ(j["slo"]["ttft_s"].get<double>(), 0.2);
  EXPECT_DOUBLE_EQ(j["slo"]["tpot_s"].get<double>(), 0.15);
  ASSERT_EQ(j["runs"].size(), 3u);
  EXPECT_EQ(j["runs"][0]["rate"], 2.0);
  EXPECT_EQ(j["runs"][2]["rate"], "inf");  // JSON has no infinity
  const json& s = j["runs"][2]["summary"];
  EXPECT_EQ(s["offered_rate"], "inf");
  for (const char* field : {"duration_s", "num_requests", "completed", "failed", "input_tokens",
                            "output_tokens", "request_throughput", "input_throughput",
                            "output_throughput", "slo_attainment", "good_request_rate"}) {
    EXPECT_TRUE(s.contains(field)) << field;
  }
  EXPECT_EQ(s["completed"], 20);
  EXPECT_EQ(s["failed"], 1);
  EXPECT_EQ(s["input_tokens"], report.runs[2].summary.input_tokens);
  for (const char* dist : {"ttft_s", "tpot_s", "itl_s", "e2e_s"}) {
    for (const char* key : {"count", "mean", "median", "p90", "p99", "min", "max"}) {
      EXPECT_TRUE(s[dist].contains(key)) << dist << "." << key;
    }
  }
  EXPECT_DOUBLE_EQ(s["ttft_s"]["p99"].get<double>(), report.runs[2].summary.ttft_s.p99);
  const json& requests = j["runs"][0]["requests"];
  ASSERT_EQ(requests.size(), 21u);
  for (const char* key : {"success", "error", "http_status", "start_s", "ttft_s", "tpot_s", "e2e_s",
                          "prompt_tokens", "output_tokens"}) {
    EXPECT_TRUE(requests[0].contains(key)) << key;
  }
  EXPECT_EQ(requests[0]["success"], true);
  EXPECT_DOUBLE_EQ(requests[0]["tpot_s"].get<double>(), *Tpot(report.runs[0].results[0]));
  EXPECT_EQ(requests[20]["success"], false);
  EXPECT_EQ(requests[20]["error"], "HTTP 503: overloaded");
  EXPECT_EQ(requests[20]["http_status"], 503);
  EXPECT_TRUE(requests[20]["tpot_s"].is_null());
  // Nodes only where the client knows them (tandem-sim).
  EXPECT_FALSE(requests[0].contains("decode_node"));
  EXPECT_FALSE(requests[0].contains("prefill_node"));
  report.runs[0].results[0].decode_node = "decode-1";
  report.runs[0].results[0].prefill_node = "prefill-0";
  const json named = json::parse(ReportToJson(report).dump())["runs"][0]["requests"][0];
  EXPECT_EQ(named["decode_node"], "decode-1");
  EXPECT_EQ(named["prefill_node"], "prefill-0");
  // Rate 2 meets the SLO for all 20 successes of 21: 95% >= 90%; rate 4 does not.
  EXPECT_EQ(j["goodput"]["rate"], 2.0);
  EXPECT_EQ(j["goodput"]["monotonic"], true);
  EXPECT_DOUBLE_EQ(j["goodput"]["threshold"].get<double>(), 0.9);

  json brief = ReportToJson(report, /*include_requests=*/false);
  EXPECT_FALSE(brief["runs"][0].contains("requests"));
}

TEST(ReportToJsonTest, UnsetLimitsAndNoGoodputAreNull) {
  BenchReport report;
  report.runs = {MakeRun(1, 1)};
  json j = json::parse(ReportToJson(report).dump());
  EXPECT_TRUE(j["slo"]["ttft_s"].is_null());
  EXPECT_TRUE(j["slo"]["tpot_s"].is_null());
  EXPECT_TRUE(j["goodput"]["rate"].is_null());
  EXPECT_TRUE(j["config"].is_null());
  EXPECT_FALSE(j["runs"][0].contains("started_unix_s"));  // not a real run: no wall time
}

TEST(ReportToJsonTest, ARealRunCarriesTheWallTimeOfItsZero) {
  BenchReport report;
  report.runs = {MakeRun(1, 1)};
  report.runs[0].started_unix_s = 1'795'000'000.25;
  json j = json::parse(ReportToJson(report).dump());
  EXPECT_DOUBLE_EQ(j["runs"][0]["started_unix_s"].get<double>(), 1'795'000'000.25);
}

TEST(RenderSvgTest, SweepHasACurvePerRunAndAnAttainmentPanel) {
  BenchReport report = SweepReport();
  std::string svg = RenderSvg(report, "tandem <sim> & friends");
  ASSERT_EQ(svg.rfind("<svg", 0), 0u) << svg.substr(0, 100);
  EXPECT_NE(svg.find("xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_EQ(svg.substr(svg.size() - 7), "</svg>\n");
  EXPECT_EQ(CheckXml(svg), "");
  EXPECT_NE(svg.find("tandem &lt;sim&gt; &amp; friends"), std::string::npos);
  EXPECT_EQ(svg.find("<sim>"), std::string::npos);
  // Four CDF panels with one line per run, plus the attainment line.
  EXPECT_EQ(Count(svg, "<polyline"), 4 * 3 + 1);
  for (const char* colour : {"#1f77b4", "#ff7f0e", "#2ca02c"}) {
    EXPECT_GE(Count(svg, std::string("stroke=\"") + colour + "\""), 5) << colour;
  }
  EXPECT_NE(svg.find("SLO attainment vs request rate"), std::string::npos);
  EXPECT_NE(svg.find("goodput 2 req/s"), std::string::npos);
  EXPECT_NE(svg.find(">90%<"), std::string::npos);
  // Dashed: the TTFT and TPOT limits, the 90% line and the goodput line.
  EXPECT_EQ(Count(svg, "stroke-dasharray"), 4);
  // Legend entries.
  EXPECT_NE(svg.find(">2 req/s<"), std::string::npos);
  EXPECT_NE(svg.find(">inf (all at once)<"), std::string::npos);
  EXPECT_NE(svg.find(">TTFT: time to first token<"), std::string::npos);
}

TEST(RenderSvgTest, SingleRunHasNoAttainmentPanelAndSurvivesNoData) {
  BenchReport report;
  report.runs = {MakeRun(3, 1)};
  std::string svg = RenderSvg(report, "one run");
  EXPECT_EQ(CheckXml(svg), "");
  EXPECT_EQ(Count(svg, "<polyline"), 4);
  EXPECT_EQ(svg.find("SLO attainment"), std::string::npos);
  EXPECT_EQ(Count(svg, "stroke-dasharray"), 0);  // no limits set

  // Only failures: axes and a "no data" note, no lines.
  RunRecord failed;
  failed.rate = 1;
  failed.results.resize(3);
  BenchReport empty;
  empty.runs = {failed};
  std::string blank = RenderSvg(empty, "failures");
  EXPECT_EQ(CheckXml(blank), "");
  EXPECT_EQ(Count(blank, "<polyline"), 0);
  EXPECT_EQ(Count(blank, ">no data<"), 4);
}

TEST(FormatRunTableTest, VllmStyleBlock) {
  RunSummary s = MakeRun(4, 1).summary;
  std::string table = FormatRunTable(s, {.ttft_s = 0.2, .tpot_s = 0.15});
  EXPECT_EQ(table.rfind("============ Serving Benchmark Result ============\n", 0), 0u) << table;
  EXPECT_NE(table.find("Successful requests:                     20\n"), std::string::npos)
      << table;
  EXPECT_NE(table.find("Failed requests:                         1\n"), std::string::npos);
  EXPECT_NE(table.find("Benchmark duration (s):                  3.00\n"), std::string::npos);
  EXPECT_NE(table.find("Total input tokens:                      400\n"), std::string::npos);
  EXPECT_NE(table.find("Request throughput (req/s):              6.67\n"), std::string::npos);
  for (const char* line :
       {"Total generated tokens:", "Output token throughput (tok/s):",
        "Total token throughput (tok/s):", "Mean TTFT (ms):", "Median TTFT (ms):", "P90 TTFT (ms):",
        "P99 TTFT (ms):", "Mean TPOT (ms):", "P99 ITL (ms):", "Median E2EL (ms):",
        "SLO attainment (%):", "Request goodput (req/s):",
        "---------------Time to First Token----------------"}) {
    EXPECT_NE(table.find(line), std::string::npos) << line;
  }
  EXPECT_NE(table.find("TTFT limit (ms):                         200.00\n"), std::string::npos);
  EXPECT_EQ(table.substr(table.size() - 51), std::string(50, '=') + "\n");

  std::string plain = FormatRunTable(s, {});
  EXPECT_EQ(plain.find("SLO attainment"), std::string::npos);
}

TEST(FormatSweepTableTest, OneLinePerRateAndGoodput) {
  BenchReport report = SweepReport();
  std::string table = FormatSweepTable(report);
  EXPECT_NE(table.find("TTFT p50"), std::string::npos) << table;
  EXPECT_NE(table.find("\n      2.00     20      1 "), std::string::npos) << table;
  EXPECT_NE(table.find("\n      4.00     20      1 "), std::string::npos) << table;
  EXPECT_NE(table.find("\n       inf     20      1 "), std::string::npos) << table;
  EXPECT_NE(table.find("95.2%"), std::string::npos) << table;  // 20 of 21 at rate 2
  EXPECT_NE(table.find("Goodput: 2 req/s"), std::string::npos) << table;
  EXPECT_EQ(Count(table, "\n"), 2 + 3 + 1);

  report.goodput = {};
  EXPECT_NE(FormatSweepTable(report).find("none of the swept rates"), std::string::npos);
  report.goodput = {.rate = 4, .monotonic = false};
  EXPECT_NE(FormatSweepTable(report).find("not monotonic"), std::string::npos);
  report.slo = {};
  EXPECT_NE(FormatSweepTable(report).find("no SLO limits"), std::string::npos);
}

}  // namespace
}  // namespace tandem::bench
