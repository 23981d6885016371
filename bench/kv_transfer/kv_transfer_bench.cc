// tandem-bench-kv-transfer: KV write bandwidth through UcxTransport between two processes.
//
// The writer (this process) starts a target process (itself, --role target) that registers a pool
// and publishes its address and key on stdout; the writer then pushes --total-mib of data in
// messages of --message-bytes (one KvCopy each, --copies-per-write per Write, --in-flight Writes
// outstanding), waits for the last write and sends a notice. Prints one line per run and writes
// JSON (--json). bench/kv_transfer/vs_ucx_perftest.sh runs it beside ucx_perftest.
//
// --checksum both|on|off: the KV integrity checks' cost (common/handoff/kv_checksum.h), runs with
// and without them alternating in one process pair. The pool is then a KV pool of one layer, one
// head, one-token blocks whose K and V slices are half a message each, so a message is one block
// (two puts, as KvBlockWriter plans them). With checksums the writer hashes each Write's blocks
// from its pool right after issuing it, on the issuing thread (as KvBlockWriter does on the engine
// thread), and the notice carries the checksums; the target hashes the landed blocks on its notice
// and compares, as the decode node does before admission. Every run's time ends when the target
// reports back that it has the notice (and, with checksums, verified every block).
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/handoff/kv_checksum.h"
#include "common/transport/ucx_transport.h"
#include "common/util/cli_flags.h"
#include "nlohmann/json.hpp"
#include "tests/common/transport/transport_test_util.h"

namespace tandem {
namespace {

struct Options {
  std::string role = "writer";
  std::string tls;
  double total_mib = 512;
  uint64_t message_bytes = 1 << 20;
  int copies_per_write = 0;  // 0: enough for about 16 MiB per Write
  int in_flight = 4;
  uint64_t pool_bytes = 64 << 20;
  bool allocate = false;  // the target lets UCX allocate its pool
  int repeat = 3;
  double warmup_mib = 32;
  int64_t busy_poll_us = 50;
  std::string json;
  bool verbose = false;
  std::string checksum = "off";  // off, on, both
};

// The pool as a KV pool whose blocks are messages (see the file comment): K slices in the first
// half, V slices in the second.
KvLayout MessageLayout(const Options& o) {
  KvLayout l;
  l.dtype = DType::kBF16;
  l.num_layers = 1;
  l.num_kv_heads = 1;
  l.block_size = 1;
  l.head_dim = static_cast<int32_t>(o.message_bytes / 4);
  l.num_blocks = static_cast<int32_t>(o.pool_bytes / o.message_bytes);
  return l;
}

// The notice: "KEY_HEX EPOCH BLOCK:SUM ..." with checksums, "-" without.
std::string ChecksumNotice(const std::string& key, uint64_t epoch,
                           const std::vector<std::pair<int32_t, uint64_t>>& sums) {
  std::string out = testing::ToHex(key) + " " + std::to_string(epoch);
  for (const auto& [block, sum] : sums)
    out += " " + std::to_string(block) + ":" + std::to_string(sum);
  return out;
}

// Target side: verifies a notice's checksums against `pool`; "-" verifies nothing.
bool VerifyNotice(std::string_view notice, std::span<const uint8_t> pool, const KvLayout& layout) {
  if (notice == "-") return true;
  std::istringstream in{std::string(notice)};
  std::string key_hex, item;
  uint64_t epoch = 0;
  in >> key_hex >> epoch;
  auto hasher = KvBlockHasher::Create(testing::FromHex(key_hex), epoch);
  if (!hasher.ok()) return false;
  std::vector<int32_t> blocks;
  std::vector<uint64_t> sums;
  while (in >> item) {
    const size_t colon = item.find(':');
    blocks.push_back(std::stoi(item.substr(0, colon)));
    sums.push_back(std::stoull(item.substr(colon + 1)));
  }
  return VerifyKvBlocks(pool, layout, blocks, *hasher, sums).ok();
}

constexpr char kIntro[] = "tandem-bench-kv-transfer: KV write bandwidth through UcxTransport\n";

int RunTarget(const Options& o) {
  UcxTransportOptions to;
  to.tls = o.tls;
  to.busy_poll = absl::Microseconds(o.busy_poll_us);
  auto transport = UcxTransport::Create(to);
  if (!transport.ok()) {
    std::cerr << "target: " << transport.status() << "\n";
    return 1;
  }
  const size_t bytes = o.pool_bytes;
  std::vector<char> owned;
  if (o.allocate) {
    auto p = (*transport)->AllocatePool(bytes);
    if (!p.ok()) {
      std::cerr << "target: " << p.status() << "\n";
      return 1;
    }
  } else {
    owned.assign(bytes, 0);
    absl::Status s = (*transport)->RegisterPool(owned.data(), bytes);
    if (!s.ok()) {
      std::cerr << "target: " << s << "\n";
      return 1;
    }
  }
  const KvLayout layout = MessageLayout(o);
  UcxTransport* t = transport->get();
  // Answers every notice on stdout once it is verified: the writer's clock stops there.
  (*transport)->SetNoticeHandler([t, layout](std::string_view notice) {
    const absl::Time start = absl::Now();
    const bool ok = VerifyNotice(notice, t->host_pool(), layout);
    std::cout << "NOTICED " << (ok ? 1 : 0) << " " << absl::ToInt64Microseconds(absl::Now() - start)
              << std::endl;
  });
  std::cout << "READY " << testing::ToHex((*transport)->address()) << " "
            << testing::ToHex((*transport)->pool_remote_key()) << " " << (*transport)->pool_base()
            << std::endl;
  std::string line;
  while (std::getline(std::cin, line) && line != "EXIT") {
  }
  return 0;
}

// Outstanding-Write accounting for one run.
class Window {
 public:
  explicit Window(int limit) : limit_(limit) {}
  void Acquire() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](Window* w)
             ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) { return w->outstanding_ < w->limit_; },
        this));
    ++outstanding_;
  }
  TransferDone Release() {
    return [this](absl::Status s) {
      absl::MutexLock lock(&mu_);
      --outstanding_;
      if (!s.ok() && error_.ok()) error_ = s;
    };
  }
  absl::Status Drain() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](Window* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) { return w->outstanding_ == 0; },
        this));
    return error_;
  }

 private:
  absl::Mutex mu_;
  const int limit_;
  int outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

struct RunResult {
  bool checksum = false;
  double seconds = 0;    // first Write issued to the target's answer to the notice
  double notice_us = 0;  // last Write done to the target's answer
  double hash_us = 0;    // writer: hashing its blocks
  double verify_us = 0;  // target: hashing the landed blocks
  uint64_t bytes = 0;
  double gbps() const { return seconds > 0 ? bytes / seconds / 1e9 : 0; }
};

absl::StatusOr<RunResult> RunOnce(UcxTransport& t, const KvTarget& target, const Options& o,
                                  uint64_t total_bytes, bool checksum,
                                  testing::ChildProcess& target_process) {
  const KvLayout layout = MessageLayout(o);
  const std::string key = NewKvChecksumKey();
  static uint64_t epoch = 0;
  ++epoch;
  absl::StatusOr<KvBlockHasher> hasher = KvBlockHasher::Create(key, epoch);
  if (!hasher.ok()) return hasher.status();
  std::vector<std::pair<int32_t, uint64_t>> sums;
  absl::Duration hashing;
  const uint64_t pool = o.pool_bytes;
  const uint64_t msg = o.message_bytes;
  const uint64_t slots = std::max<uint64_t>(1, pool / msg);
  const uint64_t messages = (total_bytes + msg - 1) / msg;
  const int per_write = o.copies_per_write > 0
                            ? o.copies_per_write
                            : static_cast<int>(std::max<uint64_t>(1, (16ull << 20) / msg));
  Window window(o.in_flight);
  const absl::Time deadline = absl::Now() + absl::Minutes(10);
  const absl::Time start = absl::Now();
  uint64_t next = 0;
  while (next < messages) {
    std::vector<KvCopy> copies;
    std::vector<int32_t> blocks;
    for (int i = 0; i < per_write && next < messages; ++i, ++next) {
      const int32_t block = static_cast<int32_t>(next % slots);
      if (o.checksum == "off") {  // one put per message, as ucx_perftest
        copies.push_back(KvCopy{block * msg, block * msg, msg});
        continue;
      }
      blocks.push_back(block);
      for (int kv = 0; kv < 2; ++kv) {
        const uint64_t off = static_cast<uint64_t>(layout.Offset(0, kv, block, 0, 0)) * 2;
        copies.push_back(KvCopy{off, off, msg / 2});
      }
    }
    window.Acquire();
    t.Write(target, std::move(copies), deadline, window.Release());
    if (checksum) {
      const absl::Time h0 = absl::Now();
      absl::StatusOr<std::vector<uint64_t>> got = hasher->HashBlocks(t.host_pool(), layout, blocks);
      if (!got.ok()) return got.status();
      for (size_t i = 0; i < blocks.size(); ++i) sums.emplace_back(blocks[i], (*got)[i]);
      hashing += absl::Now() - h0;
    }
  }
  absl::Status s = window.Drain();
  const absl::Time writes_done = absl::Now();
  if (!s.ok()) return s;
  absl::Notification noticed;
  absl::Status notice_status;
  t.Notify(target, checksum ? ChecksumNotice(key, epoch, sums) : "-", deadline,
           [&](absl::Status st) {
             notice_status = st;
             noticed.Notify();
           });
  noticed.WaitForNotification();
  if (!notice_status.ok()) return notice_status;
  std::optional<std::string> answer = target_process.ReadLine(60000);
  const absl::Time answered = absl::Now();
  std::istringstream in(answer.value_or(""));
  std::string word;
  int ok = 0;
  double verify_us = 0;
  in >> word >> ok >> verify_us;
  if (word != "NOTICED" || ok != 1) {
    return absl::DataLossError("the target did not verify the transfer: " + answer.value_or(""));
  }
  RunResult r;
  r.checksum = checksum;
  r.seconds = absl::ToDoubleSeconds(answered - start);
  r.notice_us = absl::ToDoubleMicroseconds(answered - writes_done);
  r.hash_us = absl::ToDoubleMicroseconds(hashing);
  r.verify_us = verify_us;
  r.bytes = messages * msg;
  return r;
}

int RunWriter(const Options& o, const char* self) {
  if (o.message_bytes == 0 || o.message_bytes > o.pool_bytes) {
    std::cerr << "--message-bytes must be in (0, pool size]\n";
    return 2;
  }
  std::vector<std::string> argv = {self,
                                   "--role",
                                   "target",
                                   "--tls",
                                   o.tls,
                                   "--pool-bytes",
                                   std::to_string(o.pool_bytes),
                                   "--busy-poll-us",
                                   std::to_string(o.busy_poll_us),
                                   "--message-bytes",
                                   std::to_string(o.message_bytes)};
  if (o.allocate) argv.push_back("--allocate");
  testing::ChildProcess target_process(argv);
  auto ready = target_process.ReadLine(30000);
  if (!ready) {
    std::cerr << "the target process did not start\n";
    return 1;
  }
  std::istringstream in(*ready);
  std::string word, addr, key;
  uint64_t base = 0;
  in >> word >> addr >> key >> base;
  if (word != "READY") {
    std::cerr << "unexpected target output: " << *ready << "\n";
    return 1;
  }
  UcxTransportOptions to;
  to.tls = o.tls;
  to.busy_poll = absl::Microseconds(o.busy_poll_us);
  auto transport = UcxTransport::Create(to);
  if (!transport.ok()) {
    std::cerr << transport.status() << "\n";
    return 1;
  }
  std::vector<char> pool(o.pool_bytes);
  testing::FillRandom(pool.data(), pool.size(), 1);
  if (absl::Status s = (*transport)->RegisterPool(pool.data(), pool.size()); !s.ok()) {
    std::cerr << s << "\n";
    return 1;
  }
  KvTarget target{testing::FromHex(addr), testing::FromHex(key), base, 0};
  if (o.verbose) {
    auto d = (*transport)->DescribeEndpoint(target.address);
    std::cerr << (d.ok() ? *d : d.status().ToString()) << "\n";
  }
  // Checksums off, on, or both alternating (off first) within each repetition.
  std::vector<bool> modes;
  if (o.checksum != "on") modes.push_back(false);
  if (o.checksum != "off") modes.push_back(true);
  for (bool mode : modes) {
    auto warm = RunOnce(**transport, target, o, static_cast<uint64_t>(o.warmup_mib * (1 << 20)),
                        mode, target_process);
    if (!warm.ok()) {
      std::cerr << "warmup: " << warm.status() << "\n";
      return 1;
    }
  }
  const std::string tls_name = o.tls.empty() ? "(default)" : o.tls;
  std::vector<RunResult> runs;
  for (int i = 0; i < o.repeat; ++i) {
    for (bool mode : modes) {
      auto r = RunOnce(**transport, target, o, static_cast<uint64_t>(o.total_mib * (1 << 20)), mode,
                       target_process);
      if (!r.ok()) {
        std::cerr << "run " << i << ": " << r.status() << "\n";
        return 1;
      }
      runs.push_back(*r);
      std::printf(
          "tls=%-16s msg=%9llu B  checksum=%-3s bytes=%llu  %.3f s  %.3f GB/s  notice %.0f us  "
          "hash %.0f us  verify %.0f us\n",
          tls_name.c_str(), static_cast<unsigned long long>(o.message_bytes), mode ? "on" : "off",
          static_cast<unsigned long long>(r->bytes), r->seconds, r->gbps(), r->notice_us,
          r->hash_us, r->verify_us);
    }
  }
  transport->reset();  // before the target goes, so it does not look like a lost peer
  target_process.WriteLine("EXIT");
  target_process.CloseAndWait();
  double best = 0;
  for (const RunResult& r : runs) best = std::max(best, r.gbps());
  for (bool mode : modes) {
    double b = 0;
    for (const RunResult& r : runs) {
      if (r.checksum == mode) b = std::max(b, r.gbps());
    }
    std::printf("best checksum=%s %.3f GB/s\n", mode ? "on" : "off", b);
  }
  std::printf("best %.3f GB/s\n", best);
  if (!o.json.empty()) {
    nlohmann::json j;
    j["tls"] = o.tls;
    j["message_bytes"] = o.message_bytes;
    j["total_bytes"] = runs.empty() ? 0 : runs[0].bytes;
    j["in_flight"] = o.in_flight;
    j["copies_per_write"] = o.copies_per_write;
    j["allocate"] = o.allocate;
    j["pool_bytes"] = o.pool_bytes;
    j["best_gbps"] = best;
    for (const RunResult& r : runs) {
      j["runs"].push_back({{"checksum", r.checksum},
                           {"seconds", r.seconds},
                           {"gbps", r.gbps()},
                           {"notice_us", r.notice_us},
                           {"hash_us", r.hash_us},
                           {"verify_us", r.verify_us}});
    }
    std::ofstream(o.json) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace tandem

int main(int argc, char** argv) {
  tandem::Options o;
  tandem::FlagSet flags;
  flags.String("role", &o.role,
               {"writer|target",
                "writer (default) runs the benchmark; it starts itself with --role target for "
                "the other side"});
  flags.String(
      "tls", &o.tls,
      {"STR", "UCX_TLS for both processes (\"tcp\", \"posix,sysv,self\"; \"\" = UCX's own)"});
  flags.Number("total-mib", &o.total_mib, {"N", "data per run (default 512)"});
  flags.Number("message-bytes", &o.message_bytes, {"N", "bytes per put (default 1048576)"});
  flags.Number("copies-per-write", &o.copies_per_write,
               {"N", "puts per Write call (default: about 16 MiB per Write)"});
  flags.Number("in-flight", &o.in_flight, {"N", "Write calls outstanding (default 4)"});
  flags.Number("pool-bytes", &o.pool_bytes,
               {"N",
                "pool size on each side; message offsets wrap (default 67108864; the message "
                "size: every put to the same place, as ucx_perftest)"});
  flags.Switch("allocate", &o.allocate,
               "the target's pool is allocated by UCX (shared-memory peers write directly)");
  flags.Number("repeat", &o.repeat, {"N", "timed runs (default 3; the best is reported)"});
  flags.Number("warmup-mib", &o.warmup_mib, {"N", "untimed data first (default 32)"});
  flags.Number("busy-poll-us", &o.busy_poll_us,
               {"N", "progress-thread spin before sleeping (default 50)"});
  flags.String("json", &o.json, {"PATH", "write the results as JSON"});
  flags.Switch("verbose", &o.verbose, "print the endpoint's UCX lanes");
  flags.String("checksum", &o.checksum,
               {"off|on|both",
                "KV block checksums on the writer and verified at the target (both: runs with "
                "and without, alternating; default off)"});
  bool help = false;
  std::string error = flags.Parse(argc, argv, &help);
  if (help) {
    std::cout << flags.Help(tandem::kIntro);
    return 0;
  }
  if (!error.empty()) {
    std::cerr << error << "\n";
    return 2;
  }
  if (o.checksum != "off" && o.checksum != "on" && o.checksum != "both") {
    std::cerr << "--checksum is off, on or both\n";
    return 2;
  }
  if (o.checksum != "off" && o.message_bytes % 4 != 0) {
    std::cerr << "--checksum needs --message-bytes divisible by 4\n";
    return 2;
  }
  if (o.role == "target") return tandem::RunTarget(o);
  if (o.role != "writer") {
    std::cerr << "--role is writer or target\n";
    return 2;
  }
  return tandem::RunWriter(o, "/proc/self/exe");
}
