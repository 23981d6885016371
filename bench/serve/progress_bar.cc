#include "bench/serve/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <utility>

namespace tandem::bench {
namespace {

constexpr absl::Duration kRedrawInterval = absl::Milliseconds(100);

int Decile(int done, int total) { return total > 0 ? std::min(done, total) * 10 / total : 10; }

}  // namespace

ProgressBar::ProgressBar(std::FILE* out, std::string label, int total)
    : out_(out),
      label_(std::move(label)),
      total_(total),
      terminal_(out != nullptr && isatty(fileno(out)) != 0),
      start_(absl::Now()) {}

std::string ProgressBar::Render(const std::string& label, int done, int total,
                                absl::Duration elapsed, int width) {
  width = std::max(width, 1);
  double fraction = total > 0 ? std::clamp(static_cast<double>(done) / total, 0.0, 1.0) : 1.0;
  int filled = static_cast<int>(fraction * width);
  std::string bar(filled, '=');
  if (filled < width) {
    bar += '>';
    bar.append(width - filled - 1, ' ');
  }
  char counts[96];
  std::snprintf(counts, sizeof(counts), "] %d/%d %d%% %.1f s", done, total,
                static_cast<int>(fraction * 100), absl::ToDoubleSeconds(elapsed));
  return (label.empty() ? "" : label + " ") + "[" + bar + counts;
}

void ProgressBar::Update(int done) {
  if (out_ == nullptr) return;
  absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  if (finished_) return;
  last_done_ = std::max(last_done_, done);
  if (terminal_) {
    if (now - last_draw_ < kRedrawInterval && last_done_ < total_) return;
    last_draw_ = now;
    std::fprintf(out_, "\r%s", Render(label_, last_done_, total_, now - start_).c_str());
  } else {
    int decile = Decile(last_done_, total_);
    if (decile == 0 || decile <= last_decile_) return;  // no line before 10%
    last_decile_ = decile;
    std::fprintf(out_, "%s\n", Render(label_, last_done_, total_, now - start_).c_str());
  }
  std::fflush(out_);
}

void ProgressBar::Finish() {
  if (out_ == nullptr) return;
  absl::MutexLock lock(&mu_);
  if (finished_) return;
  finished_ = true;
  std::string line = Render(label_, last_done_, total_, absl::Now() - start_);
  if (terminal_) {
    std::fprintf(out_, "\r%s\n", line.c_str());
  } else if (last_decile_ < 10) {
    // The last line a log shows is the final count, unless the 100% line already said it.
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
}

}  // namespace tandem::bench
