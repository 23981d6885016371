#include "common/util/cli_flags.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <utility>

namespace tandem {
namespace {

constexpr size_t kHelpWidth = 100;     // columns the generated --help fills
constexpr size_t kFlagIndent = 2;      // "  --name VALUE"
constexpr size_t kMaxLabelWidth = 28;  // a longer "--name VALUE" puts its help on the next line

// Appends `text` wrapped to kHelpWidth, every line starting at column `column`; the first line
// continues `out`'s last line, which already reaches `column`. A '\n' in `text` starts a new line;
// one that starts with spaces is a table row, indented by them and kept as written.
void AppendWrapped(std::string_view text, size_t column, std::string* out) {
  bool first_line = true;
  auto new_line = [&](size_t indent) {
    if (!first_line) out->append("\n").append(column + indent, ' ');
    first_line = false;
  };
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    const size_t indent = std::min(line.find_first_not_of(' '), line.size());
    new_line(indent);
    if (indent > 0) {  // a table row: kept as written
      out->append(line.substr(indent));
      start = end + 1;
      continue;
    }
    size_t used = column;
    bool line_empty = true;
    for (size_t pos = 0; pos < line.size();) {
      const size_t word_end = std::min(line.find(' ', pos), line.size());
      std::string_view word = line.substr(pos, word_end - pos);
      pos = std::min(line.find_first_not_of(' ', word_end), line.size());
      if (word.empty()) continue;
      if (!line_empty && used + 1 + word.size() > kHelpWidth) {
        out->append("\n").append(column, ' ');
        used = column;
        line_empty = true;
      }
      if (!line_empty) {
        out->push_back(' ');
        ++used;
      }
      out->append(word);
      used += word.size();
      line_empty = false;
    }
    start = end + 1;
  }
}

// Levenshtein distance, for suggesting the flag a typo meant.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

bool ParseFlagDouble(std::string_view text, double* out) {
  std::string s(text);
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || !std::isfinite(d)) return false;
  *out = d;
  return true;
}

void FlagSet::Section(std::string title) {
  if (std::find(sections_.begin(), sections_.end(), title) == sections_.end()) {
    sections_.push_back(title);
  }
  current_section_ = std::move(title);
}

void FlagSet::Switch(const std::string& name, bool* dst, std::string help, bool value) {
  switches_[name] = [dst, value] { *dst = value; };
  List(name, "", std::move(help));
}

void FlagSet::String(const std::string& name, std::string* dst, FlagDoc doc) {
  Custom(name, std::move(doc), [dst](std::string_view value) {
    *dst = std::string(value);
    return std::string();
  });
}

void FlagSet::String(const std::string& name, std::optional<std::string>* dst, FlagDoc doc) {
  Custom(name, std::move(doc), [dst](std::string_view value) {
    *dst = std::string(value);
    return std::string();
  });
}

void FlagSet::Custom(const std::string& name, FlagDoc doc, ValueParser parse) {
  valued_[name] = std::move(parse);
  List(name, std::move(doc.value_name), std::move(doc.help));
}

void FlagSet::List(const std::string& name, std::string value_name, std::string help) {
  Listing listing{name, std::move(value_name), std::move(help), current_section_};
  auto same = std::find_if(listings_.begin(), listings_.end(),
                           [&](const Listing& l) { return l.name == name; });
  if (same != listings_.end()) {
    *same = std::move(listing);
  } else {
    listings_.push_back(std::move(listing));
  }
}

std::string FlagSet::Suggest(std::string_view name) const {
  std::string best;
  size_t best_distance = 3;  // suggest only flags at most two edits away
  for (const Listing& l : listings_) {
    const size_t d = EditDistance(name, l.name);
    if (d < best_distance && 2 * d < l.name.size()) {
      best = l.name;
      best_distance = d;
    }
  }
  return best;
}

std::string FlagSet::Parse(int argc, const char* const* argv, bool* help) const {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      *help = true;
      return "";
    }
    if (arg.substr(0, 2) != "--" || arg.size() == 2) {
      return "unexpected argument '" + std::string(arg) + "'";
    }
    std::string name(arg.substr(2));
    std::optional<std::string> value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    if (auto sw = switches_.find(name); sw != switches_.end()) {
      if (value.has_value()) return "--" + name + " takes no value";
      sw->second();
      continue;
    }
    auto flag = valued_.find(name);
    if (flag == valued_.end()) {
      const std::string suggestion = Suggest(name);
      if (suggestion.empty()) return "unknown flag --" + name + " (see --help)";
      return "unknown flag --" + name + " (did you mean --" + suggestion + "? see --help)";
    }
    if (!value.has_value()) {
      if (i + 1 >= argc) return "--" + name + " needs a value";
      value = argv[++i];
    }
    std::string problem = flag->second(*value);
    if (!problem.empty()) return "--" + name + " " + problem + ", got '" + *value + "'";
  }
  return "";
}

std::string FlagSet::Help(std::string_view intro, std::string_view outro) const {
  auto label_of = [](const Listing& l) {
    return "--" + l.name + (l.value_name.empty() ? "" : " " + l.value_name);
  };
  size_t label_width = std::string_view("--help").size();
  for (const Listing& l : listings_) {
    const size_t width = label_of(l).size();
    if (width <= kMaxLabelWidth) label_width = std::max(label_width, width);
  }
  const size_t column = kFlagIndent + label_width + 2;
  std::string out(intro);
  out.append("\n");
  auto append_flag = [&](const std::string& label, std::string_view help) {
    out.append(kFlagIndent, ' ').append(label);
    if (label.size() > label_width) {
      out.append("\n").append(column, ' ');
    } else {
      out.append(column - kFlagIndent - label.size(), ' ');
    }
    AppendWrapped(help, column, &out);
    out.append("\n");
  };
  std::vector<std::string> sections = {""};
  sections.insert(sections.end(), sections_.begin(), sections_.end());
  for (const std::string& section : sections) {
    bool titled = section.empty();
    for (const Listing& l : listings_) {
      if (l.section != section) continue;
      if (!titled) out.append(section).append(":\n");
      titled = true;
      append_flag(label_of(l), l.help);
    }
  }
  append_flag("--help", "this text");
  out.append(outro);
  return out;
}

}  // namespace tandem
