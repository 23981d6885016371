// In-process stand-ins for the request path's dependencies (router/node_client.h,
// router/node_directory.h): a NodeClient that plays back scripted decode streams and prefill
// answers and records every call, and a NodeDirectory over a fixed list of nodes. They let
// RequestRunner run without gRPC servers. A stream the flow stops reading ends CANCELLED, as a
// cancelled context would end it; cancellation that travels through a ClientContext alone (the
// watchdog's) is not observable here, so those paths stay with the gRPC fakes (fake_nodes.h).
#ifndef TANDEM_TESTS_ROUTER_FAKE_NODE_CLIENT_H_
#define TANDEM_TESTS_ROUTER_FAKE_NODE_CLIENT_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "router/node.h"
#include "router/node_client.h"
#include "router/node_directory.h"

namespace tandem::testing {

// A decode stream that plays back its events, one per ReadNext, then ends with `end`; one that
// stops being read (the flow cancelled it) ends with CANCELLED unless it was played out.
class ScriptedDecodeStream : public DecodeStream {
 public:
  // With `hold_at`, the stream stays open before events_[hold_at] until Release (a running stream
  // that PauseForMigration pauses); after an event with migration_paused it stays open until
  // Release too (ResumePaused).
  ScriptedDecodeStream(std::vector<v1::DecodeEvent> events, grpc::Status end,
                       std::shared_ptr<DecodeStreamReceiver> receiver, size_t hold_at = SIZE_MAX)
      : events_(std::move(events)),
        end_(std::move(end)),
        receiver_(std::move(receiver)),
        hold_at_(hold_at) {}

  void ReadNext() override {
    std::optional<v1::DecodeEvent> event;
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return;
      if (next_ == hold_at_ && !released_) {
        held_ = true;
        return;
      }
      if (next_ < events_.size()) event = events_[next_++];
      if (event.has_value() && event->migration_paused()) {
        // A paused stream stays open until ResumePaused (or the flow stops reading it).
        hold_at_ = next_;
        released_ = false;
      }
    }
    if (event.has_value()) {
      receiver_->OnEvent(*event);
    } else {
      End(end_);
    }
  }
  void Release() {
    bool read = false;
    {
      absl::MutexLock lock(&mu_);
      released_ = true;
      read = held_;
      held_ = false;
    }
    if (read) ReadNext();
  }
  void StopReading() override {
    bool played_out = false;
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return;
      stopped_ = true;
      played_out = next_ >= events_.size();
    }
    End(played_out ? end_ : grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }

 private:
  void End(const grpc::Status& status) {
    std::shared_ptr<DecodeStreamReceiver> receiver;
    {
      absl::MutexLock lock(&mu_);
      stopped_ = true;
      receiver = std::move(receiver_);
    }
    if (receiver != nullptr) receiver->OnDone(status);
  }

  absl::Mutex mu_;
  std::vector<v1::DecodeEvent> events_;
  const grpc::Status end_;
  std::shared_ptr<DecodeStreamReceiver> receiver_;
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  size_t hold_at_ ABSL_GUARDED_BY(mu_);
  bool held_ ABSL_GUARDED_BY(mu_) = false;  // a read waits at hold_at_
  bool released_ ABSL_GUARDED_BY(mu_) = false;
};

// One decode stream's script: its events after the handoff (Reserve) or from the start
// (Generate), and its ending.
struct StreamScript {
  std::vector<v1::DecodeEvent> events;
  grpc::Status end;
  // Reserve only: the first event carries no handoff (a broken node).
  bool no_handoff = false;
  // Reserve only: the stream ends before any event, with `end`.
  bool fail_reserve = false;
  // The stream stays open before events[hold_at] until the node gets ResumePaused or
  // PauseForMigration; SIZE_MAX: no hold.
  size_t hold_at = SIZE_MAX;
};

// Events carrying `ids` one per event, the last with `finish_reason`.
inline std::vector<v1::DecodeEvent> TokenEvents(const std::vector<int32_t>& ids,
                                                const std::string& finish_reason = "length") {
  std::vector<v1::DecodeEvent> events;
  for (int32_t id : ids) {
    v1::DecodeEvent e;
    e.add_tokens()->set_id(id);
    events.push_back(std::move(e));
  }
  if (!finish_reason.empty()) {
    if (events.empty()) events.emplace_back();
    events.back().set_finish_reason(finish_reason);
  }
  return events;
}

class FakeNodeClient : public NodeClient {
 public:
  // Scripts are used one per call, in order; the last one repeats.
  void AddStream(StreamScript script) {
    absl::MutexLock lock(&mu_);
    streams_.push_back(std::move(script));
  }
  void AddPrefillAnswer(grpc::Status answer) {
    absl::MutexLock lock(&mu_);
    prefill_answers_.push_back(std::move(answer));
  }

  std::shared_ptr<DecodeStream> StartReserve(
      grpc::ClientContext*, const v1::ReserveRequest& request,
      std::shared_ptr<DecodeStreamReceiver> receiver) override {
    std::vector<v1::DecodeEvent> events;
    StreamScript s;
    {
      absl::MutexLock lock(&mu_);
      reserves_.push_back(request);
      s = NextStream();
      if (!s.fail_reserve) {
        v1::DecodeEvent first;
        if (!s.no_handoff) {
          first.mutable_handoff()->set_request_id(static_cast<uint64_t>(reserves_.size()));
        }
        events.push_back(first);
        if (!s.no_handoff) events.insert(events.end(), s.events.begin(), s.events.end());
      }
    }
    return Play(std::move(events), s.end, std::move(receiver),
                s.hold_at == SIZE_MAX || s.no_handoff ? SIZE_MAX : s.hold_at + 1);
  }
  std::shared_ptr<DecodeStream> StartGenerate(
      grpc::ClientContext*, const v1::NodeGenerateRequest& request,
      std::shared_ptr<DecodeStreamReceiver> receiver) override {
    StreamScript s;
    {
      absl::MutexLock lock(&mu_);
      generates_.push_back(request);
      s = NextStream();
    }
    return Play(s.events, s.end, std::move(receiver), s.hold_at);
  }
  void Prefill(grpc::ClientContext*, const v1::PrefillRequest* request, v1::PrefillResponse*,
               Done done) override {
    grpc::Status answer;
    {
      absl::MutexLock lock(&mu_);
      prefills_.push_back(*request);
      if (!prefill_answers_.empty()) {
        answer = prefill_answers_.front();
        if (prefill_answers_.size() > 1) prefill_answers_.pop_front();
      }
    }
    done(answer);
  }
  void Cancel(grpc::ClientContext*, const v1::CancelRequest* request, v1::CancelResponse*,
              Done done) override {
    {
      absl::MutexLock lock(&mu_);
      cancels_.push_back(request->request_id());
    }
    done(grpc::Status::OK);
  }

  void PauseOrResume(grpc::ClientContext*, bool resume, const v1::MigrationRequest* request,
                     v1::MigrationResponse* response, Done done) override {
    std::vector<std::shared_ptr<ScriptedDecodeStream>> release;
    {
      absl::MutexLock lock(&mu_);
      (resume ? resumes_ : pauses_).push_back(request->request_id());
      for (auto& weak : streams_played_) {
        if (auto stream = weak.lock()) release.push_back(std::move(stream));
      }
    }
    response->set_found(true);
    done(grpc::Status::OK);
    for (auto& stream : release) stream->Release();
  }
  void ExportKv(grpc::ClientContext*, const v1::ExportKvRequest* request,
                v1::ExportKvResponse* response, Done done) override {
    grpc::Status answer;
    {
      absl::MutexLock lock(&mu_);
      exports_.push_back(*request);
      answer = export_answer_;
    }
    if (answer.ok()) response->set_bytes_transferred(4096);
    done(answer);
  }
  void SetExportAnswer(grpc::Status answer) {
    absl::MutexLock lock(&mu_);
    export_answer_ = std::move(answer);
  }
  std::vector<std::string> pauses() const {
    absl::MutexLock lock(&mu_);
    return pauses_;
  }
  std::vector<std::string> resumes() const {
    absl::MutexLock lock(&mu_);
    return resumes_;
  }
  std::vector<v1::ExportKvRequest> exports() const {
    absl::MutexLock lock(&mu_);
    return exports_;
  }

  std::vector<v1::ReserveRequest> reserves() const {
    absl::MutexLock lock(&mu_);
    return reserves_;
  }
  std::vector<v1::NodeGenerateRequest> generates() const {
    absl::MutexLock lock(&mu_);
    return generates_;
  }
  std::vector<v1::PrefillRequest> prefills() const {
    absl::MutexLock lock(&mu_);
    return prefills_;
  }
  std::vector<std::string> cancels() const {
    absl::MutexLock lock(&mu_);
    return cancels_;
  }

 private:
  std::shared_ptr<DecodeStream> Play(std::vector<v1::DecodeEvent> events, grpc::Status end,
                                     std::shared_ptr<DecodeStreamReceiver> receiver,
                                     size_t hold_at = SIZE_MAX) {
    auto stream = std::make_shared<ScriptedDecodeStream>(std::move(events), std::move(end),
                                                         std::move(receiver), hold_at);
    {
      absl::MutexLock lock(&mu_);
      streams_played_.push_back(stream);
    }
    stream->ReadNext();  // reading starts at once
    return stream;
  }

  StreamScript NextStream() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (streams_.empty()) return StreamScript{.events = TokenEvents({}, "length")};
    StreamScript s = streams_.front();
    if (streams_.size() > 1) streams_.pop_front();
    return s;
  }

  mutable absl::Mutex mu_;
  std::deque<StreamScript> streams_ ABSL_GUARDED_BY(mu_);
  std::deque<grpc::Status> prefill_answers_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::ReserveRequest> reserves_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::NodeGenerateRequest> generates_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::PrefillRequest> prefills_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> cancels_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> pauses_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> resumes_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::ExportKvRequest> exports_ ABSL_GUARDED_BY(mu_);
  grpc::Status export_answer_ ABSL_GUARDED_BY(mu_);
  // Streams played, released (StreamScript::hold_at, a pause) by ResumePaused or
  // PauseForMigration.
  std::vector<std::weak_ptr<ScriptedDecodeStream>> streams_played_ ABSL_GUARDED_BY(mu_);
};

// A node backed by a FakeNodeClient, up with a load report of `free_kv_blocks` free blocks.
struct FakeNode {
  FakeNode(NodeRole role, const std::string& address, int32_t free_kv_blocks = 1000) {
    auto owned = std::make_unique<FakeNodeClient>();
    client = owned.get();
    node = std::make_shared<Node>(role, address, std::move(owned));
    v1::NodeLoad load;
    load.set_role(NodeRoleName(role));
    load.set_block_size(16);
    load.set_num_kv_blocks(1000);
    load.set_num_free_kv_blocks(free_kv_blocks);
    load.set_max_context_tokens(8192);
    node->MarkUp(load);
  }
  FakeNodeClient* client;
  std::shared_ptr<Node> node;
};

class FakeNodeDirectory : public NodeDirectory {
 public:
  void Add(const FakeNode& n) {
    absl::MutexLock lock(&mu_);
    nodes_.push_back(n.node);
  }
  std::vector<std::shared_ptr<Node>> Nodes(NodeRole role) const override {
    absl::MutexLock lock(&mu_);
    std::vector<std::shared_ptr<Node>> out;
    for (const auto& n : nodes_) {
      if (n->role() == role) out.push_back(n);
    }
    return out;
  }
  std::vector<std::shared_ptr<Node>> UpNodes(NodeRole role) const override {
    std::vector<std::shared_ptr<Node>> out = Nodes(role);
    std::erase_if(out, [](const std::shared_ptr<Node>& n) {
      const Node::Snapshot s = n->snapshot();
      return !s.up || s.load.draining();
    });
    return out;
  }
  void ReportFailure(const std::shared_ptr<Node>& node, const std::string& error) override {
    node->MarkDown(error);
    absl::MutexLock lock(&mu_);
    failures_.push_back(node->address());
  }
  std::vector<std::string> failures() const {
    absl::MutexLock lock(&mu_);
    return failures_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<Node>> nodes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> failures_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_ROUTER_FAKE_NODE_CLIENT_H_
