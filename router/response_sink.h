// Where a request's responses go: the public gRPC stream (generate_service) or an HTTP
// connection (http/). The request runner writes through it and polls it for a client that went
// away, so one request path serves both APIs.
#ifndef TANDEM_ROUTER_RESPONSE_SINK_H_
#define TANDEM_ROUTER_RESPONSE_SINK_H_

#include "tandem/v1/generate.pb.h"

namespace tandem {

class ResponseSink {
 public:
  virtual ~ResponseSink() = default;

  // Delivers one response (called from the runner's thread only, in order). May block while the
  // client is slow to read; false when the client is gone, after which the runner stops writing.
  virtual bool Write(const v1::GenerateResponse& response) = 0;
  // Whether the client went away (disconnected, cancelled). Thread-safe and cheap: a watchdog
  // polls it every few milliseconds.
  virtual bool ClientGone() = 0;
  // The request ran past its deadline: make a Write blocked on a client that stopped reading
  // return (false). Thread-safe; may be called more than once.
  virtual void Abort() = 0;
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_RESPONSE_SINK_H_
