// The `messages` of a chat completions request → the proto's ChatMessages: roles system,
// developer, user and assistant; content a string or an array of {"type": "text", "text"} parts
// (concatenated); tool messages, tool calls and non-text parts are refused by name.
#ifndef TANDEM_ROUTER_HTTP_OPENAI_MESSAGES_H_
#define TANDEM_ROUTER_HTTP_OPENAI_MESSAGES_H_

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "tandem/v1/generate.pb.h"

namespace tandem {

// Reads doc["messages"] into req.chat; InvalidParam / UnsupportedParam naming the field.
absl::Status ParseChatMessages(const nlohmann::json& doc, v1::GenerateRequest& req);

}  // namespace tandem

#endif  // TANDEM_ROUTER_HTTP_OPENAI_MESSAGES_H_
