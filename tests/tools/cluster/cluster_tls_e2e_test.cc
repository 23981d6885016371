// tandem-cluster --tls with the real servers: the router's gRPC and HTTPS API verify against the
// printed CA and refuse plaintext; every node port demands a client certificate from that CA
// (mTLS); SIGHUP makes the router serve a rotated HTTPS certificate.
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tandem/v1/node.grpc.pb.h"
#include "tests/integration/process_launcher.h"
#include "tests/integration/test_model_dir.h"
#include "tools/cluster/tls_material.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

CommandResult Curl(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"-sS", "--max-time", "20"};
  all.insert(all.end(), args.begin(), args.end());
  return RunCommand("/usr/bin/curl", all, {}, absl::Seconds(30));
}

grpc::Status NodeGetLoad(const std::string& address, const std::string& ca, const std::string& cert,
                         const std::string& key) {
  std::shared_ptr<grpc::ChannelCredentials> creds;
  grpc::ChannelArguments args;
  if (ca.empty()) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = ReadFile(ca);
    if (!cert.empty()) {
      options.pem_cert_chain = ReadFile(cert);
      options.pem_private_key = ReadFile(key);
    }
    creds = grpc::SslCredentials(options);
    args.SetSslTargetNameOverride("tandem-node");
  }
  auto stub = v1::DecodeNode::NewStub(grpc::CreateCustomChannel(address, creds, args));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::NodeLoad load;
  return stub->GetLoad(&context, v1::LoadRequest(), &load);
}

TEST(ClusterTlsE2eTest, TlsEverywhereAndMutualTlsOnNodes) {
  ASSERT_EQ(MissingBinaries({"tandem-cluster", "tandem-cli", "tandem-router", "tandem-prefill",
                             "tandem-decode"}),
            "");
  const std::string tmp = MakeTestTempDir("cluster_tls_");
  LaunchedProcess::Options launch;
  launch.env = {{"TMPDIR", tmp}};
  auto cluster =
      LaunchedProcess::Start(BinaryPath("tandem-cluster"),
                             {"--model", TestModelDir("llama"), "--prefill", "1", "--decode", "1",
                              "--threads-per-node", "1", "--tls", "--log-dir", tmp + "/logs"},
                             launch);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  absl::StatusOr<std::string> router = (*cluster)->WaitReady(absl::Seconds(150));
  ASSERT_TRUE(router.ok()) << router.status() << (*cluster)->LogTail();
  nlohmann::json ready = nlohmann::json::parse((*cluster)->ReadyFileText());
  const std::string ca = ready["tls_ca"];
  const std::string dir = std::filesystem::path(ca).parent_path();
  const std::string http = ready["http"];
  std::string decode;
  pid_t router_pid = 0;
  for (const auto& p : ready["processes"]) {
    if (p["role"] == "decode") decode = p["grpc"];
    if (p["role"] == "router") router_pid = p["pid"].get<pid_t>();
  }

  // gRPC through the router, verified against the CA.
  CommandResult cli =
      RunCommand(BinaryPath("tandem-cli"), {"--router", *router, "--tls-ca", ca, "--prompt",
                                            "Hello", "--max-tokens", "4", "--ignore-eos"});
  EXPECT_EQ(cli.exit_code, 0) << cli.stderr_text << "\nrouter log:\n"
                              << ReadFile(tmp + "/logs/router.log");
  EXPECT_GT(cli.stdout_text.size(), 1u);
  CommandResult plain_cli = RunCommand(
      BinaryPath("tandem-cli"),
      {"--router", *router, "--prompt", "Hello", "--max-tokens", "2", "--timeout-s", "5"});
  EXPECT_NE(plain_cli.exit_code, 0) << "a plaintext client was served";

  // HTTPS, verified against the CA; plain HTTP is not served.
  CommandResult models = Curl({"--cacert", ca, "https://" + http + "/v1/models"});
  EXPECT_EQ(models.exit_code, 0) << models.stderr_text;
  EXPECT_THAT(models.stdout_text, HasSubstr("generate-llama"));
  CommandResult plain = Curl({"http://" + http + "/v1/models"});
  EXPECT_THAT(plain.stdout_text, Not(HasSubstr("generate-llama")));
  CommandResult untrusted = Curl({"https://" + http + "/v1/models"});
  EXPECT_NE(untrusted.exit_code, 0) << "curl trusted a certificate from an unknown CA";

  // mTLS on the node: no client certificate, no service.
  EXPECT_FALSE(NodeGetLoad(decode, "", "", "").ok());
  EXPECT_FALSE(NodeGetLoad(decode, ca, "", "").ok());
  grpc::Status with_cert = NodeGetLoad(decode, ca, dir + "/node.pem", dir + "/node.key");
  EXPECT_TRUE(with_cert.ok()) << with_cert.error_message();

  // Rotate the router's HTTPS certificate and send SIGHUP: new handshakes get the new one.
  ASSERT_TRUE(IssueCertificate(ca, dir + "/ca.key", "tandem-router-rotated", {"localhost"},
                               {"127.0.0.1"}, 1, dir + "/router.pem.new", dir + "/router.key.new")
                  .ok());
  std::filesystem::rename(dir + "/router.key.new", dir + "/router.key");
  std::filesystem::rename(dir + "/router.pem.new", dir + "/router.pem");
  ASSERT_EQ(::kill(router_pid, SIGHUP), 0);
  bool rotated = false;
  for (int i = 0; i < 50 && !rotated; ++i) {
    CommandResult v = Curl({"-v", "--cacert", ca, "https://" + http + "/v1/models"});
    rotated = v.stderr_text.find("CN=tandem-router-rotated") != std::string::npos;
    if (!rotated) absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(rotated) << "the router still serves its old certificate after SIGHUP";

  (*cluster)->Signal(SIGINT);
  (*cluster)->WaitExit(absl::Seconds(60));
  std::filesystem::remove_all(tmp);
}

}  // namespace
}  // namespace tandem
