#include "common/tls/tls_flags.h"

namespace tandem {

const char kTlsServerFlagsUsage[] =
    R"(  --tls-cert PATH               serve TLS with this PEM certificate (chain) ...
  --tls-key PATH                ... and its PEM private key; both re-read when they change
  --tls-client-ca PATH          also require client certificates signed by this CA (mTLS)
)";

const char kTlsClientFlagsUsage[] =
    R"(  --node-tls-ca PATH            dial nodes over TLS, verifying them against this CA
  --node-tls-cert PATH          ... presenting this client certificate (mTLS) ...
  --node-tls-key PATH           ... and its key
  --node-tls-server-name NAME   the name node certificates carry (DNS SAN; nodes are dialled
                                by IP) (default tandem-node)
)";

void AddTlsServerFlags(FlagSet& flags, TlsServerFiles* files) {
  flags.String("tls-cert", &files->cert);
  flags.String("tls-key", &files->key);
  flags.String("tls-client-ca", &files->client_ca);
}

void AddTlsClientFlags(FlagSet& flags, TlsClientFiles* files) {
  flags.String("node-tls-ca", &files->ca);
  flags.String("node-tls-cert", &files->cert);
  flags.String("node-tls-key", &files->key);
  flags.String("node-tls-server-name", &files->server_name);
}

}  // namespace tandem
