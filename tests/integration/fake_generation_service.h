// An in-process stand-in for the router's public Generate API, for testing clients (tandem-cli,
// tandem-cluster --prompt) without the servers: it records each request and answers with the
// scripted responses and final status, on a loopback port picked at run time.
#ifndef TANDEM_TESTS_INTEGRATION_FAKE_GENERATION_SERVICE_H_
#define TANDEM_TESTS_INTEGRATION_FAKE_GENERATION_SERVICE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/server.h"
#include "tandem/v1/generate.grpc.pb.h"

namespace tandem {

class FakeGenerationService final : public v1::Generation::Service {
 public:
  struct Script {
    std::vector<v1::GenerateResponse> responses;
    grpc::Status status = grpc::Status::OK;  // sent after the responses
    // Hold the stream open after the responses until the client cancels.
    bool wait_for_cancel = false;
  };

  void SetScript(Script script);
  std::vector<v1::GenerateRequest> requests() const;
  int cancelled_calls() const;

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override;

 private:
  mutable absl::Mutex mu_;
  Script script_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::GenerateRequest> requests_ ABSL_GUARDED_BY(mu_);
  int cancelled_calls_ ABSL_GUARDED_BY(mu_) = 0;
};

// The fake served on 127.0.0.1:<free port>; shut down in the destructor.
class FakeGenerationServer {
 public:
  FakeGenerationServer();
  ~FakeGenerationServer();
  const std::string& address() const { return address_; }
  FakeGenerationService& service() { return service_; }

 private:
  FakeGenerationService service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

// A response carrying `text` (and one token per call) — a typical streamed message.
v1::GenerateResponse TextResponse(const std::string& text, int token_id);

}  // namespace tandem

#endif  // TANDEM_TESTS_INTEGRATION_FAKE_GENERATION_SERVICE_H_
