// Where integration tests find tandem's binaries and the source tree's data files. The build's
// folders are compiled in; the environment overrides them, so the same test binary runs from a
// GPU pack on another machine (scripts/gpu/run.sh exports TANDEM_BINARY_DIR = the pack, whose
// bin/ holds the packed binaries, and TANDEM_SOURCE_DIR = the pack's data/ folder).
#ifndef TANDEM_TESTS_INTEGRATION_TEST_DIRS_H_
#define TANDEM_TESTS_INTEGRATION_TEST_DIRS_H_

#include <cstdlib>
#include <string>

namespace tandem {

// $TANDEM_BINARY_DIR, else the build folder this binary was built in.
inline std::string TestBinaryDir() {
  const char* dir = std::getenv("TANDEM_BINARY_DIR");
  return dir != nullptr && *dir != '\0' ? dir : TANDEM_BINARY_DIR;
}

// $TANDEM_SOURCE_DIR, else the source tree this binary was built from.
inline std::string TestSourceDir() {
  const char* dir = std::getenv("TANDEM_SOURCE_DIR");
  return dir != nullptr && *dir != '\0' ? dir : TANDEM_SOURCE_DIR;
}

}  // namespace tandem

#endif  // TANDEM_TESTS_INTEGRATION_TEST_DIRS_H_
