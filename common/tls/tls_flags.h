// The TLS flags every tandem server and client shares, declared once (their --help text too).
#ifndef TANDEM_COMMON_TLS_TLS_FLAGS_H_
#define TANDEM_COMMON_TLS_TLS_FLAGS_H_

#include "common/tls/grpc_tls.h"
#include "common/util/cli_flags.h"

namespace tandem {

// --tls-cert, --tls-key, --tls-client-ca.
void AddTlsServerFlags(FlagSet& flags, TlsServerFiles* files);
// --node-tls-ca, --node-tls-cert, --node-tls-key, --node-tls-server-name.
void AddTlsClientFlags(FlagSet& flags, TlsClientFiles* files);

// --help lines for them.
extern const char kTlsServerFlagsUsage[];
extern const char kTlsClientFlagsUsage[];

}  // namespace tandem

#endif  // TANDEM_COMMON_TLS_TLS_FLAGS_H_
