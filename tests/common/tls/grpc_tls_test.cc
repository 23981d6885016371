// TLS and mTLS on a real gRPC server on loopback (a DecodeNode service answering GetLoad), with
// files from tandem-cluster's throwaway CA: a client must verify the server, and with a client CA
// the server refuses clients without a certificate it signed. Also the start-up checks of the
// files.
#include "common/tls/grpc_tls.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tandem/v1/node.grpc.pb.h"
#include "tools/cluster/tls_material.h"

namespace tandem {
namespace {

using ::testing::HasSubstr;

class LoadService final : public v1::DecodeNode::Service {
  grpc::Status GetLoad(grpc::ServerContext*, const v1::LoadRequest*, v1::NodeLoad* load) override {
    load->set_role("decode");
    return grpc::Status::OK;
  }
};

class GrpcTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/grpc_tls_test_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
    absl::StatusOr<TlsMaterial> m = MakeTlsMaterial(dir_);
    ASSERT_TRUE(m.ok()) << m.status();
    m_ = *m;
    // A second CA: its certificates must not be accepted.
    std::filesystem::create_directories(dir_ + "/other");
    absl::StatusOr<TlsMaterial> other = MakeTlsMaterial(dir_ + "/other");
    ASSERT_TRUE(other.ok()) << other.status();
    other_ = *other;
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
    std::filesystem::remove_all(dir_);
  }

  void StartServer(const TlsServerFiles& files) {
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> creds = GrpcServerCredentials(files);
    ASSERT_TRUE(creds.ok()) << creds.status();
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", *creds, &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }

  // A GetLoad over `files` (plaintext when !files.enabled()).
  grpc::Status Check(const TlsClientFiles& files) {
    grpc::ChannelArguments args;
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
        GrpcChannelCredentials(files, &args);
    EXPECT_TRUE(creds.ok()) << creds.status();
    auto channel = grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port_), *creds, args);
    auto stub = v1::DecodeNode::NewStub(channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::NodeLoad load;
    return stub->GetLoad(&context, v1::LoadRequest(), &load);
  }

  TlsClientFiles Client(bool with_cert) {
    TlsClientFiles f;
    f.ca = m_.ca_cert;
    if (with_cert) {
      f.cert = m_.node_cert;
      f.key = m_.node_key;
    }
    return f;
  }

  std::string dir_;
  TlsMaterial m_;
  TlsMaterial other_;
  LoadService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

TEST_F(GrpcTlsTest, TlsServerNeedsATlsClientThatTrustsItsCa) {
  ASSERT_NO_FATAL_FAILURE(StartServer({.cert = m_.node_cert, .key = m_.node_key}));
  EXPECT_TRUE(Check(Client(false)).ok());
  EXPECT_FALSE(Check(TlsClientFiles{}).ok());  // plaintext client
  TlsClientFiles wrong_ca = Client(false);
  wrong_ca.ca = other_.ca_cert;
  EXPECT_FALSE(Check(wrong_ca).ok());
  // The node certificate names tandem-node: another expected name fails verification.
  TlsClientFiles wrong_name = Client(false);
  wrong_name.server_name = "not-tandem-node";
  EXPECT_FALSE(Check(wrong_name).ok());
}

TEST_F(GrpcTlsTest, MutualTlsRefusesClientsWithoutACertificateFromTheClientCa) {
  ASSERT_NO_FATAL_FAILURE(
      StartServer({.cert = m_.node_cert, .key = m_.node_key, .client_ca = m_.ca_cert}));
  EXPECT_TRUE(Check(Client(true)).ok());
  EXPECT_FALSE(Check(Client(false)).ok());
  TlsClientFiles foreign = Client(true);
  foreign.cert = other_.node_cert;
  foreign.key = other_.node_key;
  EXPECT_FALSE(Check(foreign).ok());
}

TEST_F(GrpcTlsTest, BadFilesFailAtStartNamingTheFlag) {
  auto message = [](const absl::Status& s) { return std::string(s.message()); };
  EXPECT_THAT(message(CheckTlsServerFiles({.cert = m_.node_cert})), HasSubstr("--tls-key"));
  EXPECT_THAT(message(CheckTlsServerFiles({.client_ca = m_.ca_cert})), HasSubstr("--tls-cert"));
  EXPECT_THAT(message(CheckTlsServerFiles({.cert = m_.node_cert, .key = m_.router_key})),
              HasSubstr("is not the key of the certificate"));
  const std::string not_pem = dir_ + "/not.pem";
  std::ofstream(not_pem) << "hello\n";
  EXPECT_THAT(message(CheckTlsServerFiles({.cert = not_pem, .key = m_.node_key})),
              HasSubstr("no PEM certificate"));
  EXPECT_THAT(message(CheckTlsServerFiles({.cert = dir_ + "/missing", .key = m_.node_key})),
              HasSubstr("cannot read"));
  TlsClientFiles cert_without_ca;
  cert_without_ca.cert = m_.node_cert;
  cert_without_ca.key = m_.node_key;
  EXPECT_THAT(message(CheckTlsClientFiles(cert_without_ca)), HasSubstr("--node-tls-ca"));
  EXPECT_TRUE(CheckTlsServerFiles({}).ok());
  EXPECT_TRUE(CheckTlsClientFiles({}).ok());
}

}  // namespace
}  // namespace tandem
