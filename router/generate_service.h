// The public Generation service (tandem/v1/generate.proto) on the router, on gRPC's callback API:
// each Generate call is a write reactor that is the request's ResponseSink and starts it on the
// RequestRunner; no thread waits on a call.
#ifndef TANDEM_ROUTER_GENERATE_SERVICE_H_
#define TANDEM_ROUTER_GENERATE_SERVICE_H_

#include <memory>

#include "router/api_keys.h"
#include "router/request_runner.h"
#include "tandem/v1/generate.grpc.pb.h"

namespace tandem {

class GenerateService final : public v1::Generation::CallbackService {
 public:
  // `runner` must outlive the service.
  // `keys` null or empty: no authentication.
  GenerateService(RequestRunner* runner, std::shared_ptr<const ApiKeys> keys)
      : runner_(runner), keys_(std::move(keys)) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override;

 private:
  RequestRunner* const runner_;
  const std::shared_ptr<const ApiKeys> keys_;
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_GENERATE_SERVICE_H_
