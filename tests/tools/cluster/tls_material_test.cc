#include "tools/cluster/tls_material.h"

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace tandem {
namespace {

X509* ReadCert(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return nullptr;
  X509* cert = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  return cert;
}

// Whether `cert` chains to `ca` and carries `host` (DNS or IP) as a SAN.
bool Verifies(X509* ca, X509* cert) {
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, cert, nullptr);
  const bool ok = X509_verify_cert(ctx) == 1;
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  return ok;
}

TEST(TlsMaterialTest, CertificatesChainToTheCaWithTheirNames) {
  const std::string dir = ::testing::TempDir() + "/tls_material_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  absl::StatusOr<TlsMaterial> m = MakeTlsMaterial(dir);
  ASSERT_TRUE(m.ok()) << m.status();
  X509* ca = ReadCert(m->ca_cert);
  X509* router = ReadCert(m->router_cert);
  X509* node = ReadCert(m->node_cert);
  ASSERT_NE(ca, nullptr);
  ASSERT_NE(router, nullptr);
  ASSERT_NE(node, nullptr);
  EXPECT_TRUE(Verifies(ca, router));
  EXPECT_TRUE(Verifies(ca, node));
  EXPECT_FALSE(Verifies(router, node));  // a leaf is no CA
  EXPECT_EQ(X509_check_host(node, "tandem-node", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_host(router, "localhost", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_ip_asc(router, "127.0.0.1", 0), 1);
  EXPECT_NE(X509_check_host(router, "tandem-node", 0, 0, nullptr), 1);
  // Both ends of mTLS.
  EXPECT_EQ(X509_check_purpose(node, X509_PURPOSE_SSL_SERVER, 0), 1);
  EXPECT_EQ(X509_check_purpose(node, X509_PURPOSE_SSL_CLIENT, 0), 1);
  // Keys are owner-only.
  struct stat st;
  ASSERT_EQ(::stat(m->node_key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0077, 0u);
  X509_free(ca);
  X509_free(router);
  X509_free(node);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tandem
