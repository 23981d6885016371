// tandem-grpc-relay: the least a gRPC hop in front of a decode node can do, as a reference for
// the router's overhead. It serves tandem.v1.Generation/Generate for token-id prompts on gRPC's
// callback API and forwards each call to DecodeNode.Generate on one decode node: no tokenizer, no
// admission, no placement, no metrics; one read, then one write, then the next read. Whatever TTFT
// it adds over calling the decode node directly is what two extra loopback gRPC messages cost on
// this machine (router_overhead.sh runs it beside the router when RELAY=1).
//
//   tandem-grpc-relay --decode ADDR [--listen 127.0.0.1:0] [--ready-file PATH]
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "common/serving/grpc_server.h"
#include "common/util/cli_flags.h"
#include "common/util/mutex_checks.h"
#include "common/util/ready_file.h"
#include "grpcpp/grpcpp.h"
#include "tandem/v1/generate.grpc.pb.h"
#include "tandem/v1/node.grpc.pb.h"

namespace {

// One relayed call: the client-facing write reactor and the decode-facing read reactor in one
// object, which deletes itself once both calls are done.
class RelayCall final : public grpc::ServerWriteReactor<tandem::v1::GenerateResponse>,
                        public grpc::ClientReadReactor<tandem::v1::DecodeEvent> {
 public:
  RelayCall(tandem::v1::DecodeNode::Stub* decode, const tandem::v1::GenerateRequest& request) {
    node_request_.mutable_prompt_token_ids()->CopyFrom(request.token_ids().ids());
    *node_request_.mutable_sampling() = request.sampling();
    static std::atomic<uint64_t> next_id{0};  // nodes refuse a duplicate id
    node_request_.set_request_id("relay-" + std::to_string(next_id.fetch_add(1)));
    decode->async()->Generate(&node_ctx_, &node_request_, this);
    StartRead(&event_);
    StartCall();
  }

  // Decode side.
  void OnReadDone(bool ok) override {
    if (!ok) return;  // the node's stream ended: its status comes with OnDone(const Status&)
    response_.Clear();
    *response_.mutable_tokens() = event_.tokens();
    response_.set_finish_reason(event_.finish_reason());
    StartWrite(&response_);
  }
  void OnDone(const grpc::Status& status) override {
    Finish(status);
    Release();
  }

  // Client side.
  void OnWriteDone(bool ok) override {
    if (ok) {
      StartRead(&event_);
    } else {
      node_ctx_.TryCancel();
    }
  }
  void OnCancel() override { node_ctx_.TryCancel(); }
  void OnDone() override { Release(); }

 private:
  void Release() {
    if (--live_calls_ == 0) delete this;
  }

  grpc::ClientContext node_ctx_;
  tandem::v1::NodeGenerateRequest node_request_;
  tandem::v1::DecodeEvent event_;
  tandem::v1::GenerateResponse response_;
  std::atomic<int> live_calls_{2};
};

class RelayService final : public tandem::v1::Generation::CallbackService {
 public:
  explicit RelayService(const std::string& decode)
      : decode_(tandem::v1::DecodeNode::NewStub(
            grpc::CreateChannel(decode, grpc::InsecureChannelCredentials()))) {}

  grpc::ServerWriteReactor<tandem::v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext*, const tandem::v1::GenerateRequest* request) override {
    return new RelayCall(decode_.get(), *request);
  }

 private:
  std::unique_ptr<tandem::v1::DecodeNode::Stub> decode_;
};

constexpr char kIntro[] = R"(Usage: tandem-grpc-relay --decode ADDR [options]

Forwards tandem.v1.Generation/Generate (token-id prompts) to one decode node's DecodeNode.Generate:
the floor a gRPC hop in front of the decode node costs, for comparison with the router.
)";

}  // namespace

int main(int argc, char** argv) {
  tandem::TurnOffMutexDeadlockDetection();
  tandem::BlockTerminationSignals();
  std::string decode;
  std::string listen = "127.0.0.1:0";
  std::string ready_file;
  tandem::FlagSet flags;
  flags.String("decode", &decode, {"ADDR", "the decode node's gRPC address (required)"});
  flags.String("listen", &listen, {"HOST:PORT", "where to serve (default 127.0.0.1:0)"});
  flags.String("ready-file", &ready_file, {"PATH", "write {\"grpc\": ADDRESS} here once serving"});
  bool help = false;
  std::string error = flags.Parse(argc, argv, &help);
  if (help) {
    std::fputs(flags.Help(kIntro).c_str(), stdout);
    return 0;
  }
  if (error.empty() && decode.empty()) error = "--decode is required";
  if (!error.empty()) {
    std::fprintf(stderr, "tandem-grpc-relay: %s\n", error.c_str());
    return 2;
  }
  RelayService service(decode);
  auto server = tandem::StartGrpcServer(listen, {&service});
  if (!server.ok()) {
    std::fprintf(stderr, "tandem-grpc-relay: %s\n", server.status().ToString().c_str());
    return 1;
  }
  if (!ready_file.empty()) {
    if (absl::Status s = tandem::WriteReadyFile(ready_file, {.grpc = server->address}); !s.ok()) {
      std::fprintf(stderr, "tandem-grpc-relay: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  tandem::WaitForTerminationSignal();
  server->server->Shutdown();
  return 0;
}
