#include "common/tls/grpc_tls.h"

#include <openssl/bio.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/security/tls_certificate_provider.h"
#include "grpcpp/security/tls_credentials_options.h"

namespace tandem {
namespace {

using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

absl::StatusOr<X509Ptr> ReadCert(const std::string& path, const char* flag) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  X509Ptr cert(PEM_read_X509(f, nullptr, nullptr, nullptr), X509_free);
  std::fclose(f);
  if (cert == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": ", path, " holds no PEM certificate"));
  }
  return cert;
}

absl::StatusOr<KeyPtr> ReadKey(const std::string& path, const char* flag) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  KeyPtr key(PEM_read_PrivateKey(f, nullptr, nullptr, nullptr), EVP_PKEY_free);
  std::fclose(f);
  if (key == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": ", path, " holds no (unencrypted) PEM private key"));
  }
  return key;
}

absl::Status CheckPair(const std::string& cert_path, const std::string& key_path,
                       const char* cert_flag, const char* key_flag) {
  if (cert_path.empty() != key_path.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(cert_flag, " and ", key_flag, " go together: give both or neither"));
  }
  if (cert_path.empty()) return absl::OkStatus();
  absl::StatusOr<X509Ptr> cert = ReadCert(cert_path, cert_flag);
  if (!cert.ok()) return cert.status();
  absl::StatusOr<KeyPtr> key = ReadKey(key_path, key_flag);
  if (!key.ok()) return key.status();
  if (X509_check_private_key(cert->get(), key->get()) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        key_flag, ": ", key_path, " is not the key of the certificate in ", cert_path));
  }
  return absl::OkStatus();
}

unsigned int ReloadSeconds() {
  return static_cast<unsigned int>(absl::ToInt64Seconds(kTlsReloadInterval));
}

}  // namespace

absl::Status CheckTlsServerFiles(const TlsServerFiles& files) {
  if (absl::Status s = CheckPair(files.cert, files.key, "--tls-cert", "--tls-key"); !s.ok()) {
    return s;
  }
  if (!files.client_ca.empty()) {
    if (files.cert.empty()) {
      return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
    }
    absl::StatusOr<X509Ptr> ca = ReadCert(files.client_ca, "--tls-client-ca");
    if (!ca.ok()) return ca.status();
  }
  return absl::OkStatus();
}

absl::Status CheckTlsClientFiles(const TlsClientFiles& files) {
  if (absl::Status s = CheckPair(files.cert, files.key, "--node-tls-cert", "--node-tls-key");
      !s.ok()) {
    return s;
  }
  if (!files.cert.empty() && files.ca.empty()) {
    return absl::InvalidArgumentError("--node-tls-cert needs --node-tls-ca");
  }
  if (!files.ca.empty()) {
    absl::StatusOr<X509Ptr> ca = ReadCert(files.ca, "--node-tls-ca");
    if (!ca.ok()) return ca.status();
    if (files.server_name.empty()) {
      return absl::InvalidArgumentError("--node-tls-server-name must not be empty");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcServerCredentials(
    const TlsServerFiles& files) {
  if (absl::Status s = CheckTlsServerFiles(files); !s.ok()) return s;
  if (!files.enabled()) return grpc::InsecureServerCredentials();
  auto provider = files.client_ca.empty()
                      ? std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                            files.key, files.cert, ReloadSeconds())
                      : std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                            files.key, files.cert, files.client_ca, ReloadSeconds());
  grpc::experimental::TlsServerCredentialsOptions options(provider);
  options.watch_identity_key_cert_pairs();
  if (!files.client_ca.empty()) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  std::shared_ptr<grpc::ServerCredentials> creds =
      grpc::experimental::TlsServerCredentials(options);
  if (creds == nullptr) return absl::InternalError("gRPC refused the TLS server options");
  return creds;
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> GrpcChannelCredentials(
    const TlsClientFiles& files, grpc::ChannelArguments* args) {
  if (absl::Status s = CheckTlsClientFiles(files); !s.ok()) return s;
  if (!files.enabled()) return grpc::InsecureChannelCredentials();
  auto provider = files.cert.empty()
                      ? std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                            files.ca, ReloadSeconds())
                      : std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
                            files.key, files.cert, files.ca, ReloadSeconds());
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(provider);
  options.watch_root_certs();
  if (!files.cert.empty()) options.watch_identity_key_cert_pairs();
  args->SetSslTargetNameOverride(files.server_name);
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::experimental::TlsCredentials(options);
  if (creds == nullptr) return absl::InternalError("gRPC refused the TLS channel options");
  return creds;
}

}  // namespace tandem
