// The public Generation service (tandem/v1/generate.proto) on the router: each Generate call runs
// through the RequestRunner with the call's server stream as its ResponseSink.
#ifndef TANDEM_ROUTER_GENERATE_SERVICE_H_
#define TANDEM_ROUTER_GENERATE_SERVICE_H_

#include "router/api_keys.h"
#include "router/request_runner.h"
#include "tandem/v1/generate.grpc.pb.h"

namespace tandem {

class GenerateService final : public v1::Generation::Service {
 public:
  // `runner` must outlive the service.
  // `keys` null or empty: no authentication.
  GenerateService(RequestRunner* runner, std::shared_ptr<const ApiKeys> keys)
      : runner_(runner), keys_(std::move(keys)) {}

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override;

 private:
  RequestRunner* const runner_;
  const std::shared_ptr<const ApiKeys> keys_;
};

}  // namespace tandem

#endif  // TANDEM_ROUTER_GENERATE_SERVICE_H_
