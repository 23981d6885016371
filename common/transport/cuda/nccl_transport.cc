#include "common/transport/cuda/nccl_transport.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/transport/cuda/copy_plan.h"
#include "common/transport/cuda/nccl_frame.h"
#include "spdlog/spdlog.h"

namespace tandem {

namespace {

using Task = std::function<void(bool cancelled)>;

uint64_t RandomId() {
  std::random_device rd;
  uint64_t v = 0;
  while (v == 0) v = (uint64_t{rd()} << 32) ^ rd();
  return v;
}

absl::Status CudaError(cudaError_t error, std::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  std::string message = absl::StrCat(std::string(what), ": CUDA error ", cudaGetErrorName(error),
                                     " (", cudaGetErrorString(error), ")");
  if (error == cudaErrorNoDevice || error == cudaErrorInsufficientDriver) {
    return absl::UnavailableError(message);
  }
  return absl::InternalError(message);
}

absl::Status NcclError(ncclResult_t r, std::string_view what) {
  if (r == ncclSuccess) return absl::OkStatus();
  std::string message = absl::StrCat(std::string(what), ": NCCL error ", static_cast<int>(r), " (",
                                     ncclGetErrorString(r), ")");
  if (r == ncclRemoteError || r == ncclSystemError) return absl::UnavailableError(message);
  if (r == ncclInvalidArgument || r == ncclInvalidUsage) return absl::InvalidArgumentError(message);
  return absl::InternalError(message);
}

// Makes `device` current for the guard's lifetime and restores the caller's device after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) : device_(device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device_) cudaSetDevice(device_);
  }
  ~DeviceGuard() {
    if (previous_ >= 0 && previous_ != device_) cudaSetDevice(previous_);
  }

 private:
  int device_;
  int previous_ = -1;
};

// Sleeps a little longer the longer nothing happened: quick answers while busy, little CPU idle.
class Backoff {
 public:
  explicit Backoff(absl::Duration first) : first_(first) {}
  void Wait() {
    const absl::Duration d = std::min(absl::Milliseconds(1), first_ * (1 << std::min(spins_, 6)));
    ++spins_;
    absl::SleepFor(d);
  }
  void Reset() { spins_ = 0; }

 private:
  absl::Duration first_;
  int spins_ = 0;
};

// Waits while a non-blocking communicator is still busy with its last call. OK when done;
// the communicator's error; DeadlineExceeded at `deadline`; Cancelled when `stop` turns true.
absl::Status WaitComm(ncclComm_t comm, absl::Time deadline, const std::atomic<bool>* stop,
                      absl::Duration poll, std::string_view what) {
  Backoff backoff(poll);
  while (true) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t r = ncclCommGetAsyncError(comm, &state);
    if (r != ncclSuccess) return NcclError(r, what);
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) return NcclError(state, what);
    if (stop != nullptr && stop->load()) return absl::CancelledError("nccl transport stopped");
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(std::string(what), ": timed out"));
    }
    backoff.Wait();
  }
}

// An NCCL call on a non-blocking communicator: its immediate result, then the wait.
absl::Status CallComm(ncclResult_t r, ncclComm_t comm, absl::Time deadline,
                      const std::atomic<bool>* stop, absl::Duration poll, std::string_view what) {
  if (r != ncclSuccess && r != ncclInProgress) return NcclError(r, what);
  return WaitComm(comm, deadline, stop, poll, what);
}

// Makes a communicator of 2 ranks (non-blocking) and waits until it is ready.
absl::StatusOr<ncclComm_t> InitComm(const ncclUniqueId& id, int rank, absl::Time deadline,
                                    const std::atomic<bool>* stop, absl::Duration poll) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, 2, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (comm != nullptr) ncclCommAbort(comm);
    return NcclError(r, "ncclCommInitRankConfig");
  }
  absl::Status s = WaitComm(comm, deadline, stop, poll, "ncclCommInitRankConfig");
  if (!s.ok()) {
    ncclCommAbort(comm);
    return s;
  }
  return comm;
}

}  // namespace

class NcclKvTransport::Impl {
 public:
  explicit Impl(NcclKvTransportOptions options)
      : options_(std::move(options)), incarnation_(RandomId()) {}

  ~Impl() { Shutdown(); }

  absl::Status Start() {
    if (options_.frame_bytes < kNcclMinFrameBytes || options_.frames_in_flight <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("nccl transport: frame_bytes must be at least ", kNcclMinFrameBytes,
                       " and frames_in_flight positive"));
    }
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) return CudaError(e, "cudaGetDeviceCount");
    if (options_.cuda_device < 0 || options_.cuda_device >= count) {
      return absl::InvalidArgumentError(absl::StrCat("CUDA device ", options_.cuda_device,
                                                     " does not exist (", count, " devices)"));
    }
    thread_ = std::thread([this] { Loop(); });
    return absl::OkStatus();
  }

  void Shutdown() {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      stop_ = true;
    }
    stopping_.store(true);
    if (thread_.joinable()) thread_.join();
    DeviceGuard guard(options_.cuda_device);
    RunQueued();
    const absl::Status cancelled = absl::CancelledError("nccl transport stopped");
    for (auto& [key, c] : connections_) c->cancel.store(true);  // connectors give up
    while (!connections_.empty()) CloseConnection(connections_.begin(), cancelled);
    RunQueued();  // connectors' results, cancelled
    std::vector<std::unique_ptr<Receiver>> receivers;
    {
      absl::MutexLock lock(&receivers_mu_);
      stop_receivers_ = true;
      receivers.swap(receivers_);
    }
    for (auto& r : receivers) r->stop.store(true);
    for (auto& r : receivers) r->thread.join();
  }

  absl::Status RegisterDevicePool(void* base, size_t bytes, int cuda_device) {
    if (base == nullptr || bytes == 0) return absl::InvalidArgumentError("empty device pool");
    if (cuda_device != options_.cuda_device) {
      return absl::InvalidArgumentError(absl::StrCat("pool on CUDA device ", cuda_device,
                                                     ", the nccl transport uses device ",
                                                     options_.cuda_device));
    }
    cudaPointerAttributes attr{};
    cudaError_t e = cudaPointerGetAttributes(&attr, base);
    if (e != cudaSuccess) return CudaError(e, "cudaPointerGetAttributes of the pool");
    if (attr.type != cudaMemoryTypeDevice || attr.device != cuda_device) {
      return absl::InvalidArgumentError(
          absl::StrCat("the pool is not device memory of CUDA device ", cuda_device));
    }
    absl::MutexLock lock(&info_mu_);
    if (pool_ != nullptr) return absl::FailedPreconditionError("pool already registered");
    pool_ = static_cast<char*>(base);
    pool_bytes_ = bytes;
    return absl::OkStatus();
  }

  std::string address() const { return options_.address; }
  uint64_t incarnation() const { return incarnation_; }
  std::string pool_remote_key() const {
    absl::MutexLock lock(&info_mu_);
    if (pool_ == nullptr) return "";
    return EncodeNcclPoolKey({pool_bytes_, incarnation_});
  }
  uint64_t pool_base() const {
    absl::MutexLock lock(&info_mu_);
    return reinterpret_cast<uintptr_t>(pool_);
  }
  void SetNoticeHandler(NoticeHandler handler) {
    absl::MutexLock lock(&info_mu_);
    handler_ = std::move(handler);
  }

  void Write(const KvTarget& target, std::vector<KvCopy> copies, absl::Time deadline,
             TransferDone done) {
    auto op = std::make_shared<Op>();
    op->copies = std::move(copies);
    op->deadline = deadline;
    op->done = std::move(done);
    Post([this, target, op](bool cancelled) {
      if (cancelled) {
        op->done(absl::CancelledError("nccl transport stopped"));
        return;
      }
      Queue(target, op);
    });
  }

  void Notify(const KvTarget& target, std::string payload, absl::Time deadline, TransferDone done) {
    auto op = std::make_shared<Op>();
    op->notify = true;
    op->payload = std::move(payload);
    op->deadline = deadline;
    op->done = std::move(done);
    Post([this, target, op](bool cancelled) {
      if (cancelled) {
        op->done(absl::CancelledError("nccl transport stopped"));
        return;
      }
      Queue(target, op);
    });
  }

  absl::Status AcceptConnection(std::string_view unique_id, uint64_t writer_incarnation) {
    if (unique_id.size() != sizeof(ncclUniqueId)) {
      return absl::InvalidArgumentError(absl::StrCat("NCCL unique id of ", unique_id.size(),
                                                     " bytes, expected ", sizeof(ncclUniqueId)));
    }
    {
      absl::MutexLock lock(&info_mu_);
      if (pool_ == nullptr) {
        return absl::FailedPreconditionError("nccl transport: no pool registered");
      }
    }
    auto receiver = std::make_unique<Receiver>();
    receiver->writer_incarnation = writer_incarnation;
    std::memcpy(&receiver->id, unique_id.data(), sizeof(ncclUniqueId));
    std::vector<std::unique_ptr<Receiver>> old;
    {
      absl::MutexLock lock(&receivers_mu_);
      if (stop_receivers_) return absl::CancelledError("nccl transport stopped");
      for (auto it = receivers_.begin(); it != receivers_.end();) {
        if ((*it)->writer_incarnation == writer_incarnation || (*it)->finished.load()) {
          (*it)->stop.store(true);
          old.push_back(std::move(*it));
          it = receivers_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& r : old) r->thread.join();
    Receiver* raw = receiver.get();
    raw->thread = std::thread([this, raw] { ReceiveLoop(raw); });
    absl::MutexLock lock(&receivers_mu_);
    receivers_.push_back(std::move(receiver));
    return absl::OkStatus();
  }

  int num_connections() const {
    absl::MutexLock lock(&receivers_mu_);
    int n = 0;
    for (const auto& r : receivers_) n += r->finished.load() ? 0 : 1;
    return n;
  }

 private:
  // ---- writer ----

  struct Op {
    bool notify = false;
    std::vector<KvCopy> copies;
    std::string payload;
    absl::Time deadline;
    TransferDone done;
    // Issued:
    std::vector<int> slots;  // frame buffers it holds
    cudaEvent_t event = nullptr;
    bool finished = false;
  };

  struct Connection {
    std::string key;
    std::string address;
    std::string tag;
    uint64_t remote_pool_bytes = 0;
    bool ready = false;
    bool broken = false;  // failed; closed by whoever noticed, outside iteration
    std::thread connector;
    std::atomic<bool> cancel{false};
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
    char* device_frames = nullptr;
    char* host_frames = nullptr;
    std::vector<int> free_slots;
    std::vector<cudaEvent_t> spare_events;
    uint64_t next_sequence = 0;
    std::deque<std::shared_ptr<Op>> waiting;    // not issued yet, in order
    std::deque<std::shared_ptr<Op>> in_flight;  // issued, in order
  };

  void Post(Task task) {
    {
      absl::MutexLock lock(&mu_);
      if (!stop_) {
        queue_.push_back(std::move(task));
        return;
      }
    }
    task(true);
  }

  void RunQueued() {
    while (true) {
      std::deque<Task> tasks;
      {
        absl::MutexLock lock(&mu_);
        tasks.swap(queue_);
      }
      if (tasks.empty()) return;
      for (Task& t : tasks) t(true);
    }
  }

  void Loop() {
    cudaSetDevice(options_.cuda_device);
    while (true) {
      std::deque<Task> tasks;
      {
        absl::MutexLock lock(&mu_);
        bool busy = false;
        for (auto& [key, c] : connections_) busy |= !c->in_flight.empty() || !c->waiting.empty();
        auto ready = [this] { return stop_ || !queue_.empty(); };
        mu_.AwaitWithTimeout(absl::Condition(&ready),
                             busy ? options_.poll_interval : absl::Milliseconds(100));
        if (stop_) return;
        tasks.swap(queue_);
      }
      for (Task& t : tasks) t(false);
      Progress();
    }
  }

  void Queue(const KvTarget& target, std::shared_ptr<Op> op) {
    char* pool = nullptr;
    size_t pool_bytes = 0;
    {
      absl::MutexLock lock(&info_mu_);
      pool = pool_;
      pool_bytes = pool_bytes_;
    }
    if (pool == nullptr) {
      op->done(absl::FailedPreconditionError("nccl transport: no pool registered"));
      return;
    }
    absl::StatusOr<NcclPoolKey> key = DecodeNcclPoolKey(target.remote_key);
    if (!key.ok()) {
      op->done(key.status());
      return;
    }
    if (!op->notify) {
      absl::Status s = CheckCopyBounds(op->copies, pool_bytes, key->pool_bytes, "nccl write");
      if (!s.ok()) {
        op->done(s);
        return;
      }
      op->copies = CoalesceCopies(std::move(op->copies));
      const size_t frames = (op->copies.size() + NcclFrameMaxRuns(options_.frame_bytes) - 1) /
                            NcclFrameMaxRuns(options_.frame_bytes);
      if (frames > static_cast<size_t>(options_.frames_in_flight)) {
        op->done(absl::InvalidArgumentError(absl::StrCat(
            "nccl write of ", op->copies.size(), " runs needs ", frames,
            " header frames, more than frames_in_flight (", options_.frames_in_flight, ")")));
        return;
      }
      if (op->copies.empty()) {
        op->done(absl::OkStatus());
        return;
      }
    } else if (op->payload.size() > NcclFrameMaxPayload(options_.frame_bytes)) {
      op->done(absl::InvalidArgumentError(absl::StrCat("a ", op->payload.size(),
                                                       "-byte notice does not fit a ",
                                                       options_.frame_bytes, "-byte NCCL frame")));
      return;
    }
    if (absl::Now() >= op->deadline) {
      op->done(absl::DeadlineExceededError("nccl transport: deadline passed before issuing"));
      return;
    }
    const std::string conn_key = absl::StrCat(target.address, "\n", target.remote_key);
    auto it = connections_.find(conn_key);
    if (it == connections_.end()) {
      if (!options_.connect) {
        op->done(absl::FailedPreconditionError("nccl transport: no connect hook to reach owners"));
        return;
      }
      auto c = std::make_unique<Connection>();
      c->key = conn_key;
      c->address = target.address;
      c->tag = absl::StrCat("nccl-peer ", target.address);
      c->remote_pool_bytes = key->pool_bytes;
      StartConnect(c.get());
      it = connections_.emplace(conn_key, std::move(c)).first;
    }
    it->second->waiting.push_back(std::move(op));
    Issue(*it->second);
    if (it->second->broken) CloseConnection(it, absl::OkStatus());
  }

  // Runs the connect hook and the communicator's initialization on a thread of its own.
  void StartConnect(Connection* c) {
    ncclUniqueId id;
    ncclResult_t r = ncclGetUniqueId(&id);
    const std::string key = c->key;
    if (r != ncclSuccess) {
      const absl::Status s = NcclError(r, "ncclGetUniqueId");
      Post([this, key, s](bool cancelled) {
        if (!cancelled) OnConnected(key, s, nullptr);
      });
      return;
    }
    const std::string address = c->address;
    std::atomic<bool>* cancel = &c->cancel;
    c->connector = std::thread([this, key, address, id, cancel] {
      cudaSetDevice(options_.cuda_device);
      const absl::Time deadline = absl::Now() + options_.connect_timeout;
      const std::string id_bytes(reinterpret_cast<const char*>(&id), sizeof(id));
      absl::Status s = options_.connect(address, id_bytes, incarnation_, deadline);
      ncclComm_t comm = nullptr;
      if (s.ok()) {
        absl::StatusOr<ncclComm_t> made = InitComm(id, 0, deadline, cancel, options_.poll_interval);
        if (made.ok()) {
          comm = *made;
        } else {
          s = made.status();
        }
      } else {
        s = absl::Status(s.code(), absl::StrCat("nccl connect to ", address, ": ", s.message()));
      }
      Post([this, key, s, comm](bool cancelled) {
        if (cancelled) {
          if (comm != nullptr) ncclCommAbort(comm);
          return;
        }
        OnConnected(key, s, comm);
      });
    });
  }

  void OnConnected(const std::string& key, const absl::Status& status, ncclComm_t comm) {
    auto it = connections_.find(key);
    if (it == connections_.end()) {
      if (comm != nullptr) ncclCommAbort(comm);
      return;
    }
    Connection& c = *it->second;
    absl::Status s = status;
    if (s.ok()) {
      c.comm = comm;
      s = CudaError(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking),
                    "cudaStreamCreateWithFlags");
      const size_t frames_bytes = options_.frame_bytes * options_.frames_in_flight;
      if (s.ok()) {
        s = CudaError(cudaMalloc(reinterpret_cast<void**>(&c.device_frames), frames_bytes),
                      "cudaMalloc of the frame ring");
      }
      if (s.ok()) {
        s = CudaError(cudaHostAlloc(reinterpret_cast<void**>(&c.host_frames), frames_bytes,
                                    cudaHostAllocDefault),
                      "cudaHostAlloc of the frame ring");
      }
      for (int i = options_.frames_in_flight - 1; i >= 0; --i) c.free_slots.push_back(i);
    }
    if (!s.ok()) {
      spdlog::warn("nccl transport: connecting to {} failed: {}", c.tag, s.ToString());
      CloseConnection(it, s);
      return;
    }
    c.ready = true;
    spdlog::info("nccl transport: connected to {}", c.tag);
    Issue(c);
    if (c.broken) CloseConnection(it, absl::OkStatus());
  }

  // Issues waiting operations in order while frame buffers are free. An error fails the
  // connection and marks it broken (the caller closes it).
  void Issue(Connection& c) {
    if (!c.ready || c.broken) return;
    while (!c.waiting.empty()) {
      std::shared_ptr<Op> op = c.waiting.front();
      std::vector<NcclFrame> frames;
      if (op->notify) {
        NcclFrame f;
        f.type = NcclFrameType::kNotice;
        f.sequence = c.next_sequence;
        f.payload = op->payload;
        frames.push_back(std::move(f));
      } else {
        frames = PlanNcclCopyFrames(op->copies, options_.frame_bytes, c.next_sequence);
      }
      if (frames.size() > c.free_slots.size()) return;  // wait for frames to come back
      c.waiting.pop_front();
      absl::Status s = IssueOp(c, *op, frames);
      c.in_flight.push_back(op);
      if (!s.ok()) {
        spdlog::warn("nccl transport: issuing to {} failed: {}", c.tag, s.ToString());
        FailConnection(c, s, op.get());
        c.broken = true;
        return;
      }
    }
  }

  absl::Status IssueOp(Connection& c, Op& op, const std::vector<NcclFrame>& frames) {
    char* pool = nullptr;
    {
      absl::MutexLock lock(&info_mu_);
      pool = pool_;
    }
    size_t run = 0;
    for (const NcclFrame& f : frames) {
      const int slot = c.free_slots.back();
      c.free_slots.pop_back();
      op.slots.push_back(slot);
      char* host = c.host_frames + static_cast<size_t>(slot) * options_.frame_bytes;
      char* device = c.device_frames + static_cast<size_t>(slot) * options_.frame_bytes;
      absl::Status s = EncodeNcclFrame(f, host, options_.frame_bytes);
      if (!s.ok()) return s;
      s = CudaError(
          cudaMemcpyAsync(device, host, options_.frame_bytes, cudaMemcpyHostToDevice, c.stream),
          "cudaMemcpyAsync of a frame");
      if (!s.ok()) return s;
      // The frame alone, then the runs it announces as one group: the owner receives the frame,
      // reads it, and posts the matching receives as one group.
      s = CallComm(ncclSend(device, options_.frame_bytes, ncclUint8, 1, c.comm, c.stream), c.comm,
                   op.deadline, &stopping_, options_.poll_interval, "ncclSend of a frame");
      if (!s.ok()) return s;
      if (!f.runs.empty()) {
        s = NcclError(ncclGroupStart(), "ncclGroupStart");
        if (!s.ok()) return s;
        ncclResult_t r = ncclSuccess;
        for (size_t i = 0; (r == ncclSuccess || r == ncclInProgress) && i < f.runs.size(); ++i) {
          const KvCopy& copy = op.copies[run + i];
          r = ncclSend(pool + copy.src_offset, copy.bytes, ncclUint8, 1, c.comm, c.stream);
        }
        if (r != ncclSuccess && r != ncclInProgress) {
          ncclGroupEnd();
          return NcclError(r, "ncclSend");
        }
        s = CallComm(ncclGroupEnd(), c.comm, op.deadline, &stopping_, options_.poll_interval,
                     "ncclGroupEnd");
        if (!s.ok()) return s;
      }
      run += f.runs.size();
      ++c.next_sequence;
    }
    if (!c.spare_events.empty()) {
      op.event = c.spare_events.back();
      c.spare_events.pop_back();
    } else {
      absl::Status s = CudaError(cudaEventCreateWithFlags(&op.event, cudaEventDisableTiming),
                                 "cudaEventCreateWithFlags");
      if (!s.ok()) return s;
    }
    return CudaError(cudaEventRecord(op.event, c.stream), "cudaEventRecord");
  }

  // Polls in-flight operations, checks communicators and deadlines, issues what can go.
  void Progress() {
    const absl::Time now = absl::Now();
    std::vector<std::string> broken;
    for (auto& [key, cp] : connections_) {
      Connection& c = *cp;
      // Not issued yet: past the deadline they fail alone.
      for (auto it = c.waiting.begin(); it != c.waiting.end();) {
        if (now >= (*it)->deadline) {
          std::shared_ptr<Op> op = *it;
          it = c.waiting.erase(it);
          op->finished = true;
          op->done(absl::DeadlineExceededError(
              absl::StrCat("nccl transport: ", op->notify ? "notice" : "write", " to ", c.tag,
                           c.ready ? " waited for frame buffers" : " waited for the connection",
                           " past its deadline")));
        } else {
          ++it;
        }
      }
      if (!c.ready) continue;
      absl::Status error;
      Op* culprit = nullptr;
      while (!c.in_flight.empty()) {
        Op& op = *c.in_flight.front();
        const cudaError_t e = cudaEventQuery(op.event);
        if (e == cudaErrorNotReady) {
          if (now >= op.deadline) {
            error = absl::DeadlineExceededError(
                absl::StrCat("nccl transport: ", op.notify ? "notice" : "write", " to ", c.tag,
                             " ran past its deadline (communicator aborted)"));
            culprit = &op;
          }
          break;
        }
        if (e != cudaSuccess) {
          error = CudaError(e, "nccl transport: a send");
          culprit = &op;
          break;
        }
        std::shared_ptr<Op> done = c.in_flight.front();
        c.in_flight.pop_front();
        for (int slot : done->slots) c.free_slots.push_back(slot);
        c.spare_events.push_back(done->event);
        done->event = nullptr;
        done->finished = true;
        done->done(absl::OkStatus());
      }
      if (error.ok()) {
        ncclResult_t state = ncclSuccess;
        ncclCommGetAsyncError(c.comm, &state);
        if (state != ncclSuccess && state != ncclInProgress) {
          error = NcclError(state, absl::StrCat("nccl transport: communicator with ", c.tag));
        }
      }
      if (!error.ok()) {
        spdlog::warn("{}", error.ToString());
        FailConnection(c, error, culprit);
        c.broken = true;
      }
      Issue(c);
      if (c.broken) broken.push_back(key);
    }
    for (const std::string& key : broken) {
      auto it = connections_.find(key);
      if (it != connections_.end()) CloseConnection(it, absl::OkStatus());
    }
  }

  // Aborts the communicator and fails every operation on it: `culprit` with `status`, the rest
  // Unavailable (or Cancelled when `status` is).
  void FailConnection(Connection& c, const absl::Status& status, Op* culprit) {
    c.cancel.store(true);
    if (c.comm != nullptr) {
      ncclCommAbort(c.comm);
      c.comm = nullptr;
    }
    if (c.stream != nullptr) cudaStreamSynchronize(c.stream);  // aborted kernels have ended
    const absl::Status others =
        status.code() == absl::StatusCode::kCancelled
            ? status
            : absl::UnavailableError(absl::StrCat("nccl transport: communicator with ", c.tag,
                                                  " aborted: ", status.message()));
    std::deque<std::shared_ptr<Op>> ops;
    ops.swap(c.in_flight);
    for (auto& op : c.waiting) ops.push_back(op);
    c.waiting.clear();
    for (auto& op : ops) {
      if (op->event != nullptr) c.spare_events.push_back(op->event);
      op->event = nullptr;
      if (op->finished) continue;
      op->finished = true;
      op->done(op.get() == culprit ? status : others);
    }
    c.ready = false;
  }

  // Removes a connection: fails what it still has with `status` (when not OK), frees its
  // resources, joins its connector.
  void CloseConnection(std::map<std::string, std::unique_ptr<Connection>>::iterator it,
                       const absl::Status& status) {
    std::unique_ptr<Connection> c = std::move(it->second);
    connections_.erase(it);
    if (!status.ok()) FailConnection(*c, status, nullptr);
    if (c->connector.joinable()) c->connector.join();
    if (c->comm != nullptr) ncclCommAbort(c->comm);
    if (c->stream != nullptr) {
      cudaStreamSynchronize(c->stream);
      cudaStreamDestroy(c->stream);
    }
    for (cudaEvent_t e : c->spare_events) cudaEventDestroy(e);
    if (c->device_frames != nullptr) cudaFree(c->device_frames);
    if (c->host_frames != nullptr) cudaFreeHost(c->host_frames);
  }

  // ---- owner ----

  struct Receiver {
    uint64_t writer_incarnation = 0;
    ncclUniqueId id;
    std::thread thread;
    std::atomic<bool> stop{false};
    std::atomic<bool> finished{false};
  };

  void ReceiveLoop(Receiver* r) {
    cudaSetDevice(options_.cuda_device);
    const std::string tag = absl::StrCat("writer ", absl::Hex(r->writer_incarnation));
    absl::Status s = RunReceiver(r, tag);
    if (!s.ok() && s.code() != absl::StatusCode::kCancelled) {
      spdlog::warn("nccl transport: receiving from {} ended: {}", tag, s.ToString());
    }
    r->finished.store(true);
  }

  absl::Status RunReceiver(Receiver* r, const std::string& tag) {
    char* pool = nullptr;
    size_t pool_bytes = 0;
    {
      absl::MutexLock lock(&info_mu_);
      pool = pool_;
      pool_bytes = pool_bytes_;
    }
    const absl::Duration poll = options_.poll_interval;
    absl::StatusOr<ncclComm_t> comm =
        InitComm(r->id, 1, absl::Now() + options_.connect_timeout, &r->stop, poll);
    if (!comm.ok()) return comm.status();
    spdlog::info("nccl transport: {} connected", tag);
    cudaStream_t stream = nullptr;
    char* device_frame = nullptr;
    char* host_frame = nullptr;
    cudaEvent_t event = nullptr;
    absl::Status s = CudaError(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                               "cudaStreamCreateWithFlags");
    if (s.ok()) {
      s = CudaError(cudaMalloc(reinterpret_cast<void**>(&device_frame), options_.frame_bytes),
                    "cudaMalloc of a frame");
    }
    if (s.ok()) {
      s = CudaError(cudaHostAlloc(reinterpret_cast<void**>(&host_frame), options_.frame_bytes,
                                  cudaHostAllocDefault),
                    "cudaHostAlloc of a frame");
    }
    if (s.ok()) {
      s = CudaError(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    }
    uint64_t sequence = 0;
    const absl::Time forever = absl::InfiniteFuture();
    while (s.ok()) {
      s = CallComm(ncclRecv(device_frame, options_.frame_bytes, ncclUint8, 0, *comm, stream), *comm,
                   forever, &r->stop, poll, "ncclRecv of a frame");
      if (!s.ok()) break;
      s = CudaError(cudaMemcpyAsync(host_frame, device_frame, options_.frame_bytes,
                                    cudaMemcpyDeviceToHost, stream),
                    "cudaMemcpyAsync of a frame");
      if (s.ok()) s = CudaError(cudaEventRecord(event, stream), "cudaEventRecord");
      if (!s.ok()) break;
      // Wait for the frame (and with it every receive before it), watching for a failed peer.
      Backoff backoff(poll);
      while (true) {
        const cudaError_t e = cudaEventQuery(event);
        if (e == cudaSuccess) break;
        if (e != cudaErrorNotReady) {
          s = CudaError(e, "receiving a frame");
          break;
        }
        if (r->stop.load()) {
          s = absl::CancelledError("nccl transport stopped");
          break;
        }
        ncclResult_t state = ncclSuccess;
        ncclCommGetAsyncError(*comm, &state);
        if (state != ncclSuccess && state != ncclInProgress) {
          s = NcclError(state, "the communicator");
          break;
        }
        backoff.Wait();
      }
      if (!s.ok()) break;
      absl::StatusOr<NcclFrame> frame =
          DecodeNcclFrame(std::string_view(host_frame, options_.frame_bytes));
      if (!frame.ok()) {
        s = frame.status();
        break;
      }
      if (frame->sequence != sequence) {
        s = absl::DataLossError(
            absl::StrCat("frame ", frame->sequence, " arrived, expected ", sequence));
        break;
      }
      ++sequence;
      if (frame->type == NcclFrameType::kNotice) {
        Deliver(frame->payload);
        continue;
      }
      for (const NcclRun& run : frame->runs) {
        if (run.dst_offset > pool_bytes || run.bytes > pool_bytes - run.dst_offset) {
          s = absl::InvalidArgumentError(absl::StrCat("run [", run.dst_offset, ", +", run.bytes,
                                                      ") is outside the ", pool_bytes,
                                                      "-byte pool"));
          break;
        }
      }
      if (!s.ok()) break;
      if (frame->runs.empty()) continue;
      s = NcclError(ncclGroupStart(), "ncclGroupStart");
      ncclResult_t rr = ncclSuccess;
      for (size_t i = 0;
           s.ok() && (rr == ncclSuccess || rr == ncclInProgress) && i < frame->runs.size(); ++i) {
        rr = ncclRecv(pool + frame->runs[i].dst_offset, frame->runs[i].bytes, ncclUint8, 0, *comm,
                      stream);
      }
      if (rr != ncclSuccess && rr != ncclInProgress) {
        ncclGroupEnd();
        s = NcclError(rr, "ncclRecv");
        break;
      }
      if (s.ok()) s = CallComm(ncclGroupEnd(), *comm, forever, &r->stop, poll, "ncclGroupEnd");
    }
    ncclCommAbort(*comm);
    if (stream != nullptr) {
      cudaStreamSynchronize(stream);
      cudaStreamDestroy(stream);
    }
    if (event != nullptr) cudaEventDestroy(event);
    if (device_frame != nullptr) cudaFree(device_frame);
    if (host_frame != nullptr) cudaFreeHost(host_frame);
    return s;
  }

  void Deliver(const std::string& payload) {
    NoticeHandler handler;
    {
      absl::MutexLock lock(&info_mu_);
      handler = handler_;
    }
    // One notice at a time, whichever communicator it came from.
    absl::MutexLock lock(&deliver_mu_);
    if (handler) {
      handler(payload);
    } else {
      spdlog::warn("nccl transport: notice of {} bytes dropped: no handler", payload.size());
    }
  }

  const NcclKvTransportOptions options_;
  const uint64_t incarnation_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};

  absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;

  mutable absl::Mutex info_mu_;
  char* pool_ ABSL_GUARDED_BY(info_mu_) = nullptr;
  size_t pool_bytes_ ABSL_GUARDED_BY(info_mu_) = 0;
  NoticeHandler handler_ ABSL_GUARDED_BY(info_mu_);

  absl::Mutex deliver_mu_;

  mutable absl::Mutex receivers_mu_;
  std::vector<std::unique_ptr<Receiver>> receivers_ ABSL_GUARDED_BY(receivers_mu_);
  bool stop_receivers_ ABSL_GUARDED_BY(receivers_mu_) = false;

  // The loop thread only.
  std::map<std::string, std::unique_ptr<Connection>> connections_;
};

absl::StatusOr<std::unique_ptr<NcclKvTransport>> NcclKvTransport::Create(
    NcclKvTransportOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  absl::Status s = impl->Start();
  if (!s.ok()) return s;
  return std::unique_ptr<NcclKvTransport>(new NcclKvTransport(std::move(impl)));
}

NcclKvTransport::NcclKvTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NcclKvTransport::~NcclKvTransport() { impl_->Shutdown(); }

absl::Status NcclKvTransport::RegisterPool(void*, size_t) {
  return absl::UnimplementedError(
      "the nccl KV transport moves device pools: call "
      "RegisterDevicePool");
}
absl::Status NcclKvTransport::RegisterDevicePool(void* base, size_t bytes, int cuda_device) {
  return impl_->RegisterDevicePool(base, bytes, cuda_device);
}
std::string NcclKvTransport::address() const { return impl_->address(); }
std::string NcclKvTransport::pool_remote_key() const { return impl_->pool_remote_key(); }
uint64_t NcclKvTransport::pool_base() const { return impl_->pool_base(); }
uint64_t NcclKvTransport::incarnation() const { return impl_->incarnation(); }
void NcclKvTransport::SetNoticeHandler(NoticeHandler handler) {
  impl_->SetNoticeHandler(std::move(handler));
}
void NcclKvTransport::Write(const KvTarget& target, std::vector<KvCopy> copies, absl::Time deadline,
                            TransferDone done) {
  impl_->Write(target, std::move(copies), deadline, std::move(done));
}
void NcclKvTransport::Notify(const KvTarget& target, std::string payload, absl::Time deadline,
                             TransferDone done) {
  impl_->Notify(target, std::move(payload), deadline, std::move(done));
}
absl::Status NcclKvTransport::AcceptConnection(std::string_view nccl_unique_id,
                                               uint64_t writer_incarnation) {
  return impl_->AcceptConnection(nccl_unique_id, writer_incarnation);
}
int NcclKvTransport::num_connections() const { return impl_->num_connections(); }

}  // namespace tandem
