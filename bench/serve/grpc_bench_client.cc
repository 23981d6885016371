#include "bench/serve/grpc_bench_client.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/serve/completion_stream.h"
#include "grpcpp/grpcpp.h"
#include "tandem/v1/generate.grpc.pb.h"

namespace tandem::bench {
namespace {

class GrpcBenchClient final : public BenchClient {
 public:
  explicit GrpcBenchClient(ClientOptions options)
      : options_(std::move(options)),
        channel_(grpc::CreateChannel(options_.address, grpc::InsecureChannelCredentials())),
        stub_(v1::Generation::NewStub(channel_)) {}

  RequestResult Send(const BenchRequest& request) override {
    const v1::GenerateRequest generate = GrpcGenerateRequest(request, options_);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::nanoseconds(absl::ToInt64Nanoseconds(options_.timeout)));
    if (!options_.api_key.empty()) {
      context.AddMetadata("authorization", absl::StrCat("Bearer ", options_.api_key));
    }
    const absl::Time sent = absl::Now();
    StreamRecorder recorder(sent);
    std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
        stub_->Generate(&context, generate);
    v1::GenerateResponse response;
    std::vector<int32_t> token_ids;
    std::string finish_reason;
    while (reader->Read(&response)) {
      const absl::Time at = absl::Now();
      if (options_.record_tokens) {
        for (const v1::Token& token : response.tokens()) token_ids.push_back(token.id());
        if (!response.finish_reason().empty()) finish_reason = response.finish_reason();
      }
      if (response.tokens_size() > 0 || !response.text().empty()) {
        recorder.Content(at, std::max(response.tokens_size(), 1));
      }
      if (response.has_usage()) {
        recorder.Usage(response.usage().prompt_tokens(), response.usage().completion_tokens());
      }
    }
    const grpc::Status status = reader->Finish();
    const absl::Time end = absl::Now();
    if (!status.ok() || !recorder.got_content()) {
      RequestResult r;
      r.error = status.ok() ? "the stream carried no output"
                            : absl::StrCat("gRPC ", StatusCodeName(status.error_code()), ": ",
                                           status.error_message());
      r.e2e_s = absl::ToDoubleSeconds(end - sent);
      r.grpc_code = static_cast<int32_t>(status.error_code());
      r.token_ids = std::move(token_ids);
      r.finish_reason = std::move(finish_reason);
      return r;
    }
    RequestResult r = recorder.Finish(end, request);
    r.token_ids = std::move(token_ids);
    r.finish_reason = std::move(finish_reason);
    return r;
  }

 private:
  static std::string StatusCodeName(grpc::StatusCode code) {
    switch (code) {
      case grpc::StatusCode::CANCELLED:
        return "CANCELLED";
      case grpc::StatusCode::UNKNOWN:
        return "UNKNOWN";
      case grpc::StatusCode::INVALID_ARGUMENT:
        return "INVALID_ARGUMENT";
      case grpc::StatusCode::DEADLINE_EXCEEDED:
        return "DEADLINE_EXCEEDED";
      case grpc::StatusCode::NOT_FOUND:
        return "NOT_FOUND";
      case grpc::StatusCode::RESOURCE_EXHAUSTED:
        return "RESOURCE_EXHAUSTED";
      case grpc::StatusCode::FAILED_PRECONDITION:
        return "FAILED_PRECONDITION";
      case grpc::StatusCode::ABORTED:
        return "ABORTED";
      case grpc::StatusCode::OUT_OF_RANGE:
        return "OUT_OF_RANGE";
      case grpc::StatusCode::UNIMPLEMENTED:
        return "UNIMPLEMENTED";
      case grpc::StatusCode::INTERNAL:
        return "INTERNAL";
      case grpc::StatusCode::UNAVAILABLE:
        return "UNAVAILABLE";
      case grpc::StatusCode::UNAUTHENTICATED:
        return "UNAUTHENTICATED";
      default:
        return absl::StrCat("code ", static_cast<int>(code));
    }
  }

  const ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Generation::Stub> stub_;
};

}  // namespace

v1::GenerateRequest GrpcGenerateRequest(const BenchRequest& request, const ClientOptions& options) {
  v1::GenerateRequest generate;
  if (!options.model.empty()) generate.set_model(options.model);
  if (!request.prompt_ids.empty()) {
    generate.mutable_token_ids()->mutable_ids()->Assign(request.prompt_ids.begin(),
                                                        request.prompt_ids.end());
  } else {
    generate.set_text(request.prompt_text);
  }
  v1::SamplingParams* sampling = generate.mutable_sampling();
  sampling->set_max_tokens(request.output_len);
  sampling->set_ignore_eos(true);
  if (options.temperature.has_value()) sampling->set_temperature(*options.temperature);
  return generate;
}

absl::StatusOr<std::unique_ptr<BenchClient>> CreateGrpcBenchClient(const ClientOptions& options) {
  return std::make_unique<GrpcBenchClient>(options);
}

}  // namespace tandem::bench
