// RSS and thread counts of the cluster's processes over a run: a thread reads
// /proc/<pid>/status (VmRSS, Threads) of every process the cluster runs at that moment, every
// `interval`, until Stop(). Samples carry the pid, so a restarted node's incarnations stay
// apart. A bounded number of samples (the interval grows no finer than the run allows).
#ifndef TANDEM_BENCH_CHAOS_PROCESS_SAMPLER_H_
#define TANDEM_BENCH_CHAOS_PROCESS_SAMPLER_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/chaos/chaos_cluster.h"

namespace tandem::chaos {

struct ProcessSample {
  double t_s = 0;  // from the sampler's start
  std::string name;
  pid_t pid = 0;
  int64_t rss_kib = 0;
  int threads = 0;
};

// VmRSS (KiB) and Threads of a running process; nullopt when it is gone or unreadable.
struct ProcStatus {
  int64_t rss_kib = 0;
  int threads = 0;
};
std::optional<ProcStatus> ReadProcStatus(pid_t pid);
// Parses the text of /proc/<pid>/status.
std::optional<ProcStatus> ParseProcStatus(const std::string& text);

class ProcessSampler {
 public:
  // `processes` is called from the sampler's thread (ChaosCluster::Processes is thread-safe).
  ProcessSampler(std::function<std::vector<ClusterProcess>()> processes, absl::Duration interval,
                 int max_samples);
  ~ProcessSampler();  // stops
  void Start();
  void Stop();
  std::vector<ProcessSample> samples() const;

 private:
  void Loop();

  const std::function<std::vector<ClusterProcess>()> processes_;
  const absl::Duration interval_;
  const int max_rounds_;
  std::thread thread_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<ProcessSample> samples_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::chaos

#endif  // TANDEM_BENCH_CHAOS_PROCESS_SAMPLER_H_
