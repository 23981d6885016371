// The gRPC client of the router's public API (tandem.v1.Generation/Generate), shared by
// tandem-cli and tandem-cluster --prompt: one streaming call, each response handed to a
// callback as it arrives, cancellable from another thread.
#ifndef TANDEM_TOOLS_CLI_GENERATE_CLIENT_H_
#define TANDEM_TOOLS_CLI_GENERATE_CLIENT_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/status.h"
#include "tandem/v1/generate.grpc.pb.h"

namespace tandem {

// Same code and message.
absl::Status FromGrpcStatus(const grpc::Status& status);

class GenerateClient {
 public:
  using ResponseCallback = std::function<void(const v1::GenerateResponse&)>;

  // `address` is HOST:PORT. `tls_ca` "": plaintext; else TLS, verifying the router against that
  // CA file (PEM). `api_key` "": none; else sent as "authorization: Bearer KEY".
  explicit GenerateClient(const std::string& address, const std::string& tls_ca = "",
                          std::string api_key = "");

  // Waits until the channel is connected. DeadlineExceeded (naming the address) otherwise.
  absl::Status WaitForConnected(absl::Duration timeout);

  // Runs one Generate call: `on_response` sees every message in order. Returns the stream's
  // final status; Cancelled after Cancel(). `timeout` bounds the whole call.
  absl::Status Generate(const v1::GenerateRequest& request, const ResponseCallback& on_response,
                        absl::Duration timeout = absl::InfiniteDuration());

  // Cancels the call in progress (and any started later). Safe from any thread.
  void Cancel();

 private:
  std::string address_;
  std::string api_key_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Generation::Stub> stub_;
  absl::Mutex mu_;
  grpc::ClientContext* active_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tandem

#endif  // TANDEM_TOOLS_CLI_GENERATE_CLIENT_H_
