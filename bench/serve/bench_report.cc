#include "bench/serve/bench_report.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace tandem::bench {
namespace {

using json = nlohmann::json;

std::string Printf(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Printf(const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  int n = std::vsnprintf(buf, sizeof(buf), format, args);
  va_end(args);
  if (n < 0) return "";
  if (n < static_cast<int>(sizeof(buf))) return std::string(buf, n);
  std::string big(n + 1, '\0');
  va_start(args, format);
  std::vsnprintf(big.data(), big.size(), format, args);
  va_end(args);
  big.resize(n);
  return big;
}

// "12", "0.5", "2.25": a number as short as its value allows (two decimals at most).
std::string ShortNumber(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::abs(v - std::round(v)) < 1e-9 && std::abs(v) < 1e15) return Printf("%.0f", v);
  std::string s = Printf("%.2f", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

std::string RateLabel(double rate) {
  return std::isinf(rate) ? "inf (all at once)" : ShortNumber(rate) + " req/s";
}

bool HasSlo(const SloLimits& slo) { return slo.ttft_s.has_value() || slo.tpot_s.has_value(); }

// "TTFT <= 200 ms, TPOT <= 50 ms"; empty without limits.
std::string SloText(const SloLimits& slo) {
  std::string text;
  if (slo.ttft_s) text = "TTFT <= " + ShortNumber(*slo.ttft_s * 1e3) + " ms";
  if (slo.tpot_s) {
    if (!text.empty()) text += ", ";
    text += "TPOT <= " + ShortNumber(*slo.tpot_s * 1e3) + " ms";
  }
  return text;
}

// ---- Tables ----------------------------------------------------------------------------------

constexpr int kTableWidth = 50;

// "====== text ======" padded to the table width (vLLM's "{:=^50}").
std::string Centered(const std::string& text, char fill) {
  int pad = std::max(0, kTableWidth - static_cast<int>(text.size()));
  return std::string(pad / 2, fill) + text + std::string(pad - pad / 2, fill) + "\n";
}

void Row(std::string* out, const std::string& label, const std::string& value) {
  *out += Printf("%-40s %s\n", (label + ":").c_str(), value.c_str());
}

void DistributionRows(std::string* out, const char* name, const Distribution& d) {
  Row(out, Printf("Mean %s (ms)", name), Printf("%.2f", d.mean * 1e3));
  Row(out, Printf("Median %s (ms)", name), Printf("%.2f", d.median * 1e3));
  Row(out, Printf("P90 %s (ms)", name), Printf("%.2f", d.p90 * 1e3));
  Row(out, Printf("P99 %s (ms)", name), Printf("%.2f", d.p99 * 1e3));
}

// ---- JSON ------------------------------------------------------------------------------------

// JSON has no infinity: infinite rates are the string "inf".
json NumberJson(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (std::isnan(v)) return nullptr;
  return v;
}

json OptionalJson(const std::optional<double>& v) { return v ? NumberJson(*v) : json(nullptr); }

json DistributionJson(const Distribution& d) {
  return {{"count", d.count}, {"mean", d.mean}, {"median", d.median}, {"p90", d.p90},
          {"p99", d.p99},     {"min", d.min},   {"max", d.max}};
}

json SummaryJson(const RunSummary& s) {
  return {{"offered_rate", NumberJson(s.offered_rate)},
          {"duration_s", s.duration_s},
          {"num_requests", s.num_requests},
          {"completed", s.completed},
          {"failed", s.failed},
          {"input_tokens", s.input_tokens},
          {"output_tokens", s.output_tokens},
          {"request_throughput", s.request_throughput},
          {"input_throughput", s.input_throughput},
          {"output_throughput", s.output_throughput},
          {"ttft_s", DistributionJson(s.ttft_s)},
          {"tpot_s", DistributionJson(s.tpot_s)},
          {"itl_s", DistributionJson(s.itl_s)},
          {"e2e_s", DistributionJson(s.e2e_s)},
          {"slo_attainment", s.slo_attainment},
          {"good_request_rate", s.good_request_rate}};
}

json RequestJson(const RequestResult& r) {
  json j = {{"success", r.success},
            {"error", r.error},
            {"http_status", r.http_status},
            {"start_s", r.start_s},
            {"ttft_s", r.ttft_s},
            {"tpot_s", OptionalJson(Tpot(r))},
            {"e2e_s", r.e2e_s},
            {"prompt_tokens", r.prompt_tokens},
            {"output_tokens", r.output_tokens}};
  if (!r.prefill_node.empty()) j["prefill_node"] = r.prefill_node;
  if (!r.decode_node.empty()) j["decode_node"] = r.decode_node;
  return j;
}

// ---- SVG -------------------------------------------------------------------------------------

std::string EscapeXml(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        // Control characters other than tab/newline are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') {
          out += ' ';
        } else {
          out += c;
        }
    }
  }
  return out;
}

// Distinct, colour-blind-friendly-ish line colours, reused in order for more runs.
constexpr const char* kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
const char* Colour(size_t run) { return kColours[run % (sizeof(kColours) / sizeof(kColours[0]))]; }

constexpr double kPanelW = 480, kPanelH = 320, kGap = 20;
constexpr double kPlotLeft = 64, kPlotRight = 18, kPlotTop = 44, kPlotBottom = 46;
constexpr double kTitleH = 46, kLegendItemW = 170, kLegendRowH = 20;
constexpr int kColumns = 2;
constexpr size_t kMaxCdfSteps = 400;
// Red label text with a white outline, readable over grid lines and curves.
constexpr const char* kHalo =
    " fill=\"#c00000\" stroke=\"#ffffff\" stroke-width=\"3\" paint-order=\"stroke\"";

// An axis from `lo` to `hi` with "nice" ticks (1, 2 or 5 times a power of ten).
struct Axis {
  double lo = 0, hi = 1, step = 0.25;
  std::vector<double> ticks;
};

Axis NiceAxis(double lo, double hi, int target_ticks = 5) {
  Axis a;
  if (!(hi > lo)) hi = lo + 1;
  double rough = (hi - lo) / target_ticks;
  double mag = std::pow(10, std::floor(std::log10(rough)));
  double norm = rough / mag;
  a.step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
  a.lo = std::floor(lo / a.step + 1e-9) * a.step;
  a.hi = std::ceil(hi / a.step - 1e-9) * a.step;
  for (double t = a.lo; t <= a.hi + a.step * 1e-6; t += a.step) {
    a.ticks.push_back(std::abs(t) < a.step * 1e-9 ? 0 : t);
  }
  return a;
}

std::string TickLabel(double v, double step) {
  int decimals = std::clamp(static_cast<int>(-std::floor(std::log10(step) + 1e-9)), 0, 6);
  return Printf("%.*f", decimals, v);
}

// One panel's plotting rectangle and the data → pixel maps.
struct Frame {
  double x0, y0, w, h;  // plot area in SVG pixels
  Axis x, y;
  double X(double v) const { return x0 + (v - x.lo) / (x.hi - x.lo) * w; }
  double Y(double v) const { return y0 + h - (v - y.lo) / (y.hi - y.lo) * h; }
};

class SvgWriter {
 public:
  std::string& out() { return out_; }

  void Text(double x, double y, const std::string& text, const char* anchor = "start",
            const char* extra = "") {
    out_ += Printf("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s>", x, y, anchor, extra) +
            EscapeXml(text) + "</text>\n";
  }

  void Line(double x1, double y1, double x2, double y2, const char* stroke, double width,
            const char* dash = nullptr) {
    out_ += Printf(
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
        "stroke-width=\"%.1f\"",
        x1, y1, x2, y2, stroke, width);
    if (dash != nullptr) out_ += Printf(" stroke-dasharray=\"%s\"", dash);
    out_ += "/>\n";
  }

  // The panel box, title, grid, ticks and axis labels; returns the clip-path id for its data.
  std::string Panel(const Frame& f, double px, double py, const std::string& title,
                    const std::string& subtitle, const std::string& x_label,
                    const std::string& y_label, bool y_percent) {
    int id = ++panels_;
    out_ += Printf("<g id=\"panel%d\">\n", id);
    out_ += Printf(
        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#ffffff\" "
        "stroke=\"#d0d0d0\" rx=\"4\"/>\n",
        px, py, kPanelW, kPanelH);
    Text(px + kPanelW / 2, py + 18, title, "middle", " font-size=\"14\" font-weight=\"bold\"");
    if (!subtitle.empty()) Text(px + kPanelW / 2, py + 34, subtitle, "middle", " fill=\"#555\"");
    for (double t : f.x.ticks) {
      double x = f.X(t);
      Line(x, f.y0, x, f.y0 + f.h, "#ececec", 1);
      Line(x, f.y0 + f.h, x, f.y0 + f.h + 4, "#333", 1);
      Text(x, f.y0 + f.h + 16, TickLabel(t, f.x.step), "middle");
    }
    for (double t : f.y.ticks) {
      double y = f.Y(t);
      Line(f.x0, y, f.x0 + f.w, y, "#ececec", 1);
      Line(f.x0 - 4, y, f.x0, y, "#333", 1);
      std::string label = y_percent ? Printf("%.0f%%", t * 100) : TickLabel(t, f.y.step);
      Text(f.x0 - 7, y + 4, label, "end");
    }
    out_ += Printf(
        "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
        "stroke=\"#333\"/>\n",
        f.x0, f.y0, f.w, f.h);
    Text(f.x0 + f.w / 2, f.y0 + f.h + 34, x_label, "middle");
    double ly = f.y0 + f.h / 2;
    Text(px + 16, ly, y_label, "middle",
         Printf(" transform=\"rotate(-90 %.1f %.1f)\"", px + 16, ly).c_str());
    std::string clip = Printf("clip%d", id);
    out_ += Printf(
        "<clipPath id=\"%s\"><rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>"
        "</clipPath>\n",
        clip.c_str(), f.x0 - 1, f.y0 - 1, f.w + 2, f.h + 2);
    return clip;
  }

  void EndPanel() { out_ += "</g>\n"; }

  void Polyline(const std::vector<std::pair<double, double>>& points, const char* stroke,
                double width, const std::string& clip) {
    if (points.empty()) return;
    out_ += Printf(
        "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" "
        "stroke-linejoin=\"round\" clip-path=\"url(#%s)\" points=\"",
        stroke, width, clip.c_str());
    for (size_t i = 0; i < points.size(); ++i) {
      if (i > 0) out_ += ' ';
      out_ += Printf("%.1f,%.1f", points[i].first, points[i].second);
    }
    out_ += "\"/>\n";
  }

 private:
  std::string out_;
  int panels_ = 0;
};

Frame MakeFrame(double px, double py, Axis x, Axis y) {
  return Frame{px + kPlotLeft,
               py + kPlotTop,
               kPanelW - kPlotLeft - kPlotRight,
               kPanelH - kPlotTop - kPlotBottom,
               std::move(x),
               std::move(y)};
}

enum class Metric { kTtft, kTpot, kItl, kE2e };

// The values (seconds) a CDF panel plots for one run: successful requests only.
std::vector<double> MetricValues(const RunRecord& run, Metric m) {
  std::vector<double> v;
  for (const RequestResult& r : run.results) {
    if (!r.success) continue;
    switch (m) {
      case Metric::kTtft:
        v.push_back(r.ttft_s);
        break;
      case Metric::kTpot:
        if (std::optional<double> t = Tpot(r)) v.push_back(*t);
        break;
      case Metric::kItl:
        v.insert(v.end(), r.itl_s.begin(), r.itl_s.end());
        break;
      case Metric::kE2e:
        v.push_back(r.e2e_s);
        break;
    }
  }
  std::sort(v.begin(), v.end());
  return v;
}

// The empirical CDF as a step line, at most kMaxCdfSteps steps, cut at the axis end.
std::vector<std::pair<double, double>> CdfPoints(const std::vector<double>& sorted, double scale,
                                                 const Frame& f) {
  std::vector<std::pair<double, double>> pts;
  size_t n = sorted.size();
  if (n == 0) return pts;
  size_t steps = std::min(n, kMaxCdfSteps);
  pts.emplace_back(f.X(sorted[0] * scale), f.Y(0));
  for (size_t k = 0; k < steps; ++k) {
    size_t i = steps == n ? k : (k + 1) * n / steps - 1;  // last index of the k-th chunk
    double x = sorted[i] * scale;
    double y_before = pts.back().second;
    if (x > f.x.hi) {
      pts.emplace_back(f.X(f.x.hi), y_before);
      return pts;
    }
    pts.emplace_back(f.X(x), y_before);
    pts.emplace_back(f.X(x), f.Y(static_cast<double>(i + 1) / static_cast<double>(n)));
  }
  return pts;
}

void CdfPanel(SvgWriter& svg, const BenchReport& report, Metric m, double px, double py) {
  static constexpr const char* kTitles[] = {
      "TTFT: time to first token", "TPOT: time per output token (excl. 1st)",
      "ITL: gap between streamed chunks", "E2EL: end-to-end latency"};
  std::optional<double> slo;
  if (m == Metric::kTtft) slo = report.slo.ttft_s;
  if (m == Metric::kTpot) slo = report.slo.tpot_s;

  std::vector<std::vector<double>> runs;
  double p99_max = 0, max_all = 0;
  bool any = false;
  for (const RunRecord& run : report.runs) {
    runs.push_back(MetricValues(run, m));
    if (runs.back().empty()) continue;
    any = true;
    p99_max = std::max(p99_max, Percentile(runs.back(), 99));
    max_all = std::max(max_all, runs.back().back());
  }
  // Long tails would squash the curves against the left edge: cut the axis at the largest p99
  // when the maxima go well beyond it.
  double x_end = max_all <= 1.5 * p99_max ? max_all : p99_max;
  bool cut = x_end < max_all;
  if (slo) x_end = std::max(x_end, *slo * 1.1);
  bool seconds = x_end >= 10.0;  // 10 s and beyond read better in seconds
  double scale = seconds ? 1.0 : 1e3;
  Frame f = MakeFrame(px, py, NiceAxis(0, x_end > 0 ? x_end * scale : 1), NiceAxis(0, 1, 4));
  f.y.ticks = {0, 0.25, 0.5, 0.75, 1};
  std::string subtitle = "CDF over successful requests";
  if (m == Metric::kItl) subtitle = "CDF over all gaps of successful requests";
  if (cut) subtitle += "; axis cut at the largest p99";
  std::string clip = svg.Panel(
      f, px, py, kTitles[static_cast<int>(m)], subtitle, seconds ? "seconds" : "milliseconds",
      m == Metric::kItl ? "fraction of gaps" : "fraction of requests", true);
  if (!any) {
    svg.Text(f.x0 + f.w / 2, f.y0 + f.h / 2, "no data", "middle", " fill=\"#888\"");
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    svg.Polyline(CdfPoints(runs[i], scale, f), Colour(i), 2, clip);
  }
  // The limit goes on top of the curves, its label at the foot of the line.
  if (slo) {
    double x = f.X(*slo * scale);
    svg.Line(x, f.y0, x, f.y0 + f.h, "#c00000", 1.5, "6,4");
    bool right = x < f.x0 + f.w * 0.7;
    svg.Text(right ? x + 5 : x - 5, f.y0 + f.h - 8, "SLO " + ShortNumber(*slo * 1e3) + " ms",
             right ? "start" : "end", kHalo);
  }
  svg.EndPanel();
}

void AttainmentPanel(SvgWriter& svg, const BenchReport& report, double px, double py) {
  std::vector<std::pair<double, size_t>> points;  // (rate, run index), finite rates only
  bool skipped_inf = false;
  double max_rate = 0;
  for (size_t i = 0; i < report.runs.size(); ++i) {
    double rate = report.runs[i].rate;
    if (!std::isfinite(rate)) {
      skipped_inf = true;
      continue;
    }
    points.emplace_back(rate, i);
    max_rate = std::max(max_rate, rate);
  }
  std::sort(points.begin(), points.end());
  double threshold = report.goodput.threshold;
  Frame f = MakeFrame(px, py, NiceAxis(0, max_rate > 0 ? max_rate * 1.05 : 1), NiceAxis(0, 1, 4));
  f.y.ticks = {0, 0.25, 0.5, 0.75, 1};
  std::string subtitle =
      HasSlo(report.slo) ? SloText(report.slo) : "no SLO limits: the fraction that succeeded";
  if (skipped_inf) subtitle += "; inf-rate run not shown";
  std::string clip = svg.Panel(f, px, py, "SLO attainment vs request rate", subtitle,
                               "offered request rate (req/s)", "requests within SLO", true);
  double ty = f.Y(threshold);
  svg.Line(f.x0, ty, f.x0 + f.w, ty, "#c00000", 1.5, "6,4");
  svg.Text(f.x0 + f.w - 4, ty - 5, Printf("%.0f%%", threshold * 100), "end", kHalo);

  std::vector<std::pair<double, double>> line;
  for (const auto& [rate, run] : points) {
    line.emplace_back(f.X(rate), f.Y(report.runs[run].summary.slo_attainment));
  }
  svg.Polyline(line, "#333333", 1.5, clip);
  for (size_t k = 0; k < points.size(); ++k) {
    svg.out() += Printf("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4.5\" fill=\"%s\" stroke=\"#333\"/>\n",
                        line[k].first, line[k].second, Colour(points[k].second));
  }

  const Goodput& g = report.goodput;
  std::string note;
  double note_x = f.x0 + 6;
  const char* anchor = "start";
  if (!g.rate) {
    note = Printf("no swept rate met %.0f%%", threshold * 100);
  } else if (std::isinf(*g.rate)) {
    note = "goodput: inf (all at once met the SLO)";
  } else {
    // A vertical line at the goodput rate and a ring around its point.
    double gx = f.X(*g.rate);
    svg.Line(gx, f.y0, gx, f.y0 + f.h, "#2a7d2a", 1.5, "3,3");
    for (const auto& [rate, run] : points) {
      if (rate != *g.rate) continue;
      svg.out() += Printf(
          "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"9\" fill=\"none\" stroke=\"#2a7d2a\" "
          "stroke-width=\"2\"/>\n",
          gx, f.Y(report.runs[run].summary.slo_attainment));
    }
    note = "goodput " + ShortNumber(*g.rate) + " req/s";
    bool right = gx < f.x0 + f.w * 0.6;
    note_x = right ? gx + 6 : gx - 6;
    anchor = right ? "start" : "end";
  }
  if (g.rate && !g.monotonic) note += " (not monotonic: noisy runs?)";
  svg.Text(note_x, f.y0 + f.h - 8, note, anchor,
           " fill=\"#2a7d2a\" font-weight=\"bold\" stroke=\"#ffffff\" stroke-width=\"3\" "
           "paint-order=\"stroke\"");
  svg.EndPanel();
}

}  // namespace

std::string FormatRunTable(const RunSummary& s, const SloLimits& slo) {
  std::string out = Centered(" Serving Benchmark Result ", '=');
  Row(&out, "Request rate (req/s)",
      std::isinf(s.offered_rate) ? "inf" : Printf("%.2f", s.offered_rate));
  Row(&out, "Successful requests", Printf("%d", s.completed));
  Row(&out, "Failed requests", Printf("%d", s.failed));
  Row(&out, "Benchmark duration (s)", Printf("%.2f", s.duration_s));
  Row(&out, "Total input tokens", Printf("%lld", static_cast<long long>(s.input_tokens)));
  Row(&out, "Total generated tokens", Printf("%lld", static_cast<long long>(s.output_tokens)));
  Row(&out, "Request throughput (req/s)", Printf("%.2f", s.request_throughput));
  Row(&out, "Output token throughput (tok/s)", Printf("%.2f", s.output_throughput));
  Row(&out, "Total token throughput (tok/s)",
      Printf("%.2f", s.input_throughput + s.output_throughput));
  out += Centered("Time to First Token", '-');
  DistributionRows(&out, "TTFT", s.ttft_s);
  out += Centered("Time per Output Token (excl. 1st token)", '-');
  DistributionRows(&out, "TPOT", s.tpot_s);
  out += Centered("Inter-token Latency", '-');
  DistributionRows(&out, "ITL", s.itl_s);
  out += Centered("End-to-end Latency", '-');
  DistributionRows(&out, "E2EL", s.e2e_s);
  if (HasSlo(slo)) {
    out += Centered("Service Level Objective", '-');
    if (slo.ttft_s) Row(&out, "TTFT limit (ms)", Printf("%.2f", *slo.ttft_s * 1e3));
    if (slo.tpot_s) Row(&out, "TPOT limit (ms)", Printf("%.2f", *slo.tpot_s * 1e3));
    Row(&out, "SLO attainment (%)", Printf("%.2f", s.slo_attainment * 100));
    Row(&out, "Request goodput (req/s)", Printf("%.2f", s.good_request_rate));
  }
  out += std::string(kTableWidth, '=') + "\n";
  return out;
}

std::string FormatSweepTable(const BenchReport& report) {
  bool slo = HasSlo(report.slo);
  std::string out = "Rate sweep (latencies in ms)\n";
  out += Printf("%10s %6s %6s %8s %9s %9s %9s %9s %8s\n", "rate", "done", "failed", "req/s",
                "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "SLO met");
  for (const RunRecord& run : report.runs) {
    const RunSummary& s = run.summary;
    std::string rate = std::isinf(run.rate) ? "inf" : Printf("%.2f", run.rate);
    std::string met = slo ? Printf("%.1f%%", s.slo_attainment * 100) : "-";
    out += Printf("%10s %6d %6d %8.2f %9.2f %9.2f %9.2f %9.2f %8s\n", rate.c_str(), s.completed,
                  s.failed, s.request_throughput, s.ttft_s.median * 1e3, s.ttft_s.p99 * 1e3,
                  s.tpot_s.median * 1e3, s.tpot_s.p99 * 1e3, met.c_str());
  }
  const Goodput& g = report.goodput;
  if (!slo) {
    out += "Goodput: no SLO limits given\n";
  } else if (!g.rate) {
    out += Printf("Goodput: none of the swept rates had >= %.0f%% of requests within %s\n",
                  g.threshold * 100, SloText(report.slo).c_str());
  } else {
    out += Printf("Goodput: %s (highest rate with >= %.0f%% of requests within %s)%s\n",
                  std::isinf(*g.rate) ? "inf" : (ShortNumber(*g.rate) + " req/s").c_str(),
                  g.threshold * 100, SloText(report.slo).c_str(),
                  g.monotonic ? "" : "; not monotonic: a lower rate missed it (noisy runs?)");
  }
  return out;
}

json ReportToJson(const BenchReport& report, bool include_requests) {
  json runs = json::array();
  for (const RunRecord& run : report.runs) {
    json r = {{"rate", NumberJson(run.rate)}, {"summary", SummaryJson(run.summary)}};
    if (run.started_unix_s > 0) r["started_unix_s"] = run.started_unix_s;
    if (include_requests) {
      json requests = json::array();
      for (const RequestResult& result : run.results) requests.push_back(RequestJson(result));
      r["requests"] = std::move(requests);
    }
    runs.push_back(std::move(r));
  }
  return {
      {"config", report.config},
      {"slo",
       {{"ttft_s", OptionalJson(report.slo.ttft_s)}, {"tpot_s", OptionalJson(report.slo.tpot_s)}}},
      {"runs", std::move(runs)},
      {"goodput",
       {{"rate", OptionalJson(report.goodput.rate)},
        {"monotonic", report.goodput.monotonic},
        {"threshold", report.goodput.threshold}}}};
}

std::string RenderSvg(const BenchReport& report, const std::string& title) {
  const bool sweep = report.runs.size() > 1;
  const int panels = sweep ? 5 : 4;
  const int rows = (panels + kColumns - 1) / kColumns;
  const double width = kColumns * kPanelW + (kColumns + 1) * kGap;
  const int per_row = std::max(1, static_cast<int>((width - 2 * kGap) / kLegendItemW));
  const int legend_rows =
      std::max<int>(1, (static_cast<int>(report.runs.size()) + per_row - 1) / per_row);
  const double legend_top = kTitleH;
  const double panels_top = legend_top + legend_rows * kLegendRowH + 10;
  const double height = panels_top + rows * (kPanelH + kGap) + kGap;

  SvgWriter svg;
  svg.out() += Printf(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "viewBox=\"0 0 %.0f %.0f\" font-family=\"Helvetica, Arial, sans-serif\" "
      "font-size=\"12\">\n",
      width, height, width, height);
  svg.out() += "<rect width=\"100%\" height=\"100%\" fill=\"#f7f7f7\"/>\n";
  svg.Text(width / 2, 28, title, "middle", " font-size=\"18\" font-weight=\"bold\"");

  // Legend: one entry per run, in sweep order.
  for (size_t i = 0; i < report.runs.size(); ++i) {
    double x = kGap + static_cast<double>(i % per_row) * kLegendItemW;
    double y = legend_top + static_cast<double>(i / per_row) * kLegendRowH + 10;
    svg.Line(x, y, x + 24, y, Colour(i), 3);
    svg.Text(x + 30, y + 4, RateLabel(report.runs[i].rate));
  }
  if (report.runs.empty()) svg.Text(kGap, legend_top + 14, "no runs", "start", " fill=\"#888\"");

  const Metric metrics[] = {Metric::kTtft, Metric::kTpot, Metric::kItl, Metric::kE2e};
  for (int p = 0; p < panels; ++p) {
    double px = kGap + (p % kColumns) * (kPanelW + kGap);
    double py = panels_top + (p / kColumns) * (kPanelH + kGap);
    if (p < 4) {
      CdfPanel(svg, report, metrics[p], px, py);
    } else {
      AttainmentPanel(svg, report, px, py);
    }
  }
  svg.out() += "</svg>\n";
  return std::move(svg.out());
}

}  // namespace tandem::bench
