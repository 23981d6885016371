// One health round over a set of nodes, all at once: the standard gRPC health service
// (grpc.health.v1.Health/Check, whole server) and the node's GetLoad. A node passes when it
// answers SERVING, GetLoad succeeds and the load's role is the one the router expects.
#ifndef TANDEM_ROUTER_NODE_PROBE_H_
#define TANDEM_ROUTER_NODE_PROBE_H_

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "router/node.h"
#include "tandem/v1/node.pb.h"

namespace tandem {

struct ProbeResult {
  bool ok = false;
  // Not ok only because a call ran out of time: the node may be busy rather than dead. A refused
  // connection, NOT_SERVING or a wrong role is never slow.
  bool slow = false;
  v1::NodeLoad load;  // when ok
  std::string error;  // when not ok
};

// Every call carries `timeout` as its deadline; returns one result per node, in order.
std::vector<ProbeResult> ProbeNodes(std::span<const std::shared_ptr<Node>> nodes,
                                    absl::Duration timeout);

// grpc.health.v1.HealthCheckResponse.ServingStatus of an encoded response; -1 if malformed.
int ParseHealthCheckResponse(const std::string& bytes);

}  // namespace tandem

#endif  // TANDEM_ROUTER_NODE_PROBE_H_
