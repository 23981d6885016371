// Fake prefill and decode nodes for the router's tests: real gRPC servers on 127.0.0.1:0 that
// implement tandem.v1.DecodeNode / PrefillNode (and the standard health service) with simple,
// scriptable behaviour, and record what they were asked.
//
// The KV handoff is simulated in-process: a fake decode node answers Reserve with a handoff and
// then waits for its "completion", which the fake prefill node delivers (FakeDecodeNode::Complete,
// found through the handoff's decode_incarnation) when its Prefill succeeds. Only then does the
// decode node stream its script's tokens — as the real nodes do.
#ifndef TANDEM_TESTS_ROUTER_FAKE_NODES_H_
#define TANDEM_TESTS_ROUTER_FAKE_NODES_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "tandem/v1/node.grpc.pb.h"

namespace tandem::testing {

// What a fake decode node streams for each request (Reserve after the completion, or Generate).
struct DecodeScript {
  std::vector<int32_t> tokens = {100, 101, 102};
  std::string finish_reason = "length";  // sent with the last token
  int32_t cached_tokens = 0;             // usage.cached_tokens on the last event
  absl::Duration token_interval = absl::ZeroDuration();
  // Reserve / Generate fail at once with this status (before any event).
  std::optional<grpc::Status> fail_at_start;
  // After this many tokens the stream fails with `stream_error`, or with `hang`, waits until
  // the caller cancels.
  int fail_after_tokens = -1;
  grpc::Status stream_error = grpc::Status(grpc::StatusCode::UNAVAILABLE, "fake decode node broke");
  bool hang = false;
};

class FakeDecodeNode {
 public:
  FakeDecodeNode();
  ~FakeDecodeNode();

  const std::string& address() const { return address_; }
  uint64_t incarnation() const { return incarnation_.load(); }

  void SetScript(DecodeScript script);
  void SetLoad(int32_t free_kv_blocks, int64_t queued_tokens = 0, int32_t running = 0);
  // The price of a step GetLoad reports (NodeLoad.step_cost), for the cost policy.
  void SetStepCost(double per_step_us, double per_token_us);
  // GetLoad answers after `delay` (a busy node whose checks time out).
  void SetLoadDelay(absl::Duration delay);
  // The health service's answer (SERVING or NOT_SERVING).
  void SetServing(bool serving);
  // Stops the server at once: in-flight calls end, new ones fail.
  void Kill();
  // A new server on the same port with a new incarnation.
  void Restart();

  // The prefill side's completion for handoff `request_id`; false if unknown or not awaiting.
  bool Complete(uint64_t request_id);

  // The prefix cache WatchKvEvents reports (the block size of the load report): every stream
  // sends a reset with the whole set when it opens and whenever this changes it.
  void SetCachedBlocks(const std::vector<uint64_t>& hashes);
  int watch_streams() const;

  // Observations.
  int reserve_calls() const;
  int generate_calls() const;
  std::vector<v1::ReserveRequest> reserves() const;
  std::vector<v1::NodeGenerateRequest> generates() const;
  std::vector<std::string> cancel_rpcs() const;
  // Streams that ended because the caller cancelled them (or went away).
  int cancelled_streams() const;
  // Waits until `pred` holds (checked every few ms); false on timeout.
  static bool WaitUntil(const std::function<bool()>& pred,
                        absl::Duration timeout = absl::Seconds(10));

  // The prefill fake's link: completes `request_id` at the live node with `incarnation`.
  // False if there is none or it does not await that request.
  static bool CompleteHandoff(uint64_t incarnation, uint64_t request_id);

 private:
  class Service;
  void StartServer(int port);
  friend class Service;

  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  int port_ = 0;
  std::atomic<uint64_t> incarnation_{0};
};

struct PrefillBehavior {
  std::optional<grpc::Status> error;  // Prefill fails with this (no completion sent)
  bool hang = false;                  // Prefill waits until cancelled
  absl::Duration delay = absl::ZeroDuration();
  int32_t num_cached_tokens = 0;
};

class FakePrefillNode {
 public:
  FakePrefillNode();
  ~FakePrefillNode();

  const std::string& address() const { return address_; }
  void SetBehavior(PrefillBehavior behavior);
  void SetLoad(int64_t queued_tokens, int32_t free_kv_blocks = 1000);
  void SetServing(bool serving);
  void Kill();

  // The prefix cache WatchKvEvents reports: a reset with the current set when a stream opens,
  // then these changes as they happen.
  void SetBlockSize(int32_t block_size);
  void StoreBlocks(const std::vector<uint64_t>& hashes);
  void RemoveBlocks(const std::vector<uint64_t>& hashes);

  int prefill_calls() const;
  std::vector<v1::PrefillRequest> prefills() const;
  std::vector<std::string> cancel_rpcs() const;
  int cancelled_calls() const;
  int watch_streams() const;

 private:
  class Service;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_ROUTER_FAKE_NODES_H_
