#include "bench/migration/migration_records.h"

#include <algorithm>
#include <fstream>
#include <string_view>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace tandem::migration_bench {
namespace {

// The word before `at` in `line`: the request id of "... [info] ID: ...".
std::string IdBefore(const std::string& line, size_t at) {
  const size_t space = line.rfind(' ', at);
  const size_t start = space == std::string::npos ? 0 : space + 1;
  return line.substr(start, at - start);
}

// The text between the first '(' and the last ')' of `s`, or "".
std::string InParens(std::string_view s) {
  const size_t open = s.find('('), close = s.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close <= open) return "";
  return std::string(s.substr(open + 1, close - open - 1));
}

// "N" of "... after N tokens ...", or 0.
int TokensAfter(std::string_view s) {
  constexpr std::string_view kAfter = " after ";
  const size_t at = s.find(kAfter);
  if (at == std::string_view::npos) return 0;
  std::vector<std::string> words = absl::StrSplit(std::string(s.substr(at + kAfter.size())), ' ');
  int n = 0;
  if (!words.empty()) (void)absl::SimpleAtoi(words[0], &n);
  return n;
}

}  // namespace

int CountMoves(const RouterRecord& r, MoveKind kind) {
  return static_cast<int>(std::count_if(r.moves.begin(), r.moves.end(),
                                        [kind](const Move& m) { return m.kind == kind; }));
}

std::map<std::string, RouterRecord> ParseRouterLog(const std::string& path) {
  std::map<std::string, RouterRecord> out;
  std::ifstream in(path);
  std::string line;
  constexpr std::string_view kFailed = ": decode side failed after ";
  constexpr std::string_view kMoved = ": moved with its KV from ";
  constexpr std::string_view kDropped = ": live KV move from ";
  for (int n = 0; n < 10'000'000 && std::getline(in, line); ++n) {
    if (size_t at = line.find(kFailed);
        at != std::string::npos && line.find("migrating", at) != std::string::npos) {
      Move m;
      m.kind = MoveKind::kRecompute;
      const std::string_view rest = std::string_view(line).substr(at + 1);
      m.tokens_before = TokensAfter(rest);
      // "(REASON), migrating": the reason is the first parenthesis.
      const size_t open = rest.find('('), close = rest.find(')');
      if (open != std::string_view::npos && close != std::string_view::npos && close > open) {
        m.reason = std::string(rest.substr(open + 1, close - open - 1));
      }
      out[IdBefore(line, at)].moves.push_back(std::move(m));
    } else if (size_t at = line.find(kMoved); at != std::string::npos) {
      Move m;
      m.kind = MoveKind::kLive;
      const std::string_view rest = std::string_view(line).substr(at + kMoved.size());
      m.tokens_before = TokensAfter(rest);
      std::vector<std::string> words = absl::StrSplit(std::string(rest), ' ');  // A to B after
      if (words.size() >= 3) {
        m.from = std::string(words[0]);
        m.to = std::string(words[2]);
      }
      std::string pause = InParens(rest);  // "12.3ms pause"
      if (const size_t sp = pause.find(' '); sp != std::string::npos) pause.resize(sp);
      absl::Duration d;
      if (absl::ParseDuration(pause, &d)) m.router_pause_ms = absl::ToDoubleMilliseconds(d);
      out[IdBefore(line, at)].moves.push_back(std::move(m));
    } else if (size_t at = line.find(kDropped);
               at != std::string::npos && line.find(" dropped", at) != std::string::npos) {
      ++out[IdBefore(line, at)].live_moves_dropped;
    }
  }
  return out;
}

std::vector<int> Prompt(int n, int salt) {
  std::vector<int> ids;
  for (int64_t i = 0; i < n; ++i) {
    ids.push_back(static_cast<int>(1000 + (i * 7919 + int64_t{salt} * 104729) % 20000));
  }
  return ids;
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

// The gap (ms) before token `n` (0-based), the first one from the node a move went to; -1 if the
// stream has no such token.
double GapBefore(const StreamRecord& r, int n) {
  if (n < 1 || static_cast<size_t>(n) >= r.token_times.size()) return -1;
  return Ms(r.token_times[n] - r.token_times[n - 1]);
}

// The stream's inter-token gaps (ms), appended to *gaps; returns the largest (0 if none).
double Gaps(const StreamRecord& r, std::vector<double>* gaps) {
  double max_gap = 0;
  for (size_t i = 1; i < r.token_times.size(); ++i) {
    const double gap = Ms(r.token_times[i] - r.token_times[i - 1]);
    gaps->push_back(gap);
    max_gap = std::max(max_gap, gap);
  }
  return max_gap;
}

}  // namespace tandem::migration_bench
