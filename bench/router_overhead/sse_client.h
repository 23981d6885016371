// A blocking HTTP/1.1 client for server-sent events, for benchmarks: POSTs a JSON body and calls
// `on_event` with each event's data as it arrives (Boost.Beast; one connection per call).
#ifndef TANDEM_BENCH_ROUTER_OVERHEAD_SSE_CLIENT_H_
#define TANDEM_BENCH_ROUTER_OVERHEAD_SSE_CLIENT_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tandem::bench {

// `address` is HOST:PORT. Fails on connection errors and on a status other than 200 (the
// message holds the body). `connected` (may be null) gets the time the connection was up and
// the request about to be written, so callers can leave connection setup out of their timings
// (as gRPC clients, whose channels stay connected, do).
absl::Status PostSse(const std::string& address, const std::string& target,
                     const std::string& json_body,
                     const std::function<void(const std::string& data)>& on_event,
                     absl::Time* connected = nullptr);

}  // namespace tandem::bench

#endif  // TANDEM_BENCH_ROUTER_OVERHEAD_SSE_CLIENT_H_
