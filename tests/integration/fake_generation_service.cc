#include "tests/integration/fake_generation_service.h"

#include <chrono>
#include <thread>

#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace tandem {

void FakeGenerationService::SetScript(Script script) {
  absl::MutexLock lock(&mu_);
  script_ = std::move(script);
}

std::vector<v1::GenerateRequest> FakeGenerationService::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

int FakeGenerationService::cancelled_calls() const {
  absl::MutexLock lock(&mu_);
  return cancelled_calls_;
}

grpc::Status FakeGenerationService::Generate(grpc::ServerContext* context,
                                             const v1::GenerateRequest* request,
                                             grpc::ServerWriter<v1::GenerateResponse>* writer) {
  Script script;
  {
    absl::MutexLock lock(&mu_);
    requests_.push_back(*request);
    script = script_;
  }
  for (const v1::GenerateResponse& response : script.responses) {
    if (!writer->Write(response)) break;
  }
  if (script.wait_for_cancel) {
    // Bounded, so a client that never cancels cannot hang the test binary.
    for (int i = 0; i < 3000 && !context->IsCancelled(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  if (context->IsCancelled()) {
    absl::MutexLock lock(&mu_);
    ++cancelled_calls_;
    return grpc::Status::CANCELLED;
  }
  return script.status;
}

FakeGenerationServer::FakeGenerationServer() {
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service_);
  server_ = builder.BuildAndStart();
  address_ = "127.0.0.1:" + std::to_string(port);
}

FakeGenerationServer::~FakeGenerationServer() {
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

v1::GenerateResponse TextResponse(const std::string& text, int token_id) {
  v1::GenerateResponse response;
  response.add_tokens()->set_id(token_id);
  response.set_text(text);
  return response;
}

}  // namespace tandem
