// tandem_chat_template_tool: renders Jinja templates with tandem's interpreter, for
// differential testing against Python's jinja2 (jinja_differential.py).
//
//   tandem_chat_template_tool --input cases.jsonl --output rendered.jsonl
//
// Input lines: {"template": "...", "context": {...}}; the context's keys become template
// variables (raise_exception and strftime_now are provided as in chat templates). Output
// lines: {"output": "..."} or {"error": "..."}.
#include <fstream>
#include <iostream>
#include <string>

#include "common/tokenizer/jinja/template.h"
#include "nlohmann/json.hpp"

int main(int argc, char** argv) {
  std::string input, output;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--input") input = argv[i + 1];
    if (flag == "--output") output = argv[i + 1];
  }
  std::ifstream in(input);
  std::ofstream out(output);
  if (!in || !out) {
    std::cerr << "usage: --input cases.jsonl --output rendered.jsonl\n";
    return 1;
  }
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto doc = nlohmann::ordered_json::parse(line, nullptr, false);
    nlohmann::ordered_json result;
    if (doc.is_discarded() || !doc.contains("template")) {
      result["error"] = "bad input line";
    } else {
      auto t = tandem::jinja::Template::Parse(doc["template"].get<std::string>());
      if (!t.ok()) {
        result["error"] = std::string(t.status().message());
      } else {
        tandem::jinja::ValueDict globals;
        if (doc.contains("context")) {
          for (const auto& [k, v] : doc["context"].items()) {
            globals.Set(k, tandem::jinja::Value::FromJson(v));
          }
        }
        globals.Set(
            "raise_exception",
            tandem::jinja::Value(tandem::jinja::Function(
                [](const tandem::jinja::CallArgs& args) -> absl::StatusOr<tandem::jinja::Value> {
                  const auto* m = args.Get(0, "message");
                  return absl::InvalidArgumentError(m ? m->Str() : "");
                })));
        auto r = t->Render(globals);
        if (r.ok()) {
          result["output"] = *r;
        } else {
          result["error"] = std::string(r.status().message());
        }
      }
    }
    out << result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  return 0;
}
