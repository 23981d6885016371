#include "bench/chaos/process_sampler.h"

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace tandem::chaos {

std::optional<ProcStatus> ParseProcStatus(const std::string& text) {
  ProcStatus status;
  bool rss = false;
  bool threads = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, "VmRSS:")) {
      line = absl::StripAsciiWhitespace(line);
      absl::ConsumeSuffix(&line, "kB");
      rss = absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &status.rss_kib);
    } else if (absl::ConsumePrefix(&line, "Threads:")) {
      threads = absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &status.threads);
    }
  }
  if (!rss || !threads) return std::nullopt;
  return status;
}

std::optional<ProcStatus> ReadProcStatus(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return ParseProcStatus(text.str());
}

ProcessSampler::ProcessSampler(std::function<std::vector<ClusterProcess>()> processes,
                               absl::Duration interval, int max_samples)
    : processes_(std::move(processes)), interval_(interval), max_rounds_(max_samples) {}

ProcessSampler::~ProcessSampler() { Stop(); }

void ProcessSampler::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void ProcessSampler::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

std::vector<ProcessSample> ProcessSampler::samples() const {
  absl::MutexLock lock(&mu_);
  return samples_;
}

void ProcessSampler::Loop() {
  const absl::Time start = absl::Now();
  for (int round = 0; round < max_rounds_; ++round) {
    const double t = absl::ToDoubleSeconds(absl::Now() - start);
    std::vector<ProcessSample> taken;
    for (const ClusterProcess& p : processes_()) {
      std::optional<ProcStatus> status = ReadProcStatus(p.pid);
      if (!status.has_value()) continue;  // between a kill and its restart
      taken.push_back({t, p.name, p.pid, status->rss_kib, status->threads});
    }
    absl::MutexLock lock(&mu_);
    samples_.insert(samples_.end(), taken.begin(), taken.end());
    auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
    if (mu_.AwaitWithTimeout(absl::Condition(&stopping), interval_)) return;
  }
}

}  // namespace tandem::chaos
