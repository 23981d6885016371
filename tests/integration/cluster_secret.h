// The cluster secret file integration tests give every node they start (--cluster-secret-file):
// written once per test binary under its build folder, owner-only.
#ifndef TANDEM_TESTS_INTEGRATION_CLUSTER_SECRET_H_
#define TANDEM_TESTS_INTEGRATION_CLUSTER_SECRET_H_

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "tests/integration/test_dirs.h"

namespace tandem {

inline std::string TestClusterSecretFile() {
  const std::string path = TestBinaryDir() + "/test-models/cluster-secret";
  if (std::filesystem::exists(path)) return path;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  // Written under a private name, then renamed into place: parallel test processes race here.
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const std::string secret = "tandem-integration-tests-cluster-secret-0123456789abcdef";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd >= 0) {
    const ssize_t written = ::write(fd, secret.data(), secret.size());
    ::close(fd);
    if (written == static_cast<ssize_t>(secret.size())) std::rename(tmp.c_str(), path.c_str());
  }
  std::filesystem::remove(tmp);
  return path;
}

}  // namespace tandem

#endif  // TANDEM_TESTS_INTEGRATION_CLUSTER_SECRET_H_
