#include "bench/serve/progress_bar.h"

#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::bench {
namespace {

TEST(ProgressBarRenderTest, DrawsTheBarCountsPercentAndTime) {
  EXPECT_EQ(ProgressBar::Render("reqs", 0, 10, absl::ZeroDuration(), 10),
            "reqs [>         ] 0/10 0% 0.0 s");
  EXPECT_EQ(ProgressBar::Render("reqs", 5, 10, absl::Milliseconds(8100), 10),
            "reqs [=====>    ] 5/10 50% 8.1 s");
  EXPECT_EQ(ProgressBar::Render("", 120, 500, absl::Seconds(3), 30),
            "[=======>                      ] 120/500 24% 3.0 s");
  EXPECT_EQ(ProgressBar::Render("x", 10, 10, absl::Seconds(2), 10),
            "x [==========] 10/10 100% 2.0 s");
  // Past the total (should not happen) and an empty run: a full bar, never a broken one.
  EXPECT_EQ(ProgressBar::Render("x", 12, 10, absl::Seconds(2), 4), "x [====] 12/10 100% 2.0 s");
  EXPECT_EQ(ProgressBar::Render("x", 0, 0, absl::Seconds(1), 4), "x [====] 0/0 100% 1.0 s");
}

std::vector<std::string> Lines(std::FILE* f) {
  std::rewind(f);
  std::vector<std::string> lines;
  char buf[256];
  while (std::fgets(buf, sizeof(buf), f) != nullptr) lines.emplace_back(buf);
  return lines;
}

TEST(ProgressBarTest, NotATerminalPrintsALineEachTenPercent) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar(f, "run", 100);
    for (int i = 1; i <= 100; ++i) bar.Update(i);
    bar.Update(40);  // late, out-of-order report: nothing new
    bar.Finish();
    bar.Finish();  // idempotent
  }
  std::vector<std::string> lines = Lines(f);
  ASSERT_EQ(lines.size(), 10u);  // 10%, 20%, ..., 100%; the 100% line is the final one
  EXPECT_NE(lines[0].find("10/100 10%"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[0].rfind("run [===>", 0), 0u) << lines[0];
  EXPECT_NE(lines[9].find("100/100 100%"), std::string::npos) << lines[9];
  for (const std::string& l : lines) EXPECT_EQ(l.find('\r'), std::string::npos);
  std::fclose(f);
}

TEST(ProgressBarTest, FinishBeforeTheEndPrintsTheFinalCount) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  ProgressBar bar(f, "run", 10);
  bar.Update(3);
  bar.Finish();
  bar.Update(10);  // after Finish: ignored
  std::vector<std::string> lines = Lines(f);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("3/10 30%"), std::string::npos);
  EXPECT_NE(lines[1].find("3/10 30%"), std::string::npos);
  std::fclose(f);
}

TEST(ProgressBarTest, NullStreamIsSilent) {
  ProgressBar bar(nullptr, "run", 5);
  bar.Update(5);
  bar.Finish();
}

// On a terminal (a pseudo-terminal here) the bar redraws in place with '\r'.
TEST(ProgressBarTest, TerminalRedrawsInPlace) {
  int master = posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(slave, 0);
  std::FILE* out = fdopen(slave, "w");
  ASSERT_NE(out, nullptr);
  {
    ProgressBar bar(out, "tty", 4);
    bar.Update(1);
    bar.Update(2);  // within 100 ms of the last draw: skipped
    bar.Update(4);  // the end is always drawn
    bar.Finish();
  }
  std::fclose(out);
  std::string text;
  char buf[512];
  pollfd p{master, POLLIN, 0};
  while (poll(&p, 1, 200) > 0 && (p.revents & POLLIN)) {
    ssize_t n = read(master, buf, sizeof(buf));
    if (n <= 0) break;
    text.append(buf, n);
  }
  close(master);
  EXPECT_NE(text.find("\rtty [=======>"), std::string::npos) << text;
  EXPECT_NE(text.find("] 1/4 25%"), std::string::npos) << text;
  EXPECT_EQ(text.find("2/4"), std::string::npos) << text;
  EXPECT_NE(text.find("\rtty [==============================] 4/4 100%"), std::string::npos)
      << text;
  EXPECT_EQ(text.back(), '\n') << text;
}

}  // namespace
}  // namespace tandem::bench
