#include "common/metrics/prometheus_text.h"

#include <cstdlib>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"

namespace tandem {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == ':';
}

// Parses `{a="x",b="y"}` starting at text[*pos] == '{'; leaves *pos after the '}'.
bool ParseLabels(std::string_view text, size_t* pos, MetricLabels* labels) {
  size_t i = *pos + 1;
  while (true) {
    while (i < text.size() && (text[i] == ' ' || text[i] == ',')) ++i;
    if (i >= text.size()) return false;
    if (text[i] == '}') {
      *pos = i + 1;
      return true;
    }
    const size_t name_start = i;
    while (i < text.size() && IsNameChar(text[i])) ++i;
    std::string name(text.substr(name_start, i - name_start));
    if (name.empty() || i + 1 >= text.size() || text[i] != '=' || text[i + 1] != '"') return false;
    i += 2;
    std::string value;
    while (i < text.size() && text[i] != '"') {
      if (text[i] == '\\' && i + 1 < text.size()) {
        ++i;
        value.push_back(text[i] == 'n' ? '\n' : text[i]);
      } else {
        value.push_back(text[i]);
      }
      ++i;
    }
    if (i >= text.size()) return false;
    ++i;  // closing quote
    (*labels)[name] = std::move(value);
  }
}

bool ParseValue(std::string_view text, double* value) {
  std::string s(text);
  if (s.empty()) return false;
  char* end = nullptr;
  *value = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

bool ConsumePrefix(std::string_view* s, std::string_view prefix) {
  if (s->substr(0, prefix.size()) != prefix) return false;
  s->remove_prefix(prefix.size());
  return true;
}

bool Includes(const MetricLabels& labels, const MetricLabels& wanted) {
  for (const auto& [key, value] : wanted) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<PrometheusText> PrometheusText::Parse(std::string_view text) {
  PrometheusText parsed;
  int line_number = 0;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t newline = text.find('\n', begin);
    if (newline == std::string_view::npos) newline = text.size();
    std::string_view line = Trim(text.substr(begin, newline - begin));
    begin = newline + 1;
    ++line_number;
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::string_view rest = Trim(line.substr(1));
      const bool help = ConsumePrefix(&rest, "HELP ");
      const bool type = !help && ConsumePrefix(&rest, "TYPE ");
      if (!help && !type) continue;  // a comment
      const size_t space = rest.find(' ');
      std::string family(rest.substr(0, space));
      std::string body(space == std::string_view::npos ? "" : rest.substr(space + 1));
      (help ? parsed.helps_ : parsed.types_)[family] = std::move(body);
      continue;
    }
    MetricSample sample;
    size_t i = 0;
    while (i < line.size() && IsNameChar(line[i])) ++i;
    sample.name = std::string(line.substr(0, i));
    bool ok = !sample.name.empty();
    if (ok && i < line.size() && line[i] == '{') ok = ParseLabels(line, &i, &sample.labels);
    if (ok) {
      // The value, then an optional timestamp.
      std::string_view rest = Trim(line.substr(i));
      const size_t space = rest.find(' ');
      ok = ParseValue(rest.substr(0, space), &sample.value);
    }
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("metrics text line ", line_number,
                                                     " does not parse: '", std::string(line), "'"));
    }
    parsed.samples_.push_back(std::move(sample));
  }
  return parsed;
}

std::optional<double> PrometheusText::Value(std::string_view name,
                                            const MetricLabels& labels) const {
  for (const MetricSample& s : samples_) {
    if (s.name == name && s.labels == labels) return s.value;
  }
  return std::nullopt;
}

double PrometheusText::Sum(std::string_view name, const MetricLabels& labels) const {
  double total = 0;
  for (const MetricSample& s : samples_) {
    if (s.name == name && Includes(s.labels, labels)) total += s.value;
  }
  return total;
}

bool PrometheusText::Has(std::string_view name) const {
  for (const MetricSample& s : samples_) {
    if (s.name == name) return true;
  }
  return false;
}

std::string PrometheusText::Type(std::string_view family) const {
  auto it = types_.find(family);
  return it == types_.end() ? "" : it->second;
}

std::string PrometheusText::Help(std::string_view family) const {
  auto it = helps_.find(family);
  return it == helps_.end() ? "" : it->second;
}

std::string MetricsText(const std::vector<const prometheus::Collectable*>& collectables) {
  std::vector<prometheus::MetricFamily> families;
  for (const prometheus::Collectable* c : collectables) {
    std::vector<prometheus::MetricFamily> more = c->Collect();
    families.insert(families.end(), std::make_move_iterator(more.begin()),
                    std::make_move_iterator(more.end()));
  }
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

}  // namespace tandem
