#include "tools/cluster/tls_material.h"

#include <fcntl.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tandem {
namespace {

using KeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using CertPtr = std::unique_ptr<X509, decltype(&X509_free)>;

KeyPtr NewKey() { return KeyPtr(EVP_EC_gen("P-256"), EVP_PKEY_free); }

absl::Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (ext == nullptr) {
    return absl::InternalError(absl::StrCat("cannot make X.509 extension ", OBJ_nid2sn(nid)));
  }
  const int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return ok == 1 ? absl::OkStatus()
                 : absl::InternalError(absl::StrCat("cannot add extension ", OBJ_nid2sn(nid)));
}

// A certificate for `key` named `common_name`, signed by `issuer_key` (self-signed when `issuer`
// is null).
absl::StatusOr<CertPtr> MakeCert(EVP_PKEY* key, const std::string& common_name, X509* issuer,
                                 EVP_PKEY* issuer_key, int days, bool is_ca,
                                 const std::string& san) {
  CertPtr cert(X509_new(), X509_free);
  X509_set_version(cert.get(), 2);
  unsigned char serial[16];
  RAND_bytes(serial, sizeof(serial));
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof(serial), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -300);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), static_cast<long>(days) * 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("tandem-cluster"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                             0);
  X509* signer = issuer != nullptr ? issuer : cert.get();
  X509_set_issuer_name(cert.get(), X509_get_subject_name(signer));
  const char* constraints = is_ca ? "critical,CA:TRUE,pathlen:0" : "critical,CA:FALSE";
  const char* usage = is_ca ? "critical,keyCertSign,cRLSign" : "critical,digitalSignature";
  for (auto [nid, value] : {std::pair<int, std::string>{NID_basic_constraints, constraints},
                            {NID_key_usage, usage},
                            {NID_subject_key_identifier, "hash"}}) {
    if (absl::Status s = AddExtension(cert.get(), signer, nid, value); !s.ok()) return s;
  }
  if (!is_ca) {
    for (auto [nid, value] :
         {std::pair<int, std::string>{NID_ext_key_usage, "serverAuth,clientAuth"},
          {NID_subject_alt_name, san},
          {NID_authority_key_identifier, "keyid:always"}}) {
      if (absl::Status s = AddExtension(cert.get(), signer, nid, value); !s.ok()) return s;
    }
  }
  if (X509_sign(cert.get(), issuer_key != nullptr ? issuer_key : key, EVP_sha256()) == 0) {
    return absl::InternalError("cannot sign the certificate");
  }
  return cert;
}

absl::Status WriteCert(X509* cert, const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  const bool ok = PEM_write_X509(f, cert) == 1;
  std::fclose(f);
  return ok ? absl::OkStatus() : absl::UnavailableError(absl::StrCat("cannot write ", path));
}

absl::Status WriteKey(EVP_PKEY* key, const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  FILE* f = fd >= 0 ? ::fdopen(fd, "w") : nullptr;
  if (f == nullptr) {
    if (fd >= 0) ::close(fd);
    return absl::UnavailableError(absl::StrCat("cannot write ", path));
  }
  const bool ok = PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr) == 1;
  std::fclose(f);
  return ok ? absl::OkStatus() : absl::UnavailableError(absl::StrCat("cannot write ", path));
}

std::string SanList(const std::vector<std::string>& dns, const std::vector<std::string>& ips) {
  std::vector<std::string> parts;
  for (const std::string& d : dns) parts.push_back(absl::StrCat("DNS:", d));
  for (const std::string& ip : ips) parts.push_back(absl::StrCat("IP:", ip));
  return absl::StrJoin(parts, ",");
}

}  // namespace

absl::Status IssueCertificate(const std::string& ca_cert, const std::string& ca_key,
                              const std::string& common_name, const std::vector<std::string>& dns,
                              const std::vector<std::string>& ips, int days,
                              const std::string& cert_path, const std::string& key_path) {
  FILE* f = std::fopen(ca_cert.c_str(), "r");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat("cannot read ", ca_cert));
  CertPtr ca(PEM_read_X509(f, nullptr, nullptr, nullptr), X509_free);
  std::fclose(f);
  f = std::fopen(ca_key.c_str(), "r");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat("cannot read ", ca_key));
  KeyPtr ca_private(PEM_read_PrivateKey(f, nullptr, nullptr, nullptr), EVP_PKEY_free);
  std::fclose(f);
  if (ca == nullptr || ca_private == nullptr) {
    return absl::InvalidArgumentError("the CA certificate or key is not PEM");
  }
  KeyPtr key = NewKey();
  if (key == nullptr) return absl::InternalError("cannot make an EC key");
  absl::StatusOr<CertPtr> cert = MakeCert(key.get(), common_name, ca.get(), ca_private.get(), days,
                                          /*is_ca=*/false, SanList(dns, ips));
  if (!cert.ok()) return cert.status();
  if (absl::Status s = WriteKey(key.get(), key_path); !s.ok()) return s;
  return WriteCert(cert->get(), cert_path);
}

absl::StatusOr<TlsMaterial> MakeTlsMaterial(const std::string& dir, int days) {
  TlsMaterial m{.ca_cert = dir + "/ca.pem",
                .router_cert = dir + "/router.pem",
                .router_key = dir + "/router.key",
                .node_cert = dir + "/node.pem",
                .node_key = dir + "/node.key"};
  const std::string ca_key = dir + "/ca.key";
  KeyPtr key = NewKey();
  if (key == nullptr) return absl::InternalError("cannot make an EC key");
  absl::StatusOr<CertPtr> ca =
      MakeCert(key.get(), "tandem-cluster local CA", nullptr, nullptr, days, /*is_ca=*/true, "");
  if (!ca.ok()) return ca.status();
  if (absl::Status s = WriteKey(key.get(), ca_key); !s.ok()) return s;
  if (absl::Status s = WriteCert(ca->get(), m.ca_cert); !s.ok()) return s;
  if (absl::Status s = IssueCertificate(m.ca_cert, ca_key, "tandem-router", {"localhost"},
                                        {"127.0.0.1", "::1"}, days, m.router_cert, m.router_key);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          IssueCertificate(m.ca_cert, ca_key, "tandem-node", {"tandem-node", "localhost"},
                           {"127.0.0.1", "::1"}, days, m.node_cert, m.node_key);
      !s.ok()) {
    return s;
  }
  return m;
}

}  // namespace tandem
