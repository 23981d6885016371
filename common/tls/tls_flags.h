// The TLS flags every tandem server and client shares, declared once with their --help lines.
#ifndef TANDEM_COMMON_TLS_TLS_FLAGS_H_
#define TANDEM_COMMON_TLS_TLS_FLAGS_H_

#include "common/tls/grpc_tls.h"
#include "common/util/cli_flags.h"

namespace tandem {

// --tls-cert, --tls-key, --tls-client-ca (in the caller's current --help section).
void AddTlsServerFlags(FlagSet& flags, TlsServerFiles* files);
// --node-tls-ca, --node-tls-cert, --node-tls-key, --node-tls-server-name (likewise).
void AddTlsClientFlags(FlagSet& flags, TlsClientFiles* files);

}  // namespace tandem

#endif  // TANDEM_COMMON_TLS_TLS_FLAGS_H_
