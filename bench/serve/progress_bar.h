// A one-line progress bar on a terminal stream (stderr): "[=====>     ] 120/500 24% 8.1 s" redrawn
// in place with '\r' at most every 100 ms, and a final line with a newline. When the stream is not
// a terminal it prints a line at each 10% instead, so logs stay readable.
#ifndef TANDEM_BENCH_SERVE_PROGRESS_BAR_H_
#define TANDEM_BENCH_SERVE_PROGRESS_BAR_H_

#include <cstdio>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tandem::bench {

class ProgressBar {
 public:
  // `out` null: silent.
  ProgressBar(std::FILE* out, std::string label, int total);
  // Thread-safe.
  void Update(int done);
  void Finish();

  // The text of the bar for `done` of `total` after `elapsed` (for tests), `width` cells.
  static std::string Render(const std::string& label, int done, int total, absl::Duration elapsed,
                            int width = 30);

 private:
  std::FILE* const out_;
  const std::string label_;
  const int total_;
  const bool terminal_;
  const absl::Time start_;
  absl::Mutex mu_;
  absl::Time last_draw_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int last_decile_ ABSL_GUARDED_BY(mu_) = -1;
  int last_done_ ABSL_GUARDED_BY(mu_) = 0;  // the most seen (updates can arrive out of order)
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_SERVE_PROGRESS_BAR_H_
