// `promtool check metrics` for tests: lints a /metrics text the way Prometheus' own tool does
// (names, units, counter suffixes, HELP text). promtool comes with Debian's `prometheus` package
// (scripts/install-deps.sh installs it); without it the check fails and says so.
#ifndef TANDEM_TESTS_COMMON_SERVING_PROMTOOL_CHECK_H_
#define TANDEM_TESTS_COMMON_SERVING_PROMTOOL_CHECK_H_

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"

namespace tandem::testing {

// "" when promtool finds nothing wrong with `metrics_text`, else what it printed (or why it could
// not run).
inline std::string PromtoolProblems(const std::string& metrics_text) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    return "promtool not found: run scripts/install-deps.sh (Debian package 'prometheus')";
  }
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string path = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/tandem_metrics_XXXXXX");
  const int fd = ::mkstemp(path.data());
  if (fd < 0) return "mkstemp failed";
  FILE* f = ::fdopen(fd, "w");
  std::fwrite(metrics_text.data(), 1, metrics_text.size(), f);
  std::fclose(f);
  const std::string command = absl::StrCat("promtool check metrics < '", path, "' 2>&1");
  FILE* pipe = ::popen(command.c_str(), "r");
  std::string output;
  char buffer[4096];
  size_t n = 0;
  while (pipe != nullptr && (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    output.append(buffer, n);
  }
  const int status = pipe != nullptr ? ::pclose(pipe) : -1;
  ::unlink(path.c_str());
  if (status == 0 && output.empty()) return "";
  return absl::StrCat("promtool check metrics (status ", status, "): ", output);
}

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_COMMON_SERVING_PROMTOOL_CHECK_H_
