// Fuzzes the parsers of a model directory's files with the same bytes each time: config.json
// (common/model/model_config.h), tokenizer_config.json (common/tokenizer/tokenizer_config.h) and
// safetensors (common/model/safetensors.h: ParseSafetensors, what SafetensorsStore runs on each
// file it maps), the latter on the bytes as they are and on the bytes as the JSON header of a
// file with a small data section. A config that parses prints to JSON that parses to the same
// config; tensors that parse lie inside the file.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/model/model_config.h"
#include "common/model/safetensors.h"
#include "common/tokenizer/tokenizer_config.h"
#include "tests/fuzz/fuzz_common.h"

namespace tandem {
namespace {

constexpr size_t kDataBytes = 256;

void CheckSafetensors(std::span<const uint8_t> file) {
  absl::StatusOr<std::vector<TensorView>> tensors = ParseSafetensors(file, "fuzz.safetensors");
  if (!tensors.ok()) return;
  for (const TensorView& t : *tensors) {
    FUZZ_CHECK(t.data >= file.data() + 8);
    FUZZ_CHECK(t.data + t.nbytes <= file.data() + file.size());
    FUZZ_CHECK(static_cast<uint64_t>(t.numel()) * DTypeSize(t.dtype) == t.nbytes);
  }
}

}  // namespace
}  // namespace tandem

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  absl::StatusOr<tandem::ModelConfig> config = tandem::ParseModelConfig(text, "config.json");
  if (config.ok()) {
    (void)config->NumParameters();
    const std::string json = tandem::ModelConfigToJson(*config);
    absl::StatusOr<tandem::ModelConfig> again = tandem::ParseModelConfig(json, "again.json");
    FUZZ_CHECK(again.ok());
    FUZZ_CHECK(tandem::ModelConfigToJson(*again) == json);
  }

  (void)tandem::ParseTokenizerConfig(text, "tokenizer_config.json");

  tandem::CheckSafetensors(std::span<const uint8_t>(data, size));
  // The bytes as the header of a file: 8-byte little-endian length, header, data section.
  std::vector<uint8_t> file(8 + size + tandem::kDataBytes, 0);
  for (int i = 0; i < 8; ++i) file[i] = static_cast<uint8_t>((uint64_t{size} >> (8 * i)) & 0xff);
  if (size > 0) std::memcpy(file.data() + 8, data, size);
  tandem::CheckSafetensors(file);
  return 0;
}
