#include "router/http/http_stream.h"

#include "absl/strings/str_cat.h"

namespace tandem {

absl::StatusOr<std::shared_ptr<boost::asio::ssl::context>> MakeHttpsContext(
    const std::string& cert, const std::string& key, const std::string& client_ca) {
  namespace ssl = boost::asio::ssl;
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  boost::system::error_code ec;
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                           ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                           ssl::context::no_tlsv1_1 | ssl::context::single_dh_use,
                       ec);
  if (context->use_certificate_chain_file(cert, ec); ec) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-cert ", cert, ": ", ec.message()));
  }
  if (context->use_private_key_file(key, ssl::context::pem, ec); ec) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-key ", key, ": ", ec.message()));
  }
  if (!client_ca.empty()) {
    if (context->load_verify_file(client_ca, ec); ec) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tls-client-ca ", client_ca, ": ", ec.message()));
    }
    context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert, ec);
  }
  return context;
}

}  // namespace tandem
