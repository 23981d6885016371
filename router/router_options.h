// What tandem-router is asked to do; filled from flags in main.cc, and by tests directly.
#ifndef TANDEM_ROUTER_ROUTER_OPTIONS_H_
#define TANDEM_ROUTER_ROUTER_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/tls/grpc_tls.h"
#include "router/placement.h"

namespace tandem {

// Where a role's nodes come from: a static list of HOST:PORT addresses, or a DNS name (a
// Kubernetes headless service) re-resolved every NodePoolOptions::dns_refresh_ms.
struct NodeSource {
  std::vector<std::string> addresses;  // static HOST:PORT list
  std::string dns_name;                // NAME:PORT, resolved to one node per address
};

struct NodePoolOptions {
  NodeSource prefill;
  NodeSource decode;
  int64_t dns_refresh_ms = 5000;
  // Health service Check + GetLoad every this often; each has this long to answer.
  int64_t health_interval_ms = 500;
  // The first round, which Start() runs before the router serves, gives nodes this long (at least
  // health_interval_ms): a first connection's TLS handshake on a busy machine can take seconds,
  // and a healthy node that missed it would stay down until the next round.
  int64_t first_check_timeout_ms = 10000;
  // Busy is not dead: a node whose checks only run out of time stays up until they have failed
  // for this long with no progress on its streams in that time. A refused connection,
  // NOT_SERVING or an RPC that fails UNAVAILABLE marks it down at once.
  int64_t node_down_after_ms = 10000;
  // Follow the prefill nodes' WatchKvEvents streams (prefix_aware and cost placement credit the
  // prefix a prefill node holds).
  bool watch_prefill_kv_events = false;
  // Follow the decode nodes' WatchKvEvents streams (cost placement credits the prefix a decode
  // node holds: a conversation's next turn goes where its earlier turns' KV is).
  bool watch_decode_kv_events = false;
  // How the router dials nodes: TLS (mTLS with a client certificate) when it names a CA.
  TlsClientFiles node_tls;
  // The id this router tags its placements with (router/in_flight.h); 0: the process's random
  // one. Tests running several routers in one process give each its own.
  uint64_t router_id = 0;
};

struct RouterOptions {
  std::string model_dir;
  std::string served_model_name;       // "": basename of model_dir
  std::string listen = "127.0.0.1:0";  // gRPC Generation
  // The OpenAI-compatible HTTP API ("": off) and its settings (router/http/http_server.h).
  std::string http_listen = "127.0.0.1:0";
  int http_threads = 2;
  int64_t max_body_bytes = 8 << 20;
  // API keys clients must present on HTTP /v1/* and gRPC Generate (router/api_keys.h); none of
  // either: no authentication.
  std::vector<std::string> api_keys;
  std::string api_key_file;  // reloaded on SIGHUP
  // TLS on the public gRPC and HTTP API (HTTPS); mTLS when it names a client CA.
  TlsServerFiles tls;
  // Prometheus /metrics ("": off).
  std::string metrics_listen = "127.0.0.1:0";
  // Admission (router/admission_queue.h): at most max_concurrent_requests run at once; the next
  // ones wait in arrival order, at most max_queued_requests of them holding at most
  // max_queued_prompt_tokens prompt tokens, each for at most queue_timeout_ms (within its
  // deadline). A full queue or a wait that runs out: gRPC RESOURCE_EXHAUSTED, HTTP 429 with
  // Retry-After.
  int64_t max_concurrent_requests = 4096;
  int64_t max_queued_requests = 4096;
  int64_t max_queued_prompt_tokens = int64_t{16} << 20;
  int64_t queue_timeout_ms = 30000;
  std::string ready_file;  // "": none
  NodePoolOptions pool;
  PlacementOptions placement;
  int max_retries = 2;
  // Moves of a request to another decode node after tokens reached the client (0: none).
  int migration_limit = 3;
  // Live KV migration: a stream whose decode node pauses it (draining) moves with its KV to
  // another decode node with room; false: the router resumes it where it is.
  bool live_kv_migration = true;
  // How long one live move may take, from the pause until the destination's first token; past
  // it the move is given up and the source resumes the stream.
  int64_t kv_move_timeout_ms = 5000;
  // How often the router looks for a decode node that ran out of KV blocks while another has
  // room, and moves one stream off it with its KV (router/kv_rebalance.h); 0: never.
  int64_t kv_rebalance_interval_ms = 500;
  int64_t lease_ms = 30000;
  // Whole request, unless the client's deadline is sooner.
  int64_t request_timeout_ms = 600000;
  // One attempt from its start until its first token; past it the attempt is abandoned (and
  // retried while retries are left).
  int64_t first_token_timeout_ms = 60000;
  // No decode node reports room for a prompt's KV: the request waits at most this long (within
  // its deadline) for room, then gets UNAVAILABLE (HTTP 503); at most this many wait at once,
  // beyond that the rest get UNAVAILABLE at once.
  int64_t kv_wait_timeout_ms = 10000;
  int64_t max_kv_waiting_requests = 1024;
  // On SIGTERM: how long in-flight streams get to finish before they are cancelled.
  int64_t drain_timeout_ms = 30000;
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_ROUTER_OPTIONS_H_
