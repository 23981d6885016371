#include "common/transport/cuda/nccl_writer.h"

#include <string_view>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/transport/cuda/copy_plan.h"
#include "common/transport/cuda/nccl_comm.h"
#include "spdlog/spdlog.h"

namespace tandem::nccl_internal {

NcclWriter::NcclWriter(const NcclApi& nccl, const NcclKvTransportOptions& options,
                       uint64_t incarnation, const NcclLocalPool& pool)
    : nccl_(nccl), options_(options), incarnation_(incarnation), pool_(pool) {}

void NcclWriter::Start() {
  thread_ = std::thread([this] { Loop(); });
}

void NcclWriter::Shutdown() {
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
}

void NcclWriter::Write(const KvTarget& target, std::vector<KvCopy> copies, absl::Time deadline,
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

void NcclWriter::Notify(const KvTarget& target, std::string payload, absl::Time deadline,
                        TransferDone done) {
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

void NcclWriter::Post(Task task) {
  {
    absl::MutexLock lock(&mu_);
    if (!stop_) {
      queue_.push_back(std::move(task));
      return;
    }
  }
  task(true);
}

void NcclWriter::RunQueued() {
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

void NcclWriter::Loop() {
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

void NcclWriter::Queue(const KvTarget& target, std::shared_ptr<Op> op) {
  const NcclLocalPool::View local = pool_.Get();
  char* const pool = local.base;
  const size_t pool_bytes = local.bytes;
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
  if (options_.clock->Now() >= op->deadline) {
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

void NcclWriter::StartConnect(Connection* c) {
  ncclUniqueId id;
  ncclResult_t r = nccl_.GetUniqueId(&id);
  const std::string key = c->key;
  if (r != ncclSuccess) {
    const absl::Status s = NcclError(nccl_, r, "ncclGetUniqueId");
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
      absl::StatusOr<ncclComm_t> made =
          InitComm(nccl_, id, 0, deadline, cancel, options_.poll_interval);
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
        if (comm != nullptr) nccl_.CommAbort(comm);
        return;
      }
      OnConnected(key, s, comm);
    });
  });
}

void NcclWriter::OnConnected(const std::string& key, const absl::Status& status, ncclComm_t comm) {
  auto it = connections_.find(key);
  if (it == connections_.end()) {
    if (comm != nullptr) nccl_.CommAbort(comm);
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

void NcclWriter::Issue(Connection& c) {
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

absl::Status NcclWriter::IssueOp(Connection& c, Op& op, const std::vector<NcclFrame>& frames) {
  char* const pool = pool_.Get().base;
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
    s = CallComm(nccl_, nccl_.Send(device, options_.frame_bytes, ncclUint8, 1, c.comm, c.stream),
                 c.comm, op.deadline, &stopping_, options_.poll_interval, "ncclSend of a frame");
    if (!s.ok()) return s;
    if (!f.runs.empty()) {
      s = NcclError(nccl_, nccl_.GroupStart(), "ncclGroupStart");
      if (!s.ok()) return s;
      ncclResult_t r = ncclSuccess;
      for (size_t i = 0; (r == ncclSuccess || r == ncclInProgress) && i < f.runs.size(); ++i) {
        const KvCopy& copy = op.copies[run + i];
        r = nccl_.Send(pool + copy.src_offset, copy.bytes, ncclUint8, 1, c.comm, c.stream);
      }
      if (r != ncclSuccess && r != ncclInProgress) {
        nccl_.GroupEnd();
        return NcclError(nccl_, r, "ncclSend");
      }
      s = CallComm(nccl_, nccl_.GroupEnd(), c.comm, op.deadline, &stopping_, options_.poll_interval,
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

void NcclWriter::Progress() {
  const absl::Time now = options_.clock->Now();  // ops' deadlines
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
      nccl_.CommGetAsyncError(c.comm, &state);
      if (state != ncclSuccess && state != ncclInProgress) {
        error = NcclError(nccl_, state, absl::StrCat("nccl transport: communicator with ", c.tag));
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

void NcclWriter::FailConnection(Connection& c, const absl::Status& status, Op* culprit) {
  c.cancel.store(true);
  if (c.comm != nullptr) {
    nccl_.CommAbort(c.comm);
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

void NcclWriter::CloseConnection(Connections::iterator it, const absl::Status& status) {
  std::unique_ptr<Connection> c = std::move(it->second);
  connections_.erase(it);
  if (!status.ok()) FailConnection(*c, status, nullptr);
  if (c->connector.joinable()) c->connector.join();
  if (c->comm != nullptr) nccl_.CommAbort(c->comm);
  if (c->stream != nullptr) {
    cudaStreamSynchronize(c->stream);
    cudaStreamDestroy(c->stream);
  }
  for (cudaEvent_t e : c->spare_events) cudaEventDestroy(e);
  if (c->device_frames != nullptr) cudaFree(c->device_frames);
  if (c->host_frames != nullptr) cudaFreeHost(c->host_frames);
}

}  // namespace tandem::nccl_internal
