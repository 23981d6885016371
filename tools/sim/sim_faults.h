// Faults in tandem-sim: nodes killed at given times (--kill-node-at T:NAME) or a random node every
// S seconds (--kill-random-node-every S), each back empty after --node-restart-s. What a kill does
// to the requests on the node is decided by the router's own code: the facts the router would
// gather about each attempt the death ended (which call broke, with UNAVAILABLE, and whether
// tokens had reached the client) go to JudgeAttempt (router/attempt_verdict.h), and its verdict
// (cancel the other node's part, retry elsewhere, migrate with the tokens so far, or fail) is
// carried out with the router's limits (RouterOptions' max_retries and migration_limit).
#ifndef TANDEM_TOOLS_SIM_SIM_FAULTS_H_
#define TANDEM_TOOLS_SIM_SIM_FAULTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "router/attempt_verdict.h"
#include "router/placement.h"

namespace tandem::sim {

struct NodeKill {
  double at_s = 0;
  std::string node;  // a node's name: prefill-N or decode-N
};

struct FaultOptions {
  std::vector<NodeKill> kills;
  double kill_random_node_every_s = 0;  // 0: none
  uint64_t seed = 1;                    // of the random kills
  double node_restart_s = 30;           // a killed node is back, empty, after this; 0: never
  // The router's limits (RouterOptions).
  int max_retries = 2;
  int migration_limit = 3;
};

// "T:NAME[,T:NAME...]" (T in seconds from the first arrival). InvalidArgument naming the bad part.
absl::StatusOr<std::vector<NodeKill>> ParseNodeKills(const std::string& spec);

// Where an attempt stood when one of its nodes died.
struct KilledAttempt {
  PlacementKind kind = PlacementKind::kColocated;
  bool decode_died = false;  // else the prefill node
  bool reserved = false;     // disaggregated: the decode node's handoff reached the router
  bool prefilled = false;    // disaggregated: the prefill node finished the prompt
  bool sent_tokens = false;  // tokens of the request reached the client (this attempt or earlier)
  std::string decode_name;
  std::string prefill_name;
};

// The facts RequestRunner would gather about that attempt: the broken call answers UNAVAILABLE,
// the other node's call is cancelled by the router.
AttemptFacts FactsOfKilledAttempt(const KilledAttempt& attempt);

// The facts of a disaggregated attempt whose prefill node could not schedule the prompt: every
// block it has is held by reservations awaiting KV and nothing runs (an auto cluster's nodes
// prefill for each other; Engine::Step fails the queue head RESOURCE_EXHAUSTED). The router
// cancels the decode stream still waiting for the KV. (`sent_tokens` as in KilledAttempt.)
AttemptFacts FactsOfRefusedPrefill(const KilledAttempt& attempt);

}  // namespace tandem::sim

#endif  // TANDEM_TOOLS_SIM_SIM_FAULTS_H_
