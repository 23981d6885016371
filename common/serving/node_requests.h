// What both node services share: the map from the router's request ids to engine ids (for Cancel)
// and the load report every node answers GetLoad with.
#ifndef TANDEM_COMMON_SERVING_NODE_REQUESTS_H_
#define TANDEM_COMMON_SERVING_NODE_REQUESTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/engine/engine.h"
#include "tandem/v1/node.pb.h"

namespace tandem {

// Thread-safe. Empty router ids are not tracked.
class RouterRequestIds {
 public:
  void Track(const std::string& router_id, RequestId id);
  void Untrack(const std::string& router_id);
  std::optional<RequestId> Find(const std::string& router_id);

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, RequestId> ids_ ABSL_GUARDED_BY(mu_);
};

// The fields of a NodeLoad that come from the engine alone; role-specific ones are the caller's.
void FillNodeLoad(const Engine& engine, std::string_view role, uint64_t incarnation,
                  const std::string& model, v1::NodeLoad* load);

}  // namespace tandem

#endif  // TANDEM_COMMON_SERVING_NODE_REQUESTS_H_
