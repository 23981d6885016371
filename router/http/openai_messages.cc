#include "router/http/openai_messages.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "router/http/json_fields.h"
#include "router/http/openai_error.h"

namespace tandem {

using json = nlohmann::json;

absl::Status ParseChatMessages(const json& doc, v1::GenerateRequest& req) {
  auto it = doc.find("messages");
  if (it == doc.end() || it->is_null()) return InvalidParam("messages", "messages is required");
  if (!it->is_array()) return WrongType("messages", "an array", *it);
  if (it->empty()) return InvalidParam("messages", "messages is empty");
  v1::ChatMessages* chat = req.mutable_chat();
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    const std::string where = absl::StrCat("messages[", i, "]");
    if (!m.is_object()) return WrongType(where, "an object", m);
    for (auto f = m.begin(); f != m.end(); ++f) {
      const std::string& key = f.key();
      if (key == "role" || key == "content" || key == "name") continue;
      if ((key == "tool_calls" || key == "function_call") &&
          (f->is_null() || (f->is_array() && f->empty()))) {
        continue;
      }
      if (key == "tool_calls" || key == "tool_call_id" || key == "function_call") {
        return UnsupportedParam(absl::StrCat(where, ".", key),
                                absl::StrCat(where, ".", key, " is not supported (tool calling)"));
      }
      return InvalidParam(
          absl::StrCat(where, ".", key),
          absl::StrCat("Unrecognized request argument supplied: ", where, ".", key));
    }
    const json* role = FindField(m, "role");
    if (role == nullptr) return InvalidParam(where + ".role", where + ".role is required");
    if (!role->is_string()) return WrongType(where + ".role", "a string", *role);
    const std::string r = role->get<std::string>();
    if (r == "tool" || r == "function") {
      return UnsupportedParam(where + ".role",
                              absl::StrCat(where, ".role \"", r, "\" is not supported (tools)"));
    }
    if (r != "system" && r != "developer" && r != "user" && r != "assistant") {
      return InvalidParam(where + ".role",
                          absl::StrCat(where,
                                       ".role must be one of system, developer, user, "
                                       "assistant; got \"",
                                       r, "\""));
    }
    if (const json* name = FindField(m, "name"); name != nullptr && !name->is_string()) {
      return WrongType(where + ".name", "a string", *name);
    }
    std::string content;
    const json* c = FindField(m, "content");
    if (c == nullptr) {
      if (r != "assistant") {
        return InvalidParam(where + ".content", where + ".content is required");
      }
    } else if (c->is_string()) {
      content = c->get<std::string>();
    } else if (c->is_array()) {
      for (size_t j = 0; j < c->size(); ++j) {
        const json& part = (*c)[j];
        const std::string pwhere = absl::StrCat(where, ".content[", j, "]");
        if (!part.is_object()) return WrongType(pwhere, "an object", part);
        const json* type = FindField(part, "type");
        if (type == nullptr || !type->is_string()) {
          return InvalidParam(pwhere + ".type", pwhere + ".type must be a string");
        }
        if (type->get<std::string>() != "text") {
          return UnsupportedParam(pwhere + ".type",
                                  absl::StrCat(pwhere, ".type \"", type->get<std::string>(),
                                               "\" is not supported; only \"text\" parts are"));
        }
        for (auto f = part.begin(); f != part.end(); ++f) {
          if (f.key() != "type" && f.key() != "text") {
            return InvalidParam(
                absl::StrCat(pwhere, ".", f.key()),
                absl::StrCat("Unrecognized request argument supplied: ", pwhere, ".", f.key()));
          }
        }
        const json* text = FindField(part, "text");
        if (text == nullptr) return InvalidParam(pwhere + ".text", pwhere + ".text is required");
        if (!text->is_string()) return WrongType(pwhere + ".text", "a string", *text);
        content += text->get_ref<const std::string&>();
      }
    } else {
      return WrongType(where + ".content", "a string or an array of content parts", *c);
    }
    v1::ChatMessage* out = chat->add_messages();
    out->set_role(r);
    out->set_content(std::move(content));
  }
  return absl::OkStatus();
}

}  // namespace tandem
