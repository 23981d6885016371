// What the request path needs from the node pool: the nodes of a role, which of them are up, and
// a way to say that a call found one unreachable. NodePool implements it; request-path tests use
// a fixed list (tests/router/fake_node_client.h).
#ifndef TANDEM_ROUTER_NODE_DIRECTORY_H_
#define TANDEM_ROUTER_NODE_DIRECTORY_H_

#include <memory>
#include <string>
#include <vector>

#include "router/node.h"

namespace tandem {

class NodeDirectory {
 public:
  virtual ~NodeDirectory() = default;

  // Every known node of `role`, sorted by address.
  virtual std::vector<std::shared_ptr<Node>> Nodes(NodeRole role) const = 0;
  // Those that are up and not draining (NodeLoad.draining): the ones to place work on.
  virtual std::vector<std::shared_ptr<Node>> UpNodes(NodeRole role) const = 0;
  // An RPC to `node` failed in a way that says the node is unreachable.
  virtual void ReportFailure(const std::shared_ptr<Node>& node, const std::string& error) = 0;
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_NODE_DIRECTORY_H_
