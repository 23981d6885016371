#include "common/transport/ucx_transport.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <random>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "spdlog/spdlog.h"

namespace tandem {

namespace {

// Active message id of notices.
constexpr unsigned kNoticeAmId = 0x7a;

// Runs on the progress thread; `cancelled` when the transport stopped before running it.
using Task = std::function<void(bool cancelled)>;

absl::Status UcsStatus(ucs_status_t s, const std::string& what) {
  std::string msg = absl::StrCat(what, ": ", ucs_status_string(s));
  switch (s) {
    case UCS_OK:
      return absl::OkStatus();
    case UCS_ERR_CANCELED:
      return absl::CancelledError(msg);
    case UCS_ERR_TIMED_OUT:
    case UCS_ERR_ENDPOINT_TIMEOUT:
      return absl::DeadlineExceededError(msg);
    case UCS_ERR_INVALID_PARAM:
    case UCS_ERR_INVALID_ADDR:
      return absl::InvalidArgumentError(msg);
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_REJECTED:
    case UCS_ERR_IO_ERROR:
    case UCS_ERR_NOT_CONNECTED:
    case UCS_ERR_UNSUPPORTED:
      return absl::UnavailableError(msg);
    case UCS_ERR_NO_MEMORY:
    case UCS_ERR_EXCEEDS_LIMIT:
      return absl::ResourceExhaustedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

uint64_t RandomIncarnation() {
  std::random_device rd;
  uint64_t v = 0;
  while (v == 0) v = (uint64_t{rd()} << 32) ^ rd();
  return v;
}

// A short printable id of a worker address, for messages.
std::string AddressTag(const std::string& address) {
  uint64_t h = 1469598103934665603ull;
  for (char c : address) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return absl::StrCat("ucx-peer-", absl::Hex(h & 0xffffffffull));
}

}  // namespace

class UcxTransport::Impl {
 public:
  explicit Impl(UcxTransportOptions options)
      : options_(std::move(options)), incarnation_(RandomIncarnation()) {}

  ~Impl() { Stop(); }

  absl::Status Start() {
    absl::Notification ready;
    absl::Status init_status;
    thread_ = std::thread([this, &ready, &init_status] {
      absl::Status s = Init();
      const bool ok = s.ok();
      init_status = std::move(s);
      ready.Notify();  // `ready` and `init_status` are gone after this
      if (ok) Loop();
      Teardown();
    });
    ready.WaitForNotification();
    if (!init_status.ok()) {
      thread_.join();
      return init_status;
    }
    started_ = true;
    return absl::OkStatus();
  }

  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
      stop_ = true;
    }
    Wake();
    if (thread_.joinable()) thread_.join();
  }

  // Queues `task` for the progress thread; runs task(true) here when the transport is stopping.
  void Post(Task task) {
    bool wake = false;
    {
      absl::MutexLock lock(&mu_);
      if (!stop_) {
        queue_.push_back(std::move(task));
        wake = sleeping_;
        task = nullptr;
      }
    }
    if (task) {
      task(true);
      return;
    }
    if (wake) Wake();
  }

  // Runs `fn` on the progress thread and waits for it.
  absl::Status RunSync(std::function<absl::Status()> fn) {
    absl::Notification done;
    absl::Status status;
    Post([&](bool cancelled) {
      status = cancelled ? absl::CancelledError("ucx transport stopped") : fn();
      done.Notify();
    });
    done.WaitForNotification();
    return status;
  }

  absl::Status RegisterPool(void* base, size_t bytes) {
    if (base == nullptr || bytes == 0) return absl::InvalidArgumentError("empty pool");
    return RunSync([&] { return MapPool(base, bytes, /*allocate=*/false); });
  }

  absl::StatusOr<void*> AllocatePool(size_t bytes) {
    if (bytes == 0) return absl::InvalidArgumentError("empty pool");
    absl::Status s = RunSync([&] { return MapPool(nullptr, bytes, /*allocate=*/true); });
    if (!s.ok()) return s;
    void* base = reinterpret_cast<void*>(pool_base());
    std::memset(base, 0, bytes);
    return base;
  }

  absl::StatusOr<std::string> DescribeEndpoint(const std::string& address) {
    std::string text;
    absl::Status s = RunSync([&]() -> absl::Status {
      absl::StatusOr<Endpoint*> ep = GetEndpoint(address);
      if (!ep.ok()) return ep.status();
      char* buf = nullptr;
      size_t len = 0;
      FILE* f = open_memstream(&buf, &len);
      if (f == nullptr) return absl::InternalError("open_memstream failed");
      ucp_ep_print_info((*ep)->ep, f);
      std::fclose(f);
      text.assign(buf, len);
      std::free(buf);
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    return text;
  }

  std::string address() const { return address_; }
  uint64_t incarnation() const { return incarnation_; }

  std::string pool_remote_key() const {
    absl::MutexLock lock(&info_mu_);
    return pool_key_;
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
    auto d = std::make_shared<TransferDone>(std::move(done));
    Post([this, target, copies = std::move(copies), deadline, d](bool cancelled) mutable {
      if (cancelled) {
        (*d)(absl::CancelledError("ucx transport stopped"));
        return;
      }
      StartWrite(target, std::move(copies), deadline, std::move(*d));
    });
  }

  void Notify(const KvTarget& target, std::string payload, absl::Time deadline, TransferDone done) {
    auto d = std::make_shared<TransferDone>(std::move(done));
    Post([this, target, payload = std::move(payload), deadline, d](bool cancelled) mutable {
      if (cancelled) {
        (*d)(absl::CancelledError("ucx transport stopped"));
        return;
      }
      StartNotify(target, std::move(payload), deadline, std::move(*d));
    });
  }

 private:
  struct Endpoint;

  // One Write or Notify in flight. Lives until all of its UCX requests completed, which may be
  // after `done` ran (a deadline that passed while only a flush was pending).
  struct Op {
    Impl* impl = nullptr;
    Endpoint* ep = nullptr;
    bool is_notify = false;
    int stage = 0;  // notify: 0 = flushing earlier writes, 1 = notice sent
    absl::Time deadline;
    TransferDone done;
    std::string payload;
    int puts_outstanding = 0;   // requests that may still read local memory
    int other_outstanding = 0;  // flushes and the notice
    absl::Status status;
    bool finished = false;  // `done` ran
    bool queued = false;    // on ready_
    // Outstanding UCX requests (released at teardown if UCX never completes them).
    absl::flat_hash_set<void*> requests;
    int outstanding() const { return puts_outstanding + other_outstanding; }
  };

  struct Endpoint {
    Impl* impl = nullptr;
    std::string address;
    std::string tag;
    ucp_ep_h ep = nullptr;
    absl::flat_hash_map<std::string, ucp_rkey_h> rkeys;
    absl::flat_hash_set<Op*> ops;
    bool failed = false;  // error callback ran, or we gave up on it
    absl::Status error;
    // Created with UCP_ERR_HANDLING_MODE_PEER: a failure is reported, and a forced close cancels
    // outstanding requests. Without, UCX can neither (shared memory in UCX 1.13).
    bool peer_errors = true;
    bool closing = false;
    bool closed = false;
    bool abandoned = false;  // given up on without peer error handling; may never close
    void* close_request = nullptr;
  };

  // A rendezvous notice being received.
  struct PendingNotice {
    Impl* impl = nullptr;
    std::string data;
    void* request = nullptr;
  };

  // ---- progress thread only from here ----

  absl::Status Init() {
    ucp_config_t* config = nullptr;
    ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
    if (s != UCS_OK) return UcsStatus(s, "ucp_config_read");
    if (!options_.tls.empty()) {
      s = ucp_config_modify(config, "TLS", options_.tls.c_str());
      if (s != UCS_OK) {
        ucp_config_release(config);
        return UcsStatus(s, absl::StrCat("UCX TLS '", options_.tls, "'"));
      }
    }
    for (const auto& [key, value] : options_.config) {
      s = ucp_config_modify(config, key.c_str(), value.c_str());
      if (s != UCS_OK) {
        ucp_config_release(config);
        return UcsStatus(s, absl::StrCat("UCX config ", key, "=", value));
      }
    }
    ucp_params_t params{};
    params.field_mask =
        UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
    params.features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    params.mt_workers_shared = 0;
    params.name = options_.name.c_str();
    s = ucp_init(&params, config, &context_);
    ucp_config_release(config);
    if (s != UCS_OK) return UcsStatus(s, "ucp_init");

    ucp_worker_params_t wparams{};
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_NAME;
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    wparams.name = options_.name.c_str();
    s = ucp_worker_create(context_, &wparams, &worker_);
    if (s != UCS_OK) return UcsStatus(s, "ucp_worker_create");

    ucp_address_t* addr = nullptr;
    size_t addr_len = 0;
    s = ucp_worker_get_address(worker_, &addr, &addr_len);
    if (s != UCS_OK) return UcsStatus(s, "ucp_worker_get_address");
    address_.assign(reinterpret_cast<const char*>(addr), addr_len);
    ucp_worker_release_address(worker_, addr);

    ucp_am_handler_param_t am{};
    am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                    UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
    am.id = kNoticeAmId;
    am.flags = UCP_AM_FLAG_WHOLE_MSG;
    am.cb = &Impl::AmRecvCb;
    am.arg = this;
    s = ucp_worker_set_am_recv_handler(worker_, &am);
    if (s != UCS_OK) return UcsStatus(s, "ucp_worker_set_am_recv_handler");

    cmd_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (cmd_fd_ < 0) return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) {
      return absl::InternalError(absl::StrCat("epoll_create1: ", std::strerror(errno)));
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = cmd_fd_;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, cmd_fd_, &ev);
    s = ucp_worker_get_efd(worker_, &ucx_fd_);
    if (s == UCS_OK) {
      ev.data.fd = ucx_fd_;
      if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, ucx_fd_, &ev) != 0) ucx_fd_ = -1;
    } else {
      ucx_fd_ = -1;
    }
    if (ucx_fd_ < 0) {
      spdlog::warn("ucx transport: no worker event fd ({}); polling every millisecond",
                   ucs_status_string(s));
    }
    return absl::OkStatus();
  }

  void Loop() {
    Clock* const real = Clock::Real();  // pacing: real time
    absl::Time last_busy = real->Now();
    while (true) {
      bool busy = RunCommands();
      {
        absl::MutexLock lock(&mu_);
        if (stop_) break;
      }
      for (int i = 0; i < 256 && ucp_worker_progress(worker_) != 0; ++i) busy = true;
      busy |= AfterProgress();
      absl::Time now = real->Now();
      CheckDeadlines(options_.clock->Now());
      busy |= AfterProgress();
      if (busy) {
        last_busy = now;
        continue;
      }
      const bool in_flight =
          NumActiveOps() > 0 || NumActiveClosing() > 0 || !pending_notices_.empty();
      if (in_flight && now - last_busy < options_.busy_poll) continue;
      Sleep(options_.clock->Now());  // wakes by the first op's deadline
      last_busy = real->Now();
    }
  }

  // Delivers notices, advances finished operations, handles failed endpoints. True if it did
  // anything.
  bool AfterProgress() {
    bool any = false;
    while (!ready_.empty() || !failed_eps_.empty() || !deliveries_.empty()) {
      any = true;
      HandleFailedEndpoints();
      while (!ready_.empty()) {
        Op* op = ready_.back();
        ready_.pop_back();
        op->queued = false;
        Advance(op);
      }
      if (!deliveries_.empty()) {
        std::vector<std::string> deliveries;
        deliveries.swap(deliveries_);
        NoticeHandler handler;
        {
          absl::MutexLock lock(&info_mu_);
          handler = handler_;
        }
        for (const std::string& payload : deliveries) {
          if (handler) {
            handler(payload);
          } else {
            spdlog::warn("ucx transport: notice of {} bytes dropped: no handler", payload.size());
          }
        }
      }
    }
    any |= Reap();
    return any;
  }

  // `now` is on options_.clock, the ops' deadlines' clock.
  void Sleep(absl::Time now) {
    {
      absl::MutexLock lock(&mu_);
      if (!queue_.empty() || stop_) return;
      sleeping_ = true;
    }
    bool armed = true;
    if (ucx_fd_ >= 0) {
      ucs_status_t s = ucp_worker_arm(worker_);
      armed = (s == UCS_OK);
    }
    if (armed) {
      int timeout_ms = 100;
      if (ucx_fd_ < 0) timeout_ms = 1;
      for (Op* op : ops_) {
        if (op->finished) continue;
        const int64_t ms = absl::ToInt64Milliseconds(op->deadline - now) + 1;
        timeout_ms = static_cast<int>(std::clamp<int64_t>(ms, 0, timeout_ms));
      }
      if (NumActiveClosing() > 0) timeout_ms = std::min(timeout_ms, 10);
      epoll_event events[4];
      epoll_wait(epoll_fd_, events, 4, timeout_ms);
      uint64_t value;
      while (read(cmd_fd_, &value, sizeof(value)) > 0) {
      }
    }
    absl::MutexLock lock(&mu_);
    sleeping_ = false;
  }

  // Operations whose `done` has not run yet.
  size_t NumActiveOps() const {
    size_t n = 0;
    for (const Op* op : ops_) n += op->finished ? 0 : 1;
    return n;
  }
  // Endpoints closing that are expected to finish closing.
  size_t NumActiveClosing() const {
    size_t n = 0;
    for (const auto& ep : closing_) n += (ep->closed || ep->abandoned) ? 0 : 1;
    return n;
  }

  void Wake() {
    if (cmd_fd_ < 0) return;
    const uint64_t one = 1;
    ssize_t n = write(cmd_fd_, &one, sizeof(one));
    (void)n;
  }

  // Runs queued commands. True if there were any.
  bool RunCommands() {
    std::deque<Task> tasks;
    {
      absl::MutexLock lock(&mu_);
      tasks.swap(queue_);
    }
    for (Task& t : tasks) t(false);
    return !tasks.empty();
  }

  absl::Status MapPool(void* base, size_t bytes, bool allocate) {
    {
      absl::MutexLock lock(&info_mu_);
      if (pool_memh_ != nullptr) return absl::FailedPreconditionError("pool already registered");
    }
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                    UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mp.address = base;
    mp.length = bytes;
    mp.flags = allocate ? UCP_MEM_MAP_ALLOCATE : 0;
    ucp_mem_h memh = nullptr;
    ucs_status_t s = ucp_mem_map(context_, &mp, &memh);
    if (s != UCS_OK) return UcsStatus(s, "ucp_mem_map");
    if (allocate) {
      ucp_mem_attr_t attr{};
      attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
      s = ucp_mem_query(memh, &attr);
      if (s != UCS_OK || attr.length < bytes) {
        ucp_mem_unmap(context_, memh);
        return UcsStatus(s == UCS_OK ? UCS_ERR_NO_MEMORY : s, "ucp_mem_query");
      }
      base = attr.address;
    }
    void* rkey_buf = nullptr;
    size_t rkey_len = 0;
    s = ucp_rkey_pack(context_, memh, &rkey_buf, &rkey_len);
    if (s != UCS_OK) {
      ucp_mem_unmap(context_, memh);
      return UcsStatus(s, "ucp_rkey_pack");
    }
    absl::MutexLock lock(&info_mu_);
    pool_key_.assign(static_cast<const char*>(rkey_buf), rkey_len);
    ucp_rkey_buffer_release(rkey_buf);
    pool_memh_ = memh;
    pool_ = static_cast<char*>(base);
    pool_bytes_ = bytes;
    return absl::OkStatus();
  }

  absl::StatusOr<Endpoint*> GetEndpoint(const std::string& address) {
    auto it = endpoints_.find(address);
    if (it != endpoints_.end()) return it->second.get();
    if (address.empty()) return absl::InvalidArgumentError("empty ucx address");
    auto ep = std::make_unique<Endpoint>();
    ep->impl = this;
    ep->address = address;
    ep->tag = AddressTag(address);
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                        UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(ep->address.data());
    params.err_mode =
        options_.peer_error_handling ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
    params.err_handler.cb = &Impl::EpErrorCb;
    params.err_handler.arg = ep.get();
    ucs_status_t s = ucp_ep_create(worker_, &params, &ep->ep);
    if (s == UCS_ERR_UNREACHABLE && params.err_mode == UCP_ERR_HANDLING_MODE_PEER) {
      // No transport to this peer detects peer failure (UCX 1.13's shared memory): go on
      // without, and rely on deadlines.
      params.err_mode = UCP_ERR_HANDLING_MODE_NONE;
      s = ucp_ep_create(worker_, &params, &ep->ep);
      if (s == UCS_OK && !warned_no_peer_errors_) {
        warned_no_peer_errors_ = true;
        spdlog::warn(
            "ucx transport: no transport to {} detects peer failure; a dead peer is noticed "
            "only at each operation's deadline",
            ep->tag);
      }
    }
    if (s != UCS_OK) return UcsStatus(s, absl::StrCat("ucp_ep_create to ", ep->tag));
    ep->peer_errors = params.err_mode == UCP_ERR_HANDLING_MODE_PEER;
    Endpoint* raw = ep.get();
    endpoints_.emplace(address, std::move(ep));
    return raw;
  }

  absl::StatusOr<ucp_rkey_h> GetRkey(Endpoint* ep, const std::string& key) {
    auto it = ep->rkeys.find(key);
    if (it != ep->rkeys.end()) return it->second;
    if (key.empty()) return absl::InvalidArgumentError("empty remote key");
    ucp_rkey_h rkey = nullptr;
    ucs_status_t s = ucp_ep_rkey_unpack(ep->ep, key.data(), &rkey);
    if (s != UCS_OK) return UcsStatus(s, absl::StrCat("ucp_ep_rkey_unpack for ", ep->tag));
    ep->rkeys.emplace(key, rkey);
    return rkey;
  }

  // Common start of Write/Notify: deadline and endpoint. Returns the op registered with its
  // endpoint, or runs `done` with the error and returns null.
  Op* NewOp(const std::string& address, absl::Time deadline, TransferDone& done, bool notify) {
    if (options_.clock->Now() >= deadline) {
      done(absl::DeadlineExceededError(notify ? "ucx notice: deadline passed before sending"
                                              : "ucx write: deadline passed before issuing"));
      return nullptr;
    }
    absl::StatusOr<Endpoint*> ep = GetEndpoint(address);
    if (!ep.ok()) {
      done(ep.status());
      return nullptr;
    }
    Op* op = new Op();
    op->impl = this;
    op->ep = *ep;
    op->is_notify = notify;
    op->deadline = deadline;
    op->done = std::move(done);
    (*ep)->ops.insert(op);
    ops_.insert(op);
    return op;
  }

  void StartWrite(const KvTarget& target, std::vector<KvCopy> copies, absl::Time deadline,
                  TransferDone done) {
    char* pool = nullptr;
    size_t pool_bytes = 0;
    ucp_mem_h memh = nullptr;
    {
      absl::MutexLock lock(&info_mu_);
      pool = pool_;
      pool_bytes = pool_bytes_;
      memh = pool_memh_;
    }
    if (pool == nullptr) {
      done(absl::FailedPreconditionError("ucx write: no pool registered"));
      return;
    }
    for (const KvCopy& c : copies) {
      if (c.src_offset > pool_bytes || c.bytes > pool_bytes - c.src_offset) {
        done(absl::InvalidArgumentError(absl::StrCat("ucx write: source range [", c.src_offset,
                                                     ", +", c.bytes, ") is outside the ",
                                                     pool_bytes, "-byte pool")));
        return;
      }
    }
    Op* op = NewOp(target.address, deadline, done, /*notify=*/false);
    if (op == nullptr) return;
    absl::StatusOr<ucp_rkey_h> rkey = GetRkey(op->ep, target.remote_key);
    if (!rkey.ok()) {
      op->status = rkey.status();
      Advance(op);
      return;
    }
    ucp_request_param_t p{};
    p.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMH;
    p.cb.send = &Impl::PutCb;
    p.user_data = op;
    p.memh = memh;
    for (const KvCopy& c : copies) {
      if (c.bytes == 0) continue;
      ucs_status_ptr_t r = ucp_put_nbx(op->ep->ep, pool + c.src_offset, c.bytes,
                                       target.remote_base + c.dst_offset, *rkey, &p);
      if (r == nullptr) continue;
      if (UCS_PTR_IS_ERR(r)) {
        op->status = UcsStatus(UCS_PTR_STATUS(r), absl::StrCat("ucp_put_nbx to ", op->ep->tag));
        break;
      }
      ++op->puts_outstanding;
      op->requests.insert(r);
    }
    if (op->status.ok()) IssueFlush(op);
    Advance(op);
  }

  void StartNotify(const KvTarget& target, std::string payload, absl::Time deadline,
                   TransferDone done) {
    Op* op = NewOp(target.address, deadline, done, /*notify=*/true);
    if (op == nullptr) return;
    op->payload = std::move(payload);
    IssueFlush(op);  // the notice follows every earlier write to this peer
    Advance(op);
  }

  void IssueFlush(Op* op) {
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.send = &Impl::OtherCb;
    p.user_data = op;
    ucs_status_ptr_t r = ucp_ep_flush_nbx(op->ep->ep, &p);
    if (r == nullptr) return;
    if (UCS_PTR_IS_ERR(r)) {
      op->status.Update(
          UcsStatus(UCS_PTR_STATUS(r), absl::StrCat("ucp_ep_flush_nbx to ", op->ep->tag)));
      return;
    }
    ++op->other_outstanding;
    op->requests.insert(r);
  }

  void IssueNotice(Op* op) {
    ucp_request_param_t p{};
    p.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    p.cb.send = &Impl::OtherCb;
    p.user_data = op;
    switch (options_.notice_protocol) {
      case UcxTransportOptions::NoticeProtocol::kAuto:
        p.flags = 0;
        break;
      case UcxTransportOptions::NoticeProtocol::kEager:
        p.flags = UCP_AM_SEND_FLAG_EAGER;
        break;
      case UcxTransportOptions::NoticeProtocol::kRendezvous:
        p.flags = UCP_AM_SEND_FLAG_RNDV;
        break;
    }
    ucs_status_ptr_t r = ucp_am_send_nbx(op->ep->ep, kNoticeAmId, nullptr, 0, op->payload.data(),
                                         op->payload.size(), &p);
    if (r == nullptr) return;
    if (UCS_PTR_IS_ERR(r)) {
      op->status.Update(
          UcsStatus(UCS_PTR_STATUS(r), absl::StrCat("ucp_am_send_nbx to ", op->ep->tag)));
      return;
    }
    ++op->other_outstanding;
    op->requests.insert(r);
  }

  // Moves an operation on once none of its requests is outstanding: a notice whose earlier
  // writes are flushed gets sent; anything else finishes.
  void Advance(Op* op) {
    if (op->outstanding() > 0) return;
    if (!op->finished && op->status.ok() && op->is_notify && op->stage == 0 && !op->ep->failed) {
      op->stage = 1;
      IssueNotice(op);
      if (op->status.ok()) IssueFlush(op);
      if (op->outstanding() > 0) return;
    }
    if (!op->finished && op->status.ok() && op->ep->failed) op->status = op->ep->error;
    Finish(op);
    op->ep->ops.erase(op);
    ops_.erase(op);
    delete op;
  }

  void Finish(Op* op) {
    if (op->finished) return;
    op->finished = true;
    TransferDone done = std::move(op->done);
    done(op->status);
  }

  void MarkReady(Op* op) {
    if (op->outstanding() > 0 || op->queued) return;
    op->queued = true;
    ready_.push_back(op);
  }

  static void PutCb(void* request, ucs_status_t status, void* user_data) {
    Op* op = static_cast<Op*>(user_data);
    op->requests.erase(request);
    ucp_request_free(request);
    --op->puts_outstanding;
    if (status != UCS_OK) {
      op->status.Update(UcsStatus(status, absl::StrCat("put to ", op->ep->tag)));
    }
    op->impl->MarkReady(op);
  }

  static void OtherCb(void* request, ucs_status_t status, void* user_data) {
    Op* op = static_cast<Op*>(user_data);
    op->requests.erase(request);
    ucp_request_free(request);
    --op->other_outstanding;
    if (status != UCS_OK) {
      op->status.Update(
          UcsStatus(status, absl::StrCat(op->is_notify ? "notice to " : "flush to ", op->ep->tag)));
    }
    op->impl->MarkReady(op);
  }

  static void EpErrorCb(void* arg, ucp_ep_h, ucs_status_t status) {
    Endpoint* ep = static_cast<Endpoint*>(arg);
    if (ep->failed) return;
    ep->failed = true;
    ep->error = absl::UnavailableError(
        absl::StrCat("connection to ", ep->tag, " failed: ", ucs_status_string(status)));
    ep->impl->failed_eps_.push_back(ep);
  }

  static void CloseCb(void* request, ucs_status_t, void* user_data) {
    Endpoint* ep = static_cast<Endpoint*>(user_data);
    ucp_request_free(request);
    ep->close_request = nullptr;
    ep->closed = true;
  }

  static ucs_status_t AmRecvCb(void* arg, const void*, size_t, void* data, size_t length,
                               const ucp_am_recv_param_t* param) {
    Impl* self = static_cast<Impl*>(arg);
    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) == 0) {
      self->deliveries_.emplace_back(static_cast<const char*>(data), length);
      return UCS_OK;
    }
    auto* pending = new PendingNotice{self, std::string(length, '\0')};
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv_am = &Impl::AmDataCb;
    p.user_data = pending;
    ucs_status_ptr_t r =
        ucp_am_recv_data_nbx(self->worker_, data, pending->data.data(), length, &p);
    if (r == nullptr) {
      self->deliveries_.push_back(std::move(pending->data));
      delete pending;
    } else if (UCS_PTR_IS_ERR(r)) {
      spdlog::error("ucx transport: receiving a {}-byte notice failed: {}", length,
                    ucs_status_string(UCS_PTR_STATUS(r)));
      delete pending;
    } else {
      pending->request = r;
      self->pending_notices_.insert(pending);
    }
    return UCS_OK;
  }

  static void AmDataCb(void* request, ucs_status_t status, size_t length, void* user_data) {
    auto* pending = static_cast<PendingNotice*>(user_data);
    ucp_request_free(request);
    Impl* self = pending->impl;
    self->pending_notices_.erase(pending);
    if (status == UCS_OK) {
      pending->data.resize(length);
      self->deliveries_.push_back(std::move(pending->data));
    } else {
      spdlog::error("ucx transport: receiving a notice failed: {}", ucs_status_string(status));
    }
    delete pending;
  }

  // Takes failed endpoints out of the cache and closes them by force: their requests complete
  // with errors, and so do their operations.
  void HandleFailedEndpoints() {
    while (!failed_eps_.empty()) {
      Endpoint* ep = failed_eps_.back();
      failed_eps_.pop_back();
      spdlog::warn("ucx transport: {}", std::string(ep->error.message()));
      Retire(ep);
    }
  }

  // Removes `ep` from the cache, fails its operations with its error and closes it. With peer
  // error handling the close is forced: outstanding requests complete (cancelled) and their
  // operations finish then. Without, UCX cannot cancel them: the operations fail now, their
  // requests stay with UCX (completing if the peer resumes, discarded with the worker), and the
  // close waits for the peer.
  void Retire(Endpoint* ep) {
    auto it = endpoints_.find(ep->address);
    if (it != endpoints_.end() && it->second.get() == ep) {
      closing_.push_back(std::move(it->second));
      endpoints_.erase(it);
    }
    for (Op* op : ep->ops) {
      if (!op->finished) op->status.Update(ep->error);
      if (!ep->peer_errors) Finish(op);
      MarkReady(op);
    }
    if (!ep->peer_errors && ep->error.code() != absl::StatusCode::kCancelled) ep->abandoned = true;
    if (ep->closing) return;
    ep->closing = true;
    ucp_request_param_t p{};
    p.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = ep->peer_errors ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    p.cb.send = &Impl::CloseCb;
    p.user_data = ep;
    ucs_status_ptr_t r = ucp_ep_close_nbx(ep->ep, &p);
    if (UCS_PTR_IS_ERR(r)) {
      spdlog::warn("ucx transport: closing the endpoint to {}: {}", ep->tag,
                   ucs_status_string(UCS_PTR_STATUS(r)));
    }
    if (r == nullptr || UCS_PTR_IS_ERR(r)) {
      ep->closed = true;
    } else {
      ep->close_request = r;
    }
  }

  // Deletes closed endpoints whose operations are all gone. True if it deleted any.
  bool Reap() {
    bool any = false;
    for (size_t i = 0; i < closing_.size();) {
      Endpoint* ep = closing_[i].get();
      if (ep->closed && ep->ops.empty()) {
        for (auto& [key, rkey] : ep->rkeys) ucp_rkey_destroy(rkey);
        closing_.erase(closing_.begin() + i);
        any = true;
      } else {
        ++i;
      }
    }
    return any;
  }

  void CheckDeadlines(absl::Time now) {
    std::vector<Op*> expired;
    for (Op* op : ops_) {
      if (!op->finished && now >= op->deadline) expired.push_back(op);
    }
    for (Op* op : expired) {
      if (op->finished) continue;  // finished by an earlier one's Retire
      absl::Status deadline = absl::DeadlineExceededError(
          absl::StrCat(op->is_notify ? "ucx notice to " : "ucx write to ", op->ep->tag,
                       " ran past its deadline"));
      op->status = deadline;
      if (op->puts_outstanding > 0 && !op->ep->failed) {
        // Puts may still read the caller's memory: stop them all by closing the endpoint (for
        // an endpoint without peer error handling, abandon it: see Retire).
        op->ep->failed = true;
        op->ep->error = absl::UnavailableError(absl::StrCat(
            "connection to ", op->ep->tag, " closed: a write to it ran past its deadline"));
        Retire(op->ep);
        op->status = deadline;
      } else if (op->puts_outstanding == 0) {
        Finish(op);  // only flushes or the notice left: nothing reads local memory
      }
    }
  }

  void Teardown() {
    // Fail what is queued, then everything in flight.
    while (RunCommandsCancelled()) {
    }
    std::vector<Endpoint*> eps;
    for (auto& [address, ep] : endpoints_) eps.push_back(ep.get());
    for (Endpoint* ep : eps) {
      ep->failed = true;
      ep->error = absl::CancelledError("ucx transport stopped");
      Retire(ep);
    }
    // Wait for forced closes (quick) and for flushing closes of endpoints whose peer has not
    // been given up on; an endpoint abandoned past a deadline may never close.
    auto waiting = [this] {
      for (const auto& ep : closing_) {
        if (!ep->closed && (ep->peer_errors || !ep->abandoned)) return true;
      }
      for (Op* op : ops_) {
        if (!op->finished) return true;
      }
      return false;
    };
    Clock* const real = Clock::Real();  // UCX closes endpoints in real time
    const absl::Time give_up = real->Now() + options_.shutdown_timeout;
    while (worker_ != nullptr && waiting() && real->Now() < give_up) {
      ucp_worker_progress(worker_);
      AfterProgress();
      RunCommandsCancelled();
    }
    for (Op* op : std::vector<Op*>(ops_.begin(), ops_.end())) {
      op->status.Update(absl::CancelledError("ucx transport stopped"));
      Finish(op);
    }
    if (waiting()) {
      spdlog::warn("ucx transport: {} endpoints did not finish closing", closing_.size());
    }
    // Release what UCX still holds so that destroying the worker calls nothing of ours.
    for (Op* op : ops_) {
      for (void* r : op->requests) ucp_request_free(r);
      op->requests.clear();
    }
    for (auto& ep : closing_) {
      if (ep->close_request != nullptr) ucp_request_free(ep->close_request);
      ep->close_request = nullptr;
    }
    for (PendingNotice* p : pending_notices_) {
      if (p->request != nullptr) ucp_request_free(p->request);
      p->request = nullptr;
    }
    for (auto& ep : closing_) {
      for (auto& [key, rkey] : ep->rkeys) ucp_rkey_destroy(rkey);
      ep->rkeys.clear();
    }
    if (worker_ != nullptr) ucp_worker_destroy(worker_);
    worker_ = nullptr;
    {
      absl::MutexLock lock(&info_mu_);
      if (pool_memh_ != nullptr) ucp_mem_unmap(context_, pool_memh_);
      pool_memh_ = nullptr;
      pool_ = nullptr;
    }
    for (PendingNotice* p : pending_notices_) delete p;
    pending_notices_.clear();
    for (Op* op : ops_) delete op;
    ops_.clear();
    closing_.clear();
    if (context_ != nullptr) ucp_cleanup(context_);
    context_ = nullptr;
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;  // Post() fails inline from now on
    }
    while (RunCommandsCancelled()) {
    }
    if (epoll_fd_ >= 0) close(epoll_fd_);
    epoll_fd_ = -1;
    // cmd_fd_ stays open until the Impl is gone: Wake() may still write to it.
  }

  bool RunCommandsCancelled() {
    std::deque<Task> tasks;
    {
      absl::MutexLock lock(&mu_);
      tasks.swap(queue_);
    }
    for (Task& t : tasks) t(true);
    return !tasks.empty();
  }

 public:
  void CloseFds() {
    if (cmd_fd_ >= 0) close(cmd_fd_);
    cmd_fd_ = -1;
  }
  bool started() const { return started_; }

 private:
  const UcxTransportOptions options_;
  const uint64_t incarnation_;
  std::string address_;  // set by Init, read-only after
  std::thread thread_;
  bool started_ = false;

  // Command queue.
  absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool sleeping_ ABSL_GUARDED_BY(mu_) = false;
  int cmd_fd_ = -1;

  // Written on the progress thread, read anywhere.
  mutable absl::Mutex info_mu_;
  std::string pool_key_ ABSL_GUARDED_BY(info_mu_);
  char* pool_ ABSL_GUARDED_BY(info_mu_) = nullptr;
  size_t pool_bytes_ ABSL_GUARDED_BY(info_mu_) = 0;
  ucp_mem_h pool_memh_ ABSL_GUARDED_BY(info_mu_) = nullptr;
  NoticeHandler handler_ ABSL_GUARDED_BY(info_mu_);

  // Progress thread only.
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int ucx_fd_ = -1;
  int epoll_fd_ = -1;
  bool warned_no_peer_errors_ = false;
  absl::flat_hash_map<std::string, std::unique_ptr<Endpoint>> endpoints_;
  std::vector<std::unique_ptr<Endpoint>> closing_;
  absl::flat_hash_set<Op*> ops_;
  std::vector<Op*> ready_;
  std::vector<Endpoint*> failed_eps_;
  std::vector<std::string> deliveries_;
  absl::flat_hash_set<PendingNotice*> pending_notices_;
};

absl::StatusOr<std::unique_ptr<UcxTransport>> UcxTransport::Create(UcxTransportOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  absl::Status s = impl->Start();
  if (!s.ok()) {
    impl->CloseFds();
    return s;
  }
  return std::unique_ptr<UcxTransport>(new UcxTransport(std::move(impl)));
}

UcxTransport::UcxTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

UcxTransport::~UcxTransport() {
  impl_->Stop();
  impl_->CloseFds();
}

absl::Status UcxTransport::RegisterPool(void* base, size_t bytes) {
  return impl_->RegisterPool(base, bytes);
}

absl::StatusOr<void*> UcxTransport::AllocatePool(size_t bytes) {
  return impl_->AllocatePool(bytes);
}

std::string UcxTransport::address() const { return impl_->address(); }
std::string UcxTransport::pool_remote_key() const { return impl_->pool_remote_key(); }
uint64_t UcxTransport::pool_base() const { return impl_->pool_base(); }
uint64_t UcxTransport::incarnation() const { return impl_->incarnation(); }

void UcxTransport::SetNoticeHandler(NoticeHandler handler) {
  impl_->SetNoticeHandler(std::move(handler));
}

void UcxTransport::Write(const KvTarget& target, std::vector<KvCopy> copies, absl::Time deadline,
                         TransferDone done) {
  impl_->Write(target, std::move(copies), deadline, std::move(done));
}

void UcxTransport::Notify(const KvTarget& target, std::string payload, absl::Time deadline,
                          TransferDone done) {
  impl_->Notify(target, std::move(payload), deadline, std::move(done));
}

absl::StatusOr<std::string> UcxTransport::DescribeEndpoint(const std::string& address) {
  return impl_->DescribeEndpoint(address);
}

}  // namespace tandem
