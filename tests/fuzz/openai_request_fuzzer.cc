// Fuzzes the OpenAI request parser (router/http/openai_request.h) with raw request bodies, as
// both endpoints: every input is either a request or an InvalidArgument whose OpenAI error
// serializes, and a parsed request survives a protobuf round trip.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "router/http/openai_error.h"
#include "router/http/openai_request.h"
#include "router/http/openai_response.h"
#include "tests/fuzz/fuzz_common.h"

namespace tandem {
namespace {

void ParseAs(OpenAiEndpoint endpoint, std::string_view body) {
  absl::StatusOr<OpenAiRequest> parsed = ParseOpenAiRequest(endpoint, body);
  if (!parsed.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(parsed.status()));
    const OpenAiError error = ErrorFromParseStatus(parsed.status());
    FUZZ_CHECK(error.http_status == 400);
    FUZZ_CHECK(!DumpJson(error.ToJson()).empty());
    return;
  }
  FUZZ_CHECK(parsed->output.endpoint == endpoint);
  const std::string wire = parsed->request.SerializeAsString();
  v1::GenerateRequest again;
  FUZZ_CHECK(again.ParseFromString(wire));
  FUZZ_CHECK(again.SerializeAsString() == wire);
}

}  // namespace
}  // namespace tandem

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  tandem::ParseAs(tandem::OpenAiEndpoint::kCompletions, body);
  tandem::ParseAs(tandem::OpenAiEndpoint::kChatCompletions, body);
  return 0;
}
