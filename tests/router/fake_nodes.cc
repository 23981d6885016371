#include "tests/router/fake_nodes.h"

#include <chrono>
#include <map>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/server_context.h"

namespace tandem::testing {
namespace {

constexpr absl::Duration kPoll = absl::Milliseconds(2);
// Nothing in a test waits this long; a fake handler that would is ended.
constexpr absl::Duration kMaxHang = absl::Seconds(30);

std::atomic<uint64_t> next_incarnation{1000};

absl::Mutex registry_mu;
std::map<uint64_t, FakeDecodeNode*>& Registry() {
  static auto* registry = new std::map<uint64_t, FakeDecodeNode*>();
  return *registry;
}

// Sleeps `d` unless the call is cancelled first; false when cancelled.
bool SleepUnlessCancelled(grpc::ServerContext* ctx, absl::Duration d) {
  const absl::Time end = absl::Now() + d;
  while (absl::Now() < end) {
    if (ctx->IsCancelled()) return false;
    absl::SleepFor(std::min(kPoll, end - absl::Now()));
  }
  return !ctx->IsCancelled();
}

std::unique_ptr<grpc::Server> BuildServer(grpc::Service* service, int port, int* bound_port) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials(),
                           bound_port);
  builder.RegisterService(service);
  // The sync server's pollers wake this often (gRPC's default: 1 s); Shutdown's Wait waits for
  // each to wake, which made every test that stops a fake node a second longer.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::CQ_TIMEOUT_MSEC, 10);
  return builder.BuildAndStart();
}

void KillServer(std::unique_ptr<grpc::Server>& server) {
  if (server == nullptr) return;
  server->Shutdown(std::chrono::system_clock::now());
  server->Wait();
  server.reset();
}

}  // namespace

class FakeDecodeNode::Service final : public v1::DecodeNode::Service {
 public:
  explicit Service(FakeDecodeNode* owner) : owner_(owner) {
    load_.set_role("decode");
    load_.set_block_size(16);
    load_.set_num_kv_blocks(1000);
    load_.set_num_free_kv_blocks(1000);
    load_.set_max_context_tokens(8192);
  }

  grpc::Status Reserve(grpc::ServerContext* ctx, const v1::ReserveRequest* request,
                       grpc::ServerWriter<v1::DecodeEvent>* writer) override {
    DecodeScript script;
    uint64_t id = 0;
    {
      absl::MutexLock lock(&mu);
      reserves.push_back(*request);
      script = this->script;
      id = next_handoff_id++;
      if (!script.fail_at_start.has_value()) awaiting.insert(id);
    }
    if (script.fail_at_start.has_value()) return *script.fail_at_start;
    v1::DecodeEvent event;
    v1::KvHandoff* handoff = event.mutable_handoff();
    handoff->set_request_id(id);
    handoff->set_decode_incarnation(owner_->incarnation());
    handoff->set_transport("fake");
    const int blocks = (request->prompt_token_ids_size() + 15) / 16;
    for (int i = 0; i < blocks; ++i) handoff->add_block_ids(i);
    handoff->set_lease_remaining_ms(request->lease_ms());
    if (!writer->Write(event)) return Cancelled(id);
    const absl::Time lease_end =
        absl::Now() +
        (request->lease_ms() > 0 ? absl::Milliseconds(request->lease_ms()) : kMaxHang);
    {
      absl::MutexLock lock(&mu);
      while (!completed.contains(id)) {
        if (ctx->IsCancelled()) {
          awaiting.erase(id);
          ++cancelled;
          return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled while awaiting KV");
        }
        if (absl::Now() >= lease_end) {
          awaiting.erase(id);
          return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "lease ran out");
        }
        cv.WaitWithTimeout(&mu, kPoll);
      }
    }
    return Emit(ctx, writer, script);
  }

  grpc::Status Generate(grpc::ServerContext* ctx, const v1::NodeGenerateRequest* request,
                        grpc::ServerWriter<v1::DecodeEvent>* writer) override {
    DecodeScript script;
    {
      absl::MutexLock lock(&mu);
      generates.push_back(*request);
      script = this->script;
    }
    if (script.fail_at_start.has_value()) return *script.fail_at_start;
    return Emit(ctx, writer, script);
  }

  grpc::Status Cancel(grpc::ServerContext*, const v1::CancelRequest* request,
                      v1::CancelResponse* response) override {
    absl::MutexLock lock(&mu);
    cancels.push_back(request->request_id());
    response->set_found(false);
    return grpc::Status::OK;
  }

  grpc::Status GetLoad(grpc::ServerContext*, const v1::LoadRequest*,
                       v1::NodeLoad* response) override {
    absl::Duration delay;
    {
      absl::MutexLock lock(&mu);
      delay = load_delay_;
    }
    absl::SleepFor(delay);
    absl::MutexLock lock(&mu);
    *response = load_;
    response->set_incarnation(owner_->incarnation());
    return grpc::Status::OK;
  }

  grpc::Status WatchKvEvents(grpc::ServerContext* ctx, const v1::WatchKvEventsRequest*,
                             grpc::ServerWriter<v1::KvEvents>* writer) override {
    {
      absl::MutexLock lock(&mu);
      ++watch_streams;
    }
    uint64_t sent = 0;  // cache_version starts at 1
    while (!ctx->IsCancelled()) {
      std::optional<v1::KvEvents> reset;
      {
        absl::MutexLock lock(&mu);
        if (sent != cache_version) {
          sent = cache_version;
          reset.emplace();
          reset->set_incarnation(owner_->incarnation());
          reset->set_block_size(load_.block_size());
          reset->set_reset(true);
          reset->mutable_stored()->Assign(cached.begin(), cached.end());
        }
      }
      if (reset.has_value()) {
        if (!writer->Write(*reset)) break;
      } else {
        absl::SleepFor(kPoll);
      }
    }
    return grpc::Status::OK;
  }

  bool Complete(uint64_t id) {
    absl::MutexLock lock(&mu);
    if (!awaiting.contains(id)) return false;
    awaiting.erase(id);
    completed.insert(id);
    cv.SignalAll();
    return true;
  }

  grpc::Status Cancelled(uint64_t id) {
    absl::MutexLock lock(&mu);
    awaiting.erase(id);
    ++cancelled;
    return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
  }

  grpc::Status CountCancelled() {
    absl::MutexLock lock(&mu);
    ++cancelled;
    return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
  }

  grpc::Status Emit(grpc::ServerContext* ctx, grpc::ServerWriter<v1::DecodeEvent>* writer,
                    const DecodeScript& script) {
    const int n = static_cast<int>(script.tokens.size());
    for (int i = 0; i < n; ++i) {
      if (i == script.fail_after_tokens) {
        if (!script.hang) return script.stream_error;
        SleepUnlessCancelled(ctx, kMaxHang);
        return CountCancelled();
      }
      if (i > 0 && script.token_interval > absl::ZeroDuration() &&
          !SleepUnlessCancelled(ctx, script.token_interval)) {
        return CountCancelled();
      }
      if (ctx->IsCancelled()) return CountCancelled();
      v1::DecodeEvent event;
      v1::Token* token = event.add_tokens();
      token->set_id(script.tokens[i]);
      token->set_logprob(-0.25f * static_cast<float>(i + 1));
      if (i == n - 1) {
        event.set_finish_reason(script.finish_reason);
        event.mutable_usage()->set_completion_tokens(n);
        event.mutable_usage()->set_cached_tokens(script.cached_tokens);
      }
      if (!writer->Write(event)) return CountCancelled();
    }
    if (n == 0) {
      v1::DecodeEvent event;
      event.set_finish_reason(script.finish_reason);
      writer->Write(event);
    }
    return grpc::Status::OK;
  }

  FakeDecodeNode* const owner_;
  absl::Duration load_delay_ ABSL_GUARDED_BY(mu);
  mutable absl::Mutex mu;
  absl::CondVar cv;
  DecodeScript script ABSL_GUARDED_BY(mu);
  v1::NodeLoad load_ ABSL_GUARDED_BY(mu);
  std::vector<v1::ReserveRequest> reserves ABSL_GUARDED_BY(mu);
  std::vector<v1::NodeGenerateRequest> generates ABSL_GUARDED_BY(mu);
  std::vector<std::string> cancels ABSL_GUARDED_BY(mu);
  int cancelled ABSL_GUARDED_BY(mu) = 0;
  uint64_t next_handoff_id ABSL_GUARDED_BY(mu) = 1;
  absl::flat_hash_set<uint64_t> awaiting ABSL_GUARDED_BY(mu);
  absl::flat_hash_set<uint64_t> completed ABSL_GUARDED_BY(mu);
  std::vector<uint64_t> cached ABSL_GUARDED_BY(mu);
  uint64_t cache_version ABSL_GUARDED_BY(mu) = 1;
  int watch_streams ABSL_GUARDED_BY(mu) = 0;
};

FakeDecodeNode::FakeDecodeNode() : service_(std::make_unique<Service>(this)) { StartServer(0); }

FakeDecodeNode::~FakeDecodeNode() {
  {
    absl::MutexLock lock(&registry_mu);
    Registry().erase(incarnation_.load());
  }
  KillServer(server_);
}

void FakeDecodeNode::StartServer(int port) {
  const uint64_t incarnation = next_incarnation.fetch_add(1);
  {
    absl::MutexLock lock(&registry_mu);
    Registry().erase(incarnation_.load());
    incarnation_ = incarnation;
    Registry()[incarnation] = this;
  }
  server_ = BuildServer(service_.get(), port, &port_);
  address_ = absl::StrCat("127.0.0.1:", port_);
}

void FakeDecodeNode::SetScript(DecodeScript script) {
  absl::MutexLock lock(&service_->mu);
  service_->script = std::move(script);
}

void FakeDecodeNode::SetLoad(int32_t free_kv_blocks, int64_t queued_tokens, int32_t running) {
  absl::MutexLock lock(&service_->mu);
  service_->load_.set_num_free_kv_blocks(free_kv_blocks);
  service_->load_.set_num_queued_tokens(queued_tokens);
  service_->load_.set_num_running(running);
}

void FakeDecodeNode::SetStepCost(double per_step_us, double per_token_us) {
  absl::MutexLock lock(&service_->mu);
  v1::StepCost* cost = service_->load_.mutable_step_cost();
  cost->set_per_step_us(per_step_us);
  cost->set_per_token_us(per_token_us);
  cost->set_samples(100);
}

void FakeDecodeNode::SetLoadDelay(absl::Duration delay) {
  absl::MutexLock lock(&service_->mu);
  service_->load_delay_ = delay;
}

void FakeDecodeNode::SetServing(bool serving) {
  server_->GetHealthCheckService()->SetServingStatus(serving);
}

void FakeDecodeNode::Kill() { KillServer(server_); }

void FakeDecodeNode::Restart() {
  KillServer(server_);
  StartServer(port_);
}

bool FakeDecodeNode::Complete(uint64_t request_id) { return service_->Complete(request_id); }

void FakeDecodeNode::SetCachedBlocks(const std::vector<uint64_t>& hashes) {
  absl::MutexLock lock(&service_->mu);
  service_->cached = hashes;
  ++service_->cache_version;
}

int FakeDecodeNode::watch_streams() const {
  absl::MutexLock lock(&service_->mu);
  return service_->watch_streams;
}

bool FakeDecodeNode::CompleteHandoff(uint64_t incarnation, uint64_t request_id) {
  absl::MutexLock lock(&registry_mu);
  auto it = Registry().find(incarnation);
  return it != Registry().end() && it->second->Complete(request_id);
}

int FakeDecodeNode::reserve_calls() const {
  absl::MutexLock lock(&service_->mu);
  return static_cast<int>(service_->reserves.size());
}

int FakeDecodeNode::generate_calls() const {
  absl::MutexLock lock(&service_->mu);
  return static_cast<int>(service_->generates.size());
}

std::vector<v1::ReserveRequest> FakeDecodeNode::reserves() const {
  absl::MutexLock lock(&service_->mu);
  return service_->reserves;
}

std::vector<v1::NodeGenerateRequest> FakeDecodeNode::generates() const {
  absl::MutexLock lock(&service_->mu);
  return service_->generates;
}

std::vector<std::string> FakeDecodeNode::cancel_rpcs() const {
  absl::MutexLock lock(&service_->mu);
  return service_->cancels;
}

int FakeDecodeNode::cancelled_streams() const {
  absl::MutexLock lock(&service_->mu);
  return service_->cancelled;
}

bool FakeDecodeNode::WaitUntil(const std::function<bool()>& pred, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (!pred()) {
    if (absl::Now() >= end) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

class FakePrefillNode::Service final : public v1::PrefillNode::Service {
 public:
  Service() {
    load_.set_role("prefill");
    load_.set_incarnation(next_incarnation.fetch_add(1));
    load_.set_block_size(16);
    load_.set_num_kv_blocks(1000);
    load_.set_num_free_kv_blocks(1000);
  }

  grpc::Status Prefill(grpc::ServerContext* ctx, const v1::PrefillRequest* request,
                       v1::PrefillResponse* response) override {
    PrefillBehavior b;
    {
      absl::MutexLock lock(&mu);
      prefills.push_back(*request);
      b = behavior;
    }
    if (b.delay > absl::ZeroDuration() && !SleepUnlessCancelled(ctx, b.delay)) {
      return CountCancelled();
    }
    if (b.hang) {
      SleepUnlessCancelled(ctx, kMaxHang);
      return CountCancelled();
    }
    if (ctx->IsCancelled()) return CountCancelled();
    if (b.error.has_value()) return *b.error;
    if (!FakeDecodeNode::CompleteHandoff(request->handoff().decode_incarnation(),
                                         request->handoff().request_id())) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "no decode node awaits this handoff");
    }
    response->mutable_first_token()->set_id(0);
    response->set_num_cached_tokens(b.num_cached_tokens);
    return grpc::Status::OK;
  }

  grpc::Status Cancel(grpc::ServerContext*, const v1::CancelRequest* request,
                      v1::CancelResponse* response) override {
    absl::MutexLock lock(&mu);
    cancels.push_back(request->request_id());
    response->set_found(false);
    return grpc::Status::OK;
  }

  grpc::Status GetLoad(grpc::ServerContext*, const v1::LoadRequest*,
                       v1::NodeLoad* response) override {
    absl::MutexLock lock(&mu);
    *response = load_;
    return grpc::Status::OK;
  }

  grpc::Status WatchKvEvents(grpc::ServerContext* ctx, const v1::WatchKvEventsRequest*,
                             grpc::ServerWriter<v1::KvEvents>* writer) override {
    v1::KvEvents reset;
    size_t next = 0;
    {
      absl::MutexLock lock(&mu);
      ++watch_streams;
      reset.set_incarnation(load_.incarnation());
      reset.set_block_size(block_size);
      reset.set_reset(true);
      for (uint64_t h : stored) reset.add_stored(h);
      next = log.size();
    }
    if (!writer->Write(reset)) return grpc::Status::OK;
    while (!ctx->IsCancelled()) {
      std::optional<v1::KvEvents> event;
      {
        absl::MutexLock lock(&mu);
        if (next < log.size()) event = log[next++];
      }
      if (event.has_value()) {
        if (!writer->Write(*event)) break;
      } else {
        absl::SleepFor(kPoll);
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status CountCancelled() {
    absl::MutexLock lock(&mu);
    ++cancelled;
    return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
  }

  absl::Mutex mu;
  PrefillBehavior behavior ABSL_GUARDED_BY(mu);
  v1::NodeLoad load_ ABSL_GUARDED_BY(mu);
  std::vector<v1::PrefillRequest> prefills ABSL_GUARDED_BY(mu);
  std::vector<std::string> cancels ABSL_GUARDED_BY(mu);
  int cancelled ABSL_GUARDED_BY(mu) = 0;
  int watch_streams ABSL_GUARDED_BY(mu) = 0;
  int32_t block_size ABSL_GUARDED_BY(mu) = 16;
  absl::flat_hash_set<uint64_t> stored ABSL_GUARDED_BY(mu);
  std::vector<v1::KvEvents> log ABSL_GUARDED_BY(mu);
};

FakePrefillNode::FakePrefillNode() : service_(std::make_unique<Service>()) {
  int port = 0;
  server_ = BuildServer(service_.get(), 0, &port);
  address_ = absl::StrCat("127.0.0.1:", port);
}

FakePrefillNode::~FakePrefillNode() { KillServer(server_); }

void FakePrefillNode::SetBehavior(PrefillBehavior behavior) {
  absl::MutexLock lock(&service_->mu);
  service_->behavior = std::move(behavior);
}

void FakePrefillNode::SetLoad(int64_t queued_tokens, int32_t free_kv_blocks) {
  absl::MutexLock lock(&service_->mu);
  service_->load_.set_num_queued_tokens(queued_tokens);
  service_->load_.set_num_free_kv_blocks(free_kv_blocks);
}

void FakePrefillNode::SetServing(bool serving) {
  server_->GetHealthCheckService()->SetServingStatus(serving);
}

void FakePrefillNode::Kill() { KillServer(server_); }

void FakePrefillNode::SetBlockSize(int32_t block_size) {
  absl::MutexLock lock(&service_->mu);
  service_->block_size = block_size;
  service_->load_.set_block_size(block_size);
}

void FakePrefillNode::StoreBlocks(const std::vector<uint64_t>& hashes) {
  absl::MutexLock lock(&service_->mu);
  v1::KvEvents event;
  event.set_incarnation(service_->load_.incarnation());
  event.set_block_size(service_->block_size);
  for (uint64_t h : hashes) {
    service_->stored.insert(h);
    event.add_stored(h);
  }
  service_->log.push_back(std::move(event));
}

void FakePrefillNode::RemoveBlocks(const std::vector<uint64_t>& hashes) {
  absl::MutexLock lock(&service_->mu);
  v1::KvEvents event;
  event.set_incarnation(service_->load_.incarnation());
  event.set_block_size(service_->block_size);
  for (uint64_t h : hashes) {
    service_->stored.erase(h);
    event.add_removed(h);
  }
  service_->log.push_back(std::move(event));
}

int FakePrefillNode::prefill_calls() const {
  absl::MutexLock lock(&service_->mu);
  return static_cast<int>(service_->prefills.size());
}

std::vector<v1::PrefillRequest> FakePrefillNode::prefills() const {
  absl::MutexLock lock(&service_->mu);
  return service_->prefills;
}

std::vector<std::string> FakePrefillNode::cancel_rpcs() const {
  absl::MutexLock lock(&service_->mu);
  return service_->cancels;
}

int FakePrefillNode::cancelled_calls() const {
  absl::MutexLock lock(&service_->mu);
  return service_->cancelled;
}

int FakePrefillNode::watch_streams() const {
  absl::MutexLock lock(&service_->mu);
  return service_->watch_streams;
}

}  // namespace tandem::testing
