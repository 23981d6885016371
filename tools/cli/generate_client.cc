#include "tools/cli/generate_client.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace tandem {

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

namespace {

std::shared_ptr<grpc::ChannelCredentials> Credentials(const std::string& tls_ca) {
  if (tls_ca.empty()) return grpc::InsecureChannelCredentials();
  std::ifstream in(tls_ca);
  std::stringstream pem;
  pem << in.rdbuf();
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = pem.str();
  return grpc::SslCredentials(options);
}

}  // namespace

GenerateClient::GenerateClient(const std::string& address, const std::string& tls_ca,
                               std::string api_key)
    : address_(address),
      api_key_(std::move(api_key)),
      channel_(grpc::CreateChannel(address, Credentials(tls_ca))),
      stub_(v1::Generation::NewStub(channel_)) {}

absl::Status GenerateClient::WaitForConnected(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  // Short waits, so Cancel() from another thread is seen promptly.
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_) return absl::CancelledError("cancelled");
    }
    absl::Duration step = std::min(deadline - absl::Now(), absl::Milliseconds(100));
    if (step <= absl::ZeroDuration()) break;
    if (channel_->WaitForConnected(std::chrono::system_clock::now() +
                                   absl::ToChronoMilliseconds(step))) {
      return absl::OkStatus();
    }
  }
  return absl::DeadlineExceededError(
      absl::StrCat("cannot connect to ", address_, " within ", absl::FormatDuration(timeout)));
}

absl::Status GenerateClient::Generate(const v1::GenerateRequest& request,
                                      const ResponseCallback& on_response, absl::Duration timeout) {
  grpc::ClientContext context;
  if (!api_key_.empty()) context.AddMetadata("authorization", absl::StrCat("Bearer ", api_key_));
  if (timeout != absl::InfiniteDuration()) {
    context.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
  }
  {
    absl::MutexLock lock(&mu_);
    if (cancelled_) return absl::CancelledError("cancelled");
    active_ = &context;
  }
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub_->Generate(&context, request);
  v1::GenerateResponse response;
  while (reader->Read(&response)) on_response(response);
  grpc::Status status = reader->Finish();
  {
    absl::MutexLock lock(&mu_);
    active_ = nullptr;
  }
  if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach ", address_, ": ", status.error_message()));
  }
  return FromGrpcStatus(status);
}

void GenerateClient::Cancel() {
  absl::MutexLock lock(&mu_);
  cancelled_ = true;
  if (active_ != nullptr) active_->TryCancel();
}

}  // namespace tandem
