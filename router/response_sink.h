// Where a request's responses go: the public gRPC stream (generate_service) or an HTTP
// connection (http/). The request runner writes through it and polls it for a client that went
// away, so one request path serves both APIs.
#ifndef TANDEM_ROUTER_RESPONSE_SINK_H_
#define TANDEM_ROUTER_RESPONSE_SINK_H_

#include "absl/functional/any_invocable.h"
#include "tandem/v1/generate.pb.h"

namespace tandem {

class ResponseSink {
 public:
  // false: the client is gone; the runner writes no more.
  using WriteDone = absl::AnyInvocable<void(bool ok)>;

  virtual ~ResponseSink() = default;

  // Delivers one response, asynchronously: `done` runs once the sink can take the next one (on
  // any thread, possibly inside this call). At most one write is outstanding; writes come in
  // order. A slow client delays `done` (backpressure reaches the node's stream).
  virtual void Write(const v1::GenerateResponse& response, WriteDone done) = 0;
  // Whether the client went away (disconnected, cancelled). Thread-safe and cheap: a watchdog
  // polls it every few milliseconds.
  virtual bool ClientGone() = 0;
  // The request ran past its deadline: make an outstanding Write to a client that stopped
  // reading end (with false). Thread-safe; may be called more than once.
  virtual void Abort() = 0;
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_RESPONSE_SINK_H_
