// What tandem-chaos is asked to run; filled from flags in main.cc.
#ifndef TANDEM_BENCH_CHAOS_CHAOS_OPTIONS_H_
#define TANDEM_BENCH_CHAOS_CHAOS_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::chaos {

struct ChaosOptions {
  std::string model_dir;
  std::string backend = "sim";  // sim | cpu
  int num_prefill = 2;
  int num_decode = 2;
  // sim backend: the GPU and model it stands for, slowed down so this machine keeps up.
  std::string sim_gpu = "h100";
  std::string sim_model = "llama-3.1-8b";
  double sim_time_scale = 10;
  int sim_kv_blocks = 2048;
  int node_threads = 1;  // cpu backend

  // Load: open-loop Poisson arrivals over the router's gRPC API, greedy, exact lengths.
  double duration_s = 120;  // of arrivals
  double rate = 4;          // requests/s
  int num_prompts = 16;     // distinct prompts, reused round robin
  int min_prompt_len = 16;
  int max_prompt_len = 256;
  int max_tokens = 32;

  // Faults.
  std::string faults = "kill,stop,term,netcut";
  double fault_interval_s = 15;
  double min_hold_s = 2;
  double max_hold_s = 6;
  uint64_t seed = 1;
  bool isolate = true;  // each node in a network namespace of its own (needed for netcut)

  // Timeouts.
  int request_timeout_ms = 60000;  // the router's; the client's deadline adds lost_grace_s
  double lost_grace_s = 15;
  int lease_ms = 10000;      // decode nodes' KV lease (and the router's)
  int node_drain_ms = 5000;  // a SIGTERMed node's drain
  double settle_s = 45;      // after the load: wait this long for every block to be free
  double sample_interval_s = 2;
  int startup_timeout_s = 180;

  std::vector<std::string> router_args;  // appended verbatim
  std::vector<std::string> node_args;    // appended to every node's

  std::string out;      // JSON report ("" = none)
  std::string log_dir;  // "" = a fresh temp dir, printed
  std::string bin_dir;  // "" = beside this executable
};

// "" when the options make a runnable chaos run, else one message naming the flag.
std::string ValidateChaosOptions(const ChaosOptions& options);

}  // namespace tandem::chaos

#endif  // TANDEM_BENCH_CHAOS_CHAOS_OPTIONS_H_
