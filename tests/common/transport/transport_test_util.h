// Helpers shared by the transport tests and their peer process: hex coding, a pool hash, random
// fill, and a child process driven over its stdin/stdout.
#ifndef TANDEM_TESTS_COMMON_TRANSPORT_TRANSPORT_TEST_UTIL_H_
#define TANDEM_TESTS_COMMON_TRANSPORT_TRANSPORT_TEST_UTIL_H_

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

extern char** environ;

namespace tandem::testing {

// Offsets in `dst` where a copy's bytes differ from their source in `src` (what a write should
// have made equal); `copies` hold {src_offset, dst_offset, bytes} (KvCopy).
template <typename Copies>
std::vector<size_t> DifferingBytes(const std::vector<char>& dst, const std::vector<char>& src,
                                   const Copies& copies) {
  std::vector<size_t> differ;
  for (const auto& c : copies) {
    for (uint64_t i = 0; i < c.bytes; ++i) {
      if (dst[c.dst_offset + i] != src[c.src_offset + i]) differ.push_back(c.dst_offset + i);
    }
  }
  return differ;
}

inline std::string ToHex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

inline std::string FromHex(const std::string& hex) {
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return 0;
  };
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<char>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
  }
  return out;
}

inline uint64_t Fnv1a(const char* data, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(data[i])) * 1099511628211ull;
  return h;
}

inline void FillRandom(char* data, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = rng();
    std::memcpy(data + i, &v, 8);
  }
  for (; i < n; ++i) data[i] = static_cast<char>(rng());
}

// A child process with pipes to its stdin and from its stdout. Killed (SIGKILL) and reaped on
// destruction if still running.
class ChildProcess {
 public:
  explicit ChildProcess(const std::vector<std::string>& argv) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    to_child_ = in[1];
    from_child_ = out[0];
  }
  ~ChildProcess() {
    if (to_child_ >= 0) close(to_child_);
    Kill();
    if (from_child_ >= 0) close(from_child_);
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool running() const { return pid_ > 0; }

  bool WriteLine(const std::string& line) {
    std::string s = line + "\n";
    return write(to_child_, s.data(), s.size()) == static_cast<ssize_t>(s.size());
  }

  // The next line of the child's stdout, or nullopt after `timeout_ms` or at end of output.
  std::optional<std::string> ReadLine(int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (true) {
      size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      if (left <= 0) return std::nullopt;
      pollfd p{from_child_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char buf[4096];
      ssize_t n = read(from_child_, buf, sizeof(buf));
      if (n <= 0) return std::nullopt;
      buffer_.append(buf, static_cast<size_t>(n));
    }
  }

  void Kill() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  // Closes its stdin and waits for it to exit; its exit status, or -1.
  int CloseAndWait() {
    if (to_child_ >= 0) close(to_child_);
    to_child_ = -1;
    if (pid_ <= 0) return -1;
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

 private:
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  std::string buffer_;
};

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_COMMON_TRANSPORT_TRANSPORT_TEST_UTIL_H_
