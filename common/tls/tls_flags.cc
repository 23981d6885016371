#include "common/tls/tls_flags.h"

namespace tandem {

void AddTlsServerFlags(FlagSet& flags, TlsServerFiles* files) {
  flags.String("tls-cert", &files->cert,
               {"PATH", "serve TLS with this PEM certificate (chain) ..."});
  flags.String("tls-key", &files->key,
               {"PATH", "... and its PEM private key; both re-read when they change"});
  flags.String("tls-client-ca", &files->client_ca,
               {"PATH", "also require client certificates signed by this CA (mTLS)"});
}

void AddTlsClientFlags(FlagSet& flags, TlsClientFiles* files) {
  flags.String("node-tls-ca", &files->ca,
               {"PATH", "dial nodes over TLS, verifying them against this CA"});
  flags.String("node-tls-cert", &files->cert,
               {"PATH", "... presenting this client certificate (mTLS) ..."});
  flags.String("node-tls-key", &files->key, {"PATH", "... and its key"});
  flags.String("node-tls-server-name", &files->server_name,
               {"NAME",
                "the name node certificates carry (DNS SAN; nodes are dialled by IP) (default "
                "tandem-node)"});
}

}  // namespace tandem
