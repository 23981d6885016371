// tandem-tokenize-tool: encodes and decodes every line of a JSONL corpus with tandem's
// tokenizer, for comparison with the @lenml/tokenizers reference (see conformance.mjs).
//
//   tandem_tokenize_tool --tokenizer PATH/tokenizer.json --input corpus.jsonl --output out.jsonl
//
// Input lines are {"text": "..."}; each output line is
//   {"ids": [...], "ids_with_special": [...], "decoded": "...", "decoded_skip_special": "...",
//    "streamed": "..."}
// where "streamed" is the concatenation of StreamingDetokenizer output over "ids".
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "common/tokenizer/streaming_detokenizer.h"
#include "common/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace {

int Fail(const std::string& message) {
  std::cerr << "tandem_tokenize_tool: " << message << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_path, input_path, output_path;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--tokenizer") {
      tokenizer_path = argv[i + 1];
    } else if (flag == "--input") {
      input_path = argv[i + 1];
    } else if (flag == "--output") {
      output_path = argv[i + 1];
    } else {
      return Fail("unknown flag " + flag);
    }
  }
  if (tokenizer_path.empty() || input_path.empty() || output_path.empty()) {
    return Fail("usage: --tokenizer tokenizer.json --input corpus.jsonl --output out.jsonl");
  }
  const auto start = std::chrono::steady_clock::now();
  auto tokenizer = tandem::Tokenizer::FromFile(tokenizer_path);
  if (!tokenizer.ok()) return Fail(std::string(tokenizer.status().message()));
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "loaded " << tokenizer_path << " in " << load_s << " s\n";

  std::ifstream in(input_path);
  if (!in) return Fail("cannot read " + input_path);
  std::ofstream out(output_path);
  if (!out) return Fail("cannot write " + output_path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto doc = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded() || !doc.contains("text") || !doc["text"].is_string()) {
      return Fail("line " + std::to_string(n + 1) + " of " + input_path + " has no \"text\"");
    }
    const std::string text = doc["text"].get<std::string>();
    const auto ids = (*tokenizer)->Encode(text, /*add_special_tokens=*/false);
    const auto ids_special = (*tokenizer)->Encode(text, /*add_special_tokens=*/true);
    tandem::StreamingDetokenizer stream(**tokenizer);
    std::string streamed;
    for (tandem::TokenId id : ids) streamed += stream.Push(id);
    streamed += stream.Flush();
    nlohmann::json result = {
        {"ids", ids},
        {"ids_with_special", ids_special},
        {"decoded", (*tokenizer)->Decode(ids)},
        {"decoded_skip_special", (*tokenizer)->Decode(ids, /*skip_special_tokens=*/true)},
        {"streamed", streamed},
    };
    out << result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    ++n;
  }
  std::cerr << "tokenized " << n << " lines\n";
  return 0;
}
