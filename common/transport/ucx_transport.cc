// UcxTransport (see ucx_transport.h): the public class, and the Impl that puts the parts together
// on the progress thread and fixes the order of start-up and teardown.
//
// Owns the UCP context and worker, the registered pool (its memory handle and packed key), and the
// parts: the progress loop (ucx_progress_loop: thread, command queue, pacing), the endpoint cache
// (ucx_endpoint_cache), the operations in flight (ucx_ops) and the notice receiver
// (ucx_notice_receiver). Public calls from any thread reach the progress thread through the loop's
// queue; the parts are touched only there.
#include "common/transport/ucx_transport.h"

#include <ucp/api/ucp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/transport/kv_write_corruption.h"
#include "common/transport/ucx_endpoint_cache.h"
#include "common/transport/ucx_handles.h"
#include "common/transport/ucx_notice_receiver.h"
#include "common/transport/ucx_ops.h"
#include "common/transport/ucx_progress_loop.h"
#include "spdlog/spdlog.h"

namespace tandem {

namespace {

// UCX's configuration (its environment) with `options`' transports and settings applied.
absl::StatusOr<UcpConfig> ReadConfig(const UcxTransportOptions& options) {
  ucp_config_t* raw = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &raw);
  if (s != UCS_OK) return UcsStatus(s, "ucp_config_read");
  UcpConfig config(raw);
  if (!options.tls.empty()) {
    s = ucp_config_modify(config.get(), "TLS", options.tls.c_str());
    if (s != UCS_OK) return UcsStatus(s, absl::StrCat("UCX TLS '", options.tls, "'"));
  }
  for (const auto& [key, value] : options.config) {
    s = ucp_config_modify(config.get(), key.c_str(), value.c_str());
    if (s != UCS_OK) return UcsStatus(s, absl::StrCat("UCX config ", key, "=", value));
  }
  return config;
}

}  // namespace

class UcxTransport::Impl : private UcxProgressLoop::Work {
 public:
  explicit Impl(UcxTransportOptions options)
      : options_(std::move(options)),
        incarnation_(RandomIncarnation()),
        endpoints_(options_.peer_error_handling),
        ops_(options_.clock, options_.notice_protocol, &endpoints_),
        loop_(options_.busy_poll, options_.clock) {
    corruption_.Arm(options_.test_corrupt_writes);
  }

  // Stops the progress thread (which tears everything down) before the parts it uses go.
  ~Impl() override { loop_.Stop(); }

  absl::Status Start() { return loop_.Start(this); }

  absl::Status RegisterPool(void* base, size_t bytes) {
    if (base == nullptr || bytes == 0) return absl::InvalidArgumentError("empty pool");
    return loop_.RunSync([&] { return MapPool(base, bytes, /*allocate=*/false); });
  }

  absl::StatusOr<void*> AllocatePool(size_t bytes) {
    if (bytes == 0) return absl::InvalidArgumentError("empty pool");
    absl::Status s = loop_.RunSync([&] { return MapPool(nullptr, bytes, /*allocate=*/true); });
    if (!s.ok()) return s;
    void* base = reinterpret_cast<void*>(pool_base());
    std::memset(base, 0, bytes);
    return base;
  }

  absl::StatusOr<std::string> DescribeEndpoint(const std::string& address) {
    std::string text;
    absl::Status s = loop_.RunSync([&]() -> absl::Status {
      absl::StatusOr<UcxEndpoint*> ep = endpoints_.Get(address);
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
    absl::MutexLock lock(&pool_mu_);
    return pool_key_;
  }

  uint64_t pool_base() const {
    absl::MutexLock lock(&pool_mu_);
    return reinterpret_cast<uintptr_t>(pool_);
  }

  void SetNoticeHandler(NoticeHandler handler) { notices_.SetHandler(std::move(handler)); }

  std::span<const uint8_t> host_pool() const {
    absl::MutexLock lock(&pool_mu_);
    return {reinterpret_cast<const uint8_t*>(pool_), pool_ == nullptr ? 0 : pool_bytes_};
  }

  void Write(const KvTarget& target, std::vector<KvCopy> copies, absl::Time deadline,
             TransferDone done) {
    std::optional<KvByteFlip> flip = corruption_.Take(copies);
    PostOp(std::move(done),
           [this, target, copies = std::move(copies), deadline, flip](TransferDone done) {
             ops_.StartWrite(target, copies, deadline, std::move(done), PoolForWrites(), flip);
           });
  }

  void Notify(const KvTarget& target, std::string payload, absl::Time deadline, TransferDone done) {
    PostOp(std::move(done),
           [this, target, payload = std::move(payload), deadline](TransferDone done) mutable {
             ops_.StartNotify(target, std::move(payload), deadline, std::move(done));
           });
  }

 private:
  // Runs `start` on the progress thread, or `done` with Cancelled when the transport stopped.
  void PostOp(TransferDone done, absl::AnyInvocable<void(TransferDone)> start) {
    loop_.Post([done = std::move(done), start = std::move(start)](bool cancelled) mutable {
      if (cancelled) {
        done(UcxStoppedError());
        return;
      }
      start(std::move(done));
    });
  }

  UcxOps::Pool PoolForWrites() const {
    absl::MutexLock lock(&pool_mu_);
    return {pool_, pool_bytes_, pool_memh_.get()};
  }

  // ---- progress thread only from here ----

  // Work: the context, the worker, its address, the notice handler.
  absl::StatusOr<ucp_worker_h> Init() override {
    absl::StatusOr<UcpConfig> config = ReadConfig(options_);
    if (!config.ok()) return config.status();
    ucp_params_t params{};
    params.field_mask =
        UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
    params.features = UCP_FEATURE_RMA | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    params.mt_workers_shared = 0;
    params.name = options_.name.c_str();
    ucp_context_h context = nullptr;
    ucs_status_t s = ucp_init(&params, config->get(), &context);
    config->reset();
    if (s != UCS_OK) return UcsStatus(s, "ucp_init");
    context_.reset(context);

    ucp_worker_params_t wparams{};
    wparams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_NAME;
    wparams.thread_mode = UCS_THREAD_MODE_SINGLE;
    wparams.name = options_.name.c_str();
    ucp_worker_h worker = nullptr;
    s = ucp_worker_create(context_.get(), &wparams, &worker);
    if (s != UCS_OK) return UcsStatus(s, "ucp_worker_create");
    worker_.reset(worker);

    ucp_address_t* addr = nullptr;
    size_t addr_len = 0;
    s = ucp_worker_get_address(worker, &addr, &addr_len);
    if (s != UCS_OK) return UcsStatus(s, "ucp_worker_get_address");
    address_.assign(reinterpret_cast<const char*>(addr), addr_len);
    ucp_worker_release_address(worker, addr);

    absl::Status registered = notices_.Register(worker);
    if (!registered.ok()) return registered;
    endpoints_.Open(worker);
    return worker;
  }

  // Work: retires failed endpoints, advances finished operations and delivers notices until none
  // is left, then deletes closed endpoints. True if it did anything.
  bool AfterProgress() override {
    bool any = false;
    while (ops_.has_work() || notices_.has_deliveries()) {
      any = true;
      ops_.RetireFailedEndpoints();
      ops_.AdvanceReady();
      if (notices_.has_deliveries()) notices_.Deliver();
    }
    any |= endpoints_.Reap();
    return any;
  }

  void CheckDeadlines(absl::Time now) override { ops_.CheckDeadlines(now); }
  bool InFlight() const override {
    return ops_.NumActive() > 0 || endpoints_.AnyClosing() || notices_.receiving();
  }
  std::optional<absl::Time> EarliestDeadline() const override { return ops_.EarliestDeadline(); }
  bool EndpointsClosing() const override { return endpoints_.AnyClosing(); }

  // Work: fails what is queued and in flight (Cancelled), closes the endpoints (waiting a
  // bounded time), then releases everything in UCX's order.
  void Teardown() override {
    while (loop_.RunQueued(/*cancelled=*/true)) {
    }
    RetireAllEndpoints();
    WaitForCloses();
    CancelUnfinishedOps();
    ReleaseWhatUcxHolds();
    DestroyUcx();
    loop_.RefuseTasks();
  }

  void RetireAllEndpoints() {
    for (UcxEndpoint* ep : endpoints_.Cached()) {
      UcxEndpointCache::Fail(ep, UcxStoppedError());
      ops_.Retire(ep);
    }
  }

  // Endpoints whose close is expected to finish (forced ones quickly, and flushing ones whose peer
  // was not given up on: an endpoint abandoned past a deadline may never close), or operations
  // still waiting.
  bool StillClosing() const { return endpoints_.AnyClosing() || ops_.NumActive() > 0; }

  void WaitForCloses() {
    Clock* const real = Clock::Real();  // UCX closes endpoints in real time
    const absl::Time give_up = real->Now() + options_.shutdown_timeout;
    while (worker_ != nullptr && StillClosing() && real->Now() < give_up) {
      ucp_worker_progress(worker_.get());
      AfterProgress();
      loop_.RunQueued(/*cancelled=*/true);
    }
  }

  void CancelUnfinishedOps() {
    ops_.FinishAll(UcxStoppedError());
    if (StillClosing()) {
      spdlog::warn("ucx transport: {} endpoints did not finish closing", endpoints_.num_retired());
    }
  }

  // So that destroying the worker calls nothing of ours.
  void ReleaseWhatUcxHolds() {
    ops_.ReleaseRequests();
    endpoints_.ReleaseCloseRequests();
    notices_.ReleaseRequests();
    endpoints_.DestroyRkeys();
  }

  // The worker, then the pool, then the parts' objects, then the context.
  void DestroyUcx() {
    worker_.reset();
    {
      absl::MutexLock lock(&pool_mu_);
      pool_memh_.reset();
      pool_ = nullptr;
    }
    notices_.Clear();
    ops_.Clear();
    endpoints_.Clear();
    context_.reset();
  }

  absl::Status MapPool(void* base, size_t bytes, bool allocate) {
    {
      absl::MutexLock lock(&pool_mu_);
      if (pool_memh_ != nullptr) return absl::FailedPreconditionError("pool already registered");
    }
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                    UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mp.address = base;
    mp.length = bytes;
    mp.flags = allocate ? UCP_MEM_MAP_ALLOCATE : 0;
    ucp_mem_h raw = nullptr;
    ucs_status_t s = ucp_mem_map(context_.get(), &mp, &raw);
    if (s != UCS_OK) return UcsStatus(s, "ucp_mem_map");
    UcpMemory memh(raw, UcpMemUnmap{context_.get()});
    if (allocate) {
      ucp_mem_attr_t attr{};
      attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
      s = ucp_mem_query(memh.get(), &attr);
      if (s != UCS_OK || attr.length < bytes) {
        return UcsStatus(s == UCS_OK ? UCS_ERR_NO_MEMORY : s, "ucp_mem_query");
      }
      base = attr.address;
    }
    void* key_buf = nullptr;
    size_t key_len = 0;
    s = ucp_rkey_pack(context_.get(), memh.get(), &key_buf, &key_len);
    if (s != UCS_OK) return UcsStatus(s, "ucp_rkey_pack");
    UcpRkeyBuffer key(key_buf);
    absl::MutexLock lock(&pool_mu_);
    pool_key_.assign(static_cast<const char*>(key_buf), key_len);
    pool_memh_ = std::move(memh);
    pool_ = static_cast<char*>(base);
    pool_bytes_ = bytes;
    return absl::OkStatus();
  }

  const UcxTransportOptions options_;
  const uint64_t incarnation_;
  KvWriteCorruption corruption_;  // a test hook; disarmed unless options_ say otherwise
  std::string address_;           // set by Init, read-only after

  // The pool: written on the progress thread, read anywhere.
  mutable absl::Mutex pool_mu_;
  std::string pool_key_ ABSL_GUARDED_BY(pool_mu_);
  char* pool_ ABSL_GUARDED_BY(pool_mu_) = nullptr;
  size_t pool_bytes_ ABSL_GUARDED_BY(pool_mu_) = 0;
  UcpMemory pool_memh_ ABSL_GUARDED_BY(pool_mu_);

  // Progress thread only.
  UcpContext context_;
  UcpWorker worker_;
  UcxEndpointCache endpoints_;
  UcxOps ops_;
  UcxNoticeReceiver notices_;

  UcxProgressLoop loop_;  // last: goes first, closing the eventfd
};

absl::StatusOr<std::unique_ptr<UcxTransport>> UcxTransport::Create(UcxTransportOptions options) {
  auto impl = std::make_unique<Impl>(std::move(options));
  absl::Status s = impl->Start();
  if (!s.ok()) return s;
  return std::unique_ptr<UcxTransport>(new UcxTransport(std::move(impl)));
}

UcxTransport::UcxTransport(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

UcxTransport::~UcxTransport() = default;

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
std::span<const uint8_t> UcxTransport::host_pool() const { return impl_->host_pool(); }

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
