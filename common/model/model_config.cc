#include "common/model/model_config.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/util/mapped_file.h"
#include "common/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace tandem {
namespace {

using json = nlohmann::json;

// Typed access to the fields of one JSON object; every error names the file and the field.
class FieldReader {
 public:
  FieldReader(const json& obj, const std::string& path, std::string prefix = "")
      : obj_(obj), path_(path), prefix_(std::move(prefix)) {}

  // Absent and null both read as "not given".
  bool Has(const char* field) const {
    auto it = obj_.find(field);
    return it != obj_.end() && !it->is_null();
  }

  absl::StatusOr<int> RequiredInt(const char* field) const {
    if (!Has(field)) return Error(field, "is missing");
    return ToInt(field, obj_.at(field));
  }

  absl::StatusOr<int> OptionalInt(const char* field, int default_value) const {
    if (!Has(field)) return default_value;
    return ToInt(field, obj_.at(field));
  }

  absl::StatusOr<float> RequiredFloat(const char* field) const {
    if (!Has(field)) return Error(field, "is missing");
    return ToFloat(field, obj_.at(field));
  }

  absl::StatusOr<float> OptionalFloat(const char* field, float default_value) const {
    if (!Has(field)) return default_value;
    return ToFloat(field, obj_.at(field));
  }

  absl::StatusOr<bool> OptionalBool(const char* field, bool default_value) const {
    if (!Has(field)) return default_value;
    const json& v = obj_.at(field);
    if (!v.is_boolean()) return Error(field, absl::StrCat("must be true or false, got ", v.dump()));
    return v.get<bool>();
  }

  absl::StatusOr<std::string> OptionalString(const char* field, std::string default_value) const {
    if (!Has(field)) return default_value;
    const json& v = obj_.at(field);
    if (!v.is_string()) return Error(field, absl::StrCat("must be a string, got ", v.dump()));
    return v.get<std::string>();
  }

  absl::Status Error(const char* field, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": field '", prefix_, field, "' ", what));
  }

 private:
  absl::StatusOr<int> ToInt(const char* field, const json& v) const {
    double d;
    if (v.is_number_integer()) {
      d = static_cast<double>(v.get<int64_t>());
    } else if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()) {
      d = v.get<double>();
    } else {
      return Error(field, absl::StrCat("must be an integer, got ", v.dump()));
    }
    if (d < std::numeric_limits<int>::min() || d > std::numeric_limits<int>::max()) {
      return Error(field, absl::StrCat("is out of range: ", v.dump()));
    }
    return static_cast<int>(d);
  }

  absl::StatusOr<float> ToFloat(const char* field, const json& v) const {
    if (!v.is_number()) return Error(field, absl::StrCat("must be a number, got ", v.dump()));
    double d = v.get<double>();
    if (!std::isfinite(d)) return Error(field, "must be finite");
    return static_cast<float>(d);
  }

  const json& obj_;
  const std::string& path_;
  std::string prefix_;
};

std::optional<Architecture> ArchitectureFromName(std::string_view name) {
  if (name == "LlamaForCausalLM") return Architecture::kLlama;
  if (name == "MistralForCausalLM") return Architecture::kMistral;
  if (name == "Qwen2ForCausalLM") return Architecture::kQwen2;
  if (name == "Qwen3ForCausalLM") return Architecture::kQwen3;
  return std::nullopt;
}

std::optional<Architecture> ArchitectureFromModelType(std::string_view model_type) {
  if (model_type == "llama") return Architecture::kLlama;
  if (model_type == "mistral") return Architecture::kMistral;
  if (model_type == "qwen2") return Architecture::kQwen2;
  if (model_type == "qwen3") return Architecture::kQwen3;
  return std::nullopt;
}

std::string_view ModelType(Architecture a) {
  switch (a) {
    case Architecture::kLlama:
      return "llama";
    case Architecture::kMistral:
      return "mistral";
    case Architecture::kQwen2:
      return "qwen2";
    case Architecture::kQwen3:
      return "qwen3";
  }
  return "?";
}

absl::StatusOr<Architecture> ParseArchitecture(const json& j, const std::string& path) {
  auto it = j.find("architectures");
  if (it != j.end() && !it->is_null()) {
    if (!it->is_array() || it->empty() || !(*it)[0].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": field 'architectures' must be a non-empty list of strings, got ", it->dump()));
    }
    std::string name = (*it)[0].get<std::string>();
    if (auto a = ArchitectureFromName(name)) return *a;
    return absl::UnimplementedError(absl::StrCat(
        path, ": unsupported architecture '", name,
        "' (supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM)"));
  }
  auto mt = j.find("model_type");
  if (mt != j.end() && mt->is_string()) {
    if (auto a = ArchitectureFromModelType(mt->get<std::string>())) return *a;
    return absl::UnimplementedError(absl::StrCat(path, ": unsupported architecture (model_type '",
                                                 mt->get<std::string>(), "')"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": field 'architectures' is missing (and no model_type)"));
}

// rope_scaling (or the newer rope_parameters); `field` names it in errors.
absl::StatusOr<RopeScaling> ParseRopeScaling(const json& rs, const std::string& path,
                                             const std::string& field) {
  RopeScaling out;
  if (rs.is_null()) return out;
  if (!rs.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": field '", field, "' must be an object or null, got ", rs.dump()));
  }
  FieldReader r(rs, path, field + ".");
  std::string type;
  if (r.Has("rope_type")) {
    ASSIGN_OR_RETURN(type, r.OptionalString("rope_type", ""));
  } else {
    ASSIGN_OR_RETURN(type, r.OptionalString("type", "default"));
  }
  if (type == "default") return out;
  if (type == "linear") {
    out.type = RopeScaling::Type::kLinear;
    ASSIGN_OR_RETURN(out.factor, r.RequiredFloat("factor"));
  } else if (type == "llama3") {
    out.type = RopeScaling::Type::kLlama3;
    ASSIGN_OR_RETURN(out.factor, r.RequiredFloat("factor"));
    ASSIGN_OR_RETURN(out.low_freq_factor, r.RequiredFloat("low_freq_factor"));
    ASSIGN_OR_RETURN(out.high_freq_factor, r.RequiredFloat("high_freq_factor"));
    ASSIGN_OR_RETURN(out.original_max_position_embeddings,
                     r.RequiredInt("original_max_position_embeddings"));
    if (out.high_freq_factor <= out.low_freq_factor) {
      return r.Error("high_freq_factor", "must be greater than low_freq_factor");
    }
    if (out.original_max_position_embeddings <= 0) {
      return r.Error("original_max_position_embeddings", "must be positive");
    }
  } else {
    return absl::UnimplementedError(absl::StrCat(path, ": unsupported rope scaling type '", type,
                                                 "' in field '", field,
                                                 "' (supported: default, linear, llama3)"));
  }
  if (!(out.factor > 0.0f)) return r.Error("factor", "must be positive");
  return out;
}

// Sliding-window attention, which each family spells differently.
absl::StatusOr<int> ParseSlidingWindow(const FieldReader& r, Architecture arch, int num_layers,
                                       const std::string& path) {
  if (arch == Architecture::kLlama) return 0;
  ASSIGN_OR_RETURN(int window, r.OptionalInt("sliding_window", 0));
  if (arch == Architecture::kMistral) {
    if (window < 0) return r.Error("sliding_window", "must be positive or null");
    return window;
  }
  // Qwen2/Qwen3: the window applies only when use_sliding_window is true, and then only to the
  // layers from max_window_layers on.
  ASSIGN_OR_RETURN(bool use, r.OptionalBool("use_sliding_window", false));
  if (!use || window == 0) return 0;
  if (window < 0) return r.Error("sliding_window", "must be positive");
  ASSIGN_OR_RETURN(int max_window_layers, r.OptionalInt("max_window_layers", num_layers));
  if (max_window_layers >= num_layers) return 0;  // no layer slides
  if (max_window_layers > 0) {
    return absl::UnimplementedError(
        absl::StrCat(path, ": sliding window on only some layers (max_window_layers ",
                     max_window_layers, " of ", num_layers, ") is not supported"));
  }
  return window;
}

absl::Status Validate(const ModelConfig& c, const FieldReader& r) {
  if (c.vocab_size <= 0) return r.Error("vocab_size", "must be positive");
  if (c.hidden_size <= 0) return r.Error("hidden_size", "must be positive");
  if (c.intermediate_size <= 0) return r.Error("intermediate_size", "must be positive");
  if (c.num_layers <= 0) return r.Error("num_hidden_layers", "must be positive");
  if (c.num_heads <= 0) return r.Error("num_attention_heads", "must be positive");
  if (c.num_kv_heads <= 0) return r.Error("num_key_value_heads", "must be positive");
  if (c.head_dim <= 0) return r.Error("head_dim", "must be positive");
  if (c.head_dim % 2 != 0) {
    return r.Error("head_dim",
                   absl::StrCat("must be even for rotary embeddings, got ", c.head_dim));
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return r.Error(
        "num_key_value_heads",
        absl::StrCat("(", c.num_kv_heads, ") must divide num_attention_heads (", c.num_heads, ")"));
  }
  if (c.max_position_embeddings <= 0) return r.Error("max_position_embeddings", "must be positive");
  if (!(c.rms_norm_eps > 0.0f)) return r.Error("rms_norm_eps", "must be positive");
  if (!(c.rope_theta > 0.0f)) return r.Error("rope_theta", "must be positive");
  if (c.bos_token_id < -1 || c.bos_token_id >= c.vocab_size) {
    return r.Error(
        "bos_token_id",
        absl::StrCat("(", c.bos_token_id, ") is outside the vocabulary (", c.vocab_size, ")"));
  }
  for (int id : c.eos_token_ids) {
    if (id < 0 || id >= c.vocab_size) {
      return r.Error("eos_token_id",
                     absl::StrCat("(", id, ") is outside the vocabulary (", c.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> ParseEosTokenIds(const json& j, const FieldReader& r) {
  std::vector<int> out;
  auto it = j.find("eos_token_id");
  if (it == j.end() || it->is_null()) return out;
  if (it->is_number_integer()) {
    out.push_back(it->get<int>());
    return out;
  }
  if (it->is_array()) {
    for (const json& v : *it) {
      if (!v.is_number_integer()) {
        return r.Error("eos_token_id", absl::StrCat("must hold integers, got ", it->dump()));
      }
      out.push_back(v.get<int>());
    }
    return out;
  }
  return r.Error("eos_token_id", absl::StrCat("must be an integer or a list, got ", it->dump()));
}

// A float as the double with the same shortest decimal spelling (1e-05, not 9.99999974e-06).
double ShortestDouble(float f) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), f);
  return ec == std::errc() ? std::strtod(std::string(buf, end).c_str(), nullptr) : f;
}

}  // namespace

std::string_view ArchitectureName(Architecture a) {
  switch (a) {
    case Architecture::kLlama:
      return "LlamaForCausalLM";
    case Architecture::kMistral:
      return "MistralForCausalLM";
    case Architecture::kQwen2:
      return "Qwen2ForCausalLM";
    case Architecture::kQwen3:
      return "Qwen3ForCausalLM";
  }
  return "?";
}

int64_t ModelConfig::NumParameters() const {
  const int64_t h = hidden_size, q = q_size(), kv = kv_size(), inter = intermediate_size;
  int64_t layer = h * q + 2 * h * kv + q * h  // q, k, v, o projections
                  + 3 * h * inter             // gate, up, down
                  + 2 * h;                    // input and post-attention norms
  if (attention_bias) {
    layer += q + 2 * kv;                                   // q/k/v biases
    if (architecture != Architecture::kQwen2) layer += h;  // Llama/Qwen3 also bias o_proj
  }
  if (qk_norm) layer += 2 * head_dim;
  int64_t embed = static_cast<int64_t>(vocab_size) * h;
  return embed + num_layers * layer + h + (tie_word_embeddings ? 0 : embed);
}

absl::StatusOr<ModelConfig> ParseModelConfig(std::string_view json_text, const std::string& path) {
  json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON"));
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": expected a JSON object"));
  }
  FieldReader r(j, path);
  ModelConfig c;
  ASSIGN_OR_RETURN(c.architecture, ParseArchitecture(j, path));
  const Architecture arch = c.architecture;

  if (r.Has("quantization_config")) {
    return absl::UnimplementedError(
        absl::StrCat(path, ": quantized models (field 'quantization_config') are not supported"));
  }
  ASSIGN_OR_RETURN(std::string act, r.OptionalString("hidden_act", "silu"));
  if (act != "silu") {
    return r.Error("hidden_act", absl::StrCat("'", act, "' is not supported (only silu)"));
  }
  ASSIGN_OR_RETURN(bool mlp_bias, r.OptionalBool("mlp_bias", false));
  if (mlp_bias) return r.Error("mlp_bias", "true is not supported");

  ASSIGN_OR_RETURN(c.vocab_size, r.RequiredInt("vocab_size"));
  ASSIGN_OR_RETURN(c.hidden_size, r.RequiredInt("hidden_size"));
  ASSIGN_OR_RETURN(c.intermediate_size, r.RequiredInt("intermediate_size"));
  ASSIGN_OR_RETURN(c.num_layers, r.RequiredInt("num_hidden_layers"));
  ASSIGN_OR_RETURN(c.num_heads, r.RequiredInt("num_attention_heads"));
  ASSIGN_OR_RETURN(c.num_kv_heads, r.OptionalInt("num_key_value_heads", c.num_heads));
  if (!r.Has("head_dim") && c.num_heads > 0 && c.hidden_size % c.num_heads != 0) {
    return r.Error("head_dim",
                   absl::StrCat("is missing and hidden_size (", c.hidden_size,
                                ") is not divisible by num_attention_heads (", c.num_heads, ")"));
  }
  ASSIGN_OR_RETURN(c.head_dim,
                   r.OptionalInt("head_dim", c.num_heads > 0 ? c.hidden_size / c.num_heads : 0));

  // Hugging Face's per-family defaults for the optional fields.
  const int default_max_pos = arch == Architecture::kLlama     ? 2048
                              : arch == Architecture::kMistral ? 4096 * 32
                                                               : 32768;
  ASSIGN_OR_RETURN(c.max_position_embeddings,
                   r.OptionalInt("max_position_embeddings", default_max_pos));
  ASSIGN_OR_RETURN(c.rms_norm_eps, r.OptionalFloat("rms_norm_eps", 1e-6f));
  ASSIGN_OR_RETURN(c.rope_theta, r.OptionalFloat("rope_theta", 10000.0f));
  if (r.Has("rope_scaling")) {
    ASSIGN_OR_RETURN(c.rope_scaling, ParseRopeScaling(j.at("rope_scaling"), path, "rope_scaling"));
  } else if (r.Has("rope_parameters")) {  // transformers >= 5 keeps rope_theta here too
    const json& rp = j.at("rope_parameters");
    ASSIGN_OR_RETURN(c.rope_scaling, ParseRopeScaling(rp, path, "rope_parameters"));
    if (rp.is_object()) {
      FieldReader rpr(rp, path, "rope_parameters.");
      ASSIGN_OR_RETURN(c.rope_theta, rpr.OptionalFloat("rope_theta", c.rope_theta));
    }
  }
  ASSIGN_OR_RETURN(c.tie_word_embeddings, r.OptionalBool("tie_word_embeddings", false));

  switch (arch) {
    case Architecture::kQwen2:  // q/k/v biases are hard-wired in Qwen2's attention
      c.attention_bias = true;
      break;
    case Architecture::kQwen3: {  // per-head q/k RMSNorm is hard-wired in Qwen3's attention
      c.qk_norm = true;
      ASSIGN_OR_RETURN(c.attention_bias, r.OptionalBool("attention_bias", false));
      break;
    }
    case Architecture::kLlama: {
      ASSIGN_OR_RETURN(c.attention_bias, r.OptionalBool("attention_bias", false));
      break;
    }
    case Architecture::kMistral:
      break;
  }
  ASSIGN_OR_RETURN(c.sliding_window, ParseSlidingWindow(r, arch, c.num_layers, path));

  std::string dtype_field = r.Has("torch_dtype") ? "torch_dtype" : "dtype";
  ASSIGN_OR_RETURN(std::string dtype_name, r.OptionalString(dtype_field.c_str(), "float32"));
  std::optional<DType> dtype = ParseDType(dtype_name);
  if (!dtype) {
    return r.Error(
        dtype_field.c_str(),
        absl::StrCat("'", dtype_name, "' is not supported (float32, float16, bfloat16)"));
  }
  c.dtype = *dtype;

  ASSIGN_OR_RETURN(c.bos_token_id, r.OptionalInt("bos_token_id", -1));
  ASSIGN_OR_RETURN(c.eos_token_ids, ParseEosTokenIds(j, r));
  RETURN_IF_ERROR(Validate(c, r));
  return c;
}

absl::StatusOr<ModelConfig> LoadModelConfig(const std::string& model_dir) {
  std::string path = model_dir + "/config.json";
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) {
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot read the model config (", text.status().message(), ")"));
  }
  return ParseModelConfig(*text, path);
}

std::string ModelConfigToJson(const ModelConfig& c) {
  json j = json::object();
  j["architectures"] = json::array({std::string(ArchitectureName(c.architecture))});
  j["model_type"] = std::string(ModelType(c.architecture));
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = ShortestDouble(c.rms_norm_eps);
  j["rope_theta"] = ShortestDouble(c.rope_theta);
  switch (c.rope_scaling.type) {
    case RopeScaling::Type::kNone:
      j["rope_scaling"] = nullptr;
      break;
    case RopeScaling::Type::kLinear:
      j["rope_scaling"] = {{"rope_type", "linear"},
                           {"factor", ShortestDouble(c.rope_scaling.factor)}};
      break;
    case RopeScaling::Type::kLlama3:
      j["rope_scaling"] = {
          {"rope_type", "llama3"},
          {"factor", ShortestDouble(c.rope_scaling.factor)},
          {"low_freq_factor", ShortestDouble(c.rope_scaling.low_freq_factor)},
          {"high_freq_factor", ShortestDouble(c.rope_scaling.high_freq_factor)},
          {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings}};
      break;
  }
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  switch (c.architecture) {
    case Architecture::kLlama:
      j["attention_bias"] = c.attention_bias;
      j["mlp_bias"] = false;
      break;
    case Architecture::kMistral:
      j["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
      break;
    case Architecture::kQwen2:
    case Architecture::kQwen3:
      if (c.architecture == Architecture::kQwen3) j["attention_bias"] = c.attention_bias;
      j["use_sliding_window"] = c.sliding_window > 0;
      j["sliding_window"] = c.sliding_window > 0 ? json(c.sliding_window) : json(nullptr);
      j["max_window_layers"] = c.sliding_window > 0 ? 0 : c.num_layers;
      break;
  }
  j["torch_dtype"] = c.dtype == DType::kF32   ? "float32"
                     : c.dtype == DType::kF16 ? "float16"
                                              : "bfloat16";
  j["bos_token_id"] = c.bos_token_id >= 0 ? json(c.bos_token_id) : json(nullptr);
  if (c.eos_token_ids.empty()) {
    j["eos_token_id"] = nullptr;
  } else if (c.eos_token_ids.size() == 1) {
    j["eos_token_id"] = c.eos_token_ids[0];
  } else {
    j["eos_token_id"] = c.eos_token_ids;
  }
  return j.dump(2) + "\n";
}

}  // namespace tandem
