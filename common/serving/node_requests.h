// What both node services share: the map from the router's request ids to engine ids (for Cancel,
// and a decode node's live KV migration RPCs) and the load report every node answers GetLoad with.
#ifndef TANDEM_COMMON_SERVING_NODE_REQUESTS_H_
#define TANDEM_COMMON_SERVING_NODE_REQUESTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/engine/engine.h"
#include "tandem/v1/node.pb.h"

namespace tandem {

// Thread-safe. A router id names at most one live request: a second request with the id of one
// still running is refused (ALREADY_EXISTS), never allowed to take over the first one's entry (so
// a Cancel meant for one request cannot stop another). Empty router ids are not tracked.
//
// A request claims its id before it reaches the engine and binds the engine's id after; a Cancel
// that arrives in between is remembered and reported by Bind.
class RouterRequestIds {
 public:
  absl::Status Claim(const std::string& router_id);
  // Returns false when a Cancel for `router_id` came in since Claim: the caller cancels `id`.
  bool Bind(const std::string& router_id, RequestId id);
  void Release(const std::string& router_id);

  struct CancelTarget {
    bool found = false;           // the router id names a live request
    std::optional<RequestId> id;  // its engine id, if it has one yet
  };
  // The request to cancel; a claimed request with no engine id yet is marked for Bind.
  CancelTarget ForCancel(const std::string& router_id);

  // Live KV migration (decode node). A claimed request with no engine id yet cannot be paused in
  // the engine: a pause asked for it (or for every request, PauseAll) is remembered, and the
  // caller of Bind asks PauseRequested.
  enum class PauseIntent { kNone, kPause, kResume };
  // The request a migration RPC names (found as for ForCancel). kPause / kResume: remember / forget
  // a pause when it has no engine id yet; kNone (ExportKv): mark nothing.
  CancelTarget ForMigration(const std::string& router_id, PauseIntent intent);
  // Every request is to pause from now on (a draining node): the engine ids of those bound now;
  // those bound later learn it from PauseRequested.
  std::vector<RequestId> PauseAll();
  // After Bind: whether the request is to pause (a pause asked before it had an engine id, or
  // PauseAll); never for an empty router id.
  bool PauseRequested(const std::string& router_id);

 private:
  struct Entry {
    std::optional<RequestId> id;
    bool cancel_requested = false;
    bool pause_requested = false;
  };
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> ids_ ABSL_GUARDED_BY(mu_);
  bool pause_all_ ABSL_GUARDED_BY(mu_) = false;
};

// The fields of a NodeLoad that come from the engine alone, from one EngineStats snapshot (so the
// receipts and the load agree: EngineStats::receipts); role-specific ones are the caller's.
void FillNodeLoad(const Engine& engine, std::string_view role, uint64_t incarnation,
                  const std::string& model, v1::NodeLoad* load);

// A request's PlacementTag, for GenerateRequest::placement.
PlacementTag PlacementTagFromProto(const v1::PlacementTag& tag);

}  // namespace tandem

#endif  // TANDEM_COMMON_SERVING_NODE_REQUESTS_H_
