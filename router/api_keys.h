// The API keys a router accepts, on HTTP and gRPC alike: a client presents one as
// "Authorization: Bearer KEY" (HTTP header; gRPC metadata "authorization").
//
// Keys come from --api-key (repeatable, or comma-separated) and from --api-key-file (one key per
// line; blank lines and lines starting with '#' are skipped). Reload() re-reads the file (the
// router calls it on SIGHUP); a file that cannot be read or holds no key leaves the keys as they
// were. With no key at all, authentication is off.
//
// The header is matched as RFC 6750 section 2.1 and RFC 9110 section 11 say: the scheme
// "Bearer" in any case, one or more spaces, then the token (b64token characters), nothing else
// but optional trailing whitespace. Keys are compared in time independent of where they differ.
// Thread-safe.
#ifndef TANDEM_ROUTER_API_KEYS_H_
#define TANDEM_ROUTER_API_KEYS_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace tandem {

class ApiKeys {
 public:
  // `keys` literal keys; `file` "" for none. Fails on a key that is not a valid b64token or a
  // file that cannot be read.
  static absl::StatusOr<std::shared_ptr<ApiKeys>> Create(std::vector<std::string> keys,
                                                         std::string file);

  // Whether any key is configured (authentication is on).
  bool enabled() const;
  // Whether `authorization` (the header's value) carries one of the keys.
  bool Authorizes(std::string_view authorization) const;
  // Re-reads the key file (no-op without one). On error the keys stay as they were.
  absl::Status Reload();
  size_t size() const;

 private:
  ApiKeys(std::vector<std::string> literal, std::string file)
      : literal_(std::move(literal)), file_(std::move(file)) {}

  const std::vector<std::string> literal_;
  const std::string file_;
  mutable absl::Mutex mu_;
  std::vector<std::string> keys_ ABSL_GUARDED_BY(mu_);  // literal_ + the file's
};

// The token of an "Authorization: Bearer TOKEN" value; "" when the value is not of that form.
std::string_view BearerToken(std::string_view authorization);

}  // namespace tandem

#endif  // TANDEM_ROUTER_API_KEYS_H_
