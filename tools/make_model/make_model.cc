#include "tools/make_model/make_model.h"

#include <filesystem>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/model/safetensors.h"
#include "common/model/safetensors_writer.h"
#include "common/util/status_macros.h"
#include "nlohmann/json.hpp"
#include "tools/make_model/random_weights.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Shape {
  int hidden, layers, heads, kv_heads, intermediate;
};

std::optional<Shape> PresetShape(const std::string& preset) {
  if (preset == "tiny") return Shape{64, 2, 4, 2, 128};
  if (preset == "small") return Shape{256, 4, 8, 2, 512};
  if (preset == "100m") return Shape{256, 16, 4, 2, 2304};
  return std::nullopt;
}

// The family defaults of each --arch, as in the published configs of that family.
absl::Status ApplyArchDefaults(const std::string& arch, ModelConfig* c) {
  RopeScaling llama3;
  llama3.type = RopeScaling::Type::kLlama3;
  llama3.low_freq_factor = 1.0f;
  llama3.high_freq_factor = 4.0f;
  llama3.original_max_position_embeddings = 8192;
  if (arch == "llama" || arch == "llama3.1" || arch == "llama3.2") {
    c->architecture = Architecture::kLlama;
    c->rope_theta = 500000.0f;
    c->rms_norm_eps = 1e-5f;
    c->max_position_embeddings = 8192;
    if (arch != "llama") {
      c->max_position_embeddings = 131072;
      c->rope_scaling = llama3;
      c->rope_scaling.factor = arch == "llama3.1" ? 8.0f : 32.0f;
    }
    c->tie_word_embeddings = arch == "llama3.2";
  } else if (arch == "mistral") {
    c->architecture = Architecture::kMistral;
    c->rope_theta = 1000000.0f;
    c->rms_norm_eps = 1e-5f;
    c->max_position_embeddings = 32768;
    c->sliding_window = 0;  // written as null, as in Mistral-7B-v0.2 and later
  } else if (arch == "qwen2") {
    c->architecture = Architecture::kQwen2;
    c->rope_theta = 1000000.0f;
    c->rms_norm_eps = 1e-6f;
    c->max_position_embeddings = 32768;
    c->attention_bias = true;
  } else if (arch == "qwen3") {
    c->architecture = Architecture::kQwen3;
    c->rope_theta = 1000000.0f;
    c->rms_norm_eps = 1e-6f;
    c->max_position_embeddings = 40960;
    c->qk_norm = true;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown --arch '", arch, "' (one of: ", absl::StrJoin(kMakeModelArchs, ", "), ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckPositive(const char* flag, const std::optional<int>& v) {
  if (v && *v <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be positive, got ", *v));
  }
  return absl::OkStatus();
}

absl::Status WriteTextFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot write"));
  return absl::OkStatus();
}

std::string GenerationConfigJson(const ModelConfig& c) {
  json j = json::object();
  j["bos_token_id"] = c.bos_token_id >= 0 ? json(c.bos_token_id) : json(nullptr);
  if (c.eos_token_ids.size() == 1) {
    j["eos_token_id"] = c.eos_token_ids[0];
  } else {
    j["eos_token_id"] = c.eos_token_ids;
  }
  j["do_sample"] = false;
  return j.dump(2) + "\n";
}

// "model-00001-of-00003.safetensors" and the like.
bool IsShardFileName(const std::string& name) {
  return absl::StartsWith(name, "model-") && absl::EndsWith(name, ".safetensors") &&
         absl::StrContains(name, "-of-");
}

// Removes weights a previous run left in `dir`.
absl::Status RemoveOldWeights(const std::string& dir) {
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name == kSafetensorsFileName || name == kSafetensorsIndexFileName ||
        IsShardFileName(name)) {
      fs::remove(e.path(), ec);
      if (ec)
        return absl::PermissionDeniedError(absl::StrCat(e.path().string(), ": cannot remove"));
    }
  }
  if (ec) return absl::NotFoundError(absl::StrCat(dir, ": cannot list: ", ec.message()));
  return absl::OkStatus();
}

absl::Status CopyInto(const std::string& src, const std::string& dst) {
  std::error_code ec;
  if (fs::exists(dst) && fs::equivalent(src, dst, ec)) return absl::OkStatus();
  fs::copy_file(src, dst, fs::copy_options::overwrite_existing, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot copy ", src, " to ", dst, ": ", ec.message()));
  }
  return absl::OkStatus();
}

std::string TokenizerConfigPath(const MakeModelOptions& o) {
  if (!o.tokenizer_config_path.empty()) return o.tokenizer_config_path;
  return (fs::path(o.tokenizer_path).parent_path() / "tokenizer_config.json").string();
}

}  // namespace

absl::StatusOr<ModelConfig> BuildModelConfig(const MakeModelOptions& o,
                                             const TokenizerInfo& tokenizer) {
  ModelConfig c;
  RETURN_IF_ERROR(ApplyArchDefaults(o.arch, &c));
  std::optional<Shape> shape = PresetShape(o.preset);
  if (!shape) {
    return absl::InvalidArgumentError(absl::StrCat("unknown --preset '", o.preset, "' (one of: ",
                                                   absl::StrJoin(kMakeModelPresets, ", "), ")"));
  }
  RETURN_IF_ERROR(CheckPositive("hidden", o.hidden));
  RETURN_IF_ERROR(CheckPositive("layers", o.layers));
  RETURN_IF_ERROR(CheckPositive("heads", o.heads));
  RETURN_IF_ERROR(CheckPositive("kv-heads", o.kv_heads));
  RETURN_IF_ERROR(CheckPositive("head-dim", o.head_dim));
  RETURN_IF_ERROR(CheckPositive("intermediate", o.intermediate));
  RETURN_IF_ERROR(CheckPositive("vocab", o.vocab));
  c.hidden_size = o.hidden.value_or(shape->hidden);
  c.num_layers = o.layers.value_or(shape->layers);
  c.num_heads = o.heads.value_or(shape->heads);
  c.num_kv_heads = o.kv_heads.value_or(shape->kv_heads);
  c.intermediate_size = o.intermediate.value_or(shape->intermediate);
  if (o.head_dim) {
    c.head_dim = *o.head_dim;
  } else if (c.hidden_size % c.num_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("hidden size ", c.hidden_size,
                                                   " is not divisible by ", c.num_heads,
                                                   " heads; pass --head-dim"));
  } else {
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("head dim ", c.head_dim, " must be even (rotary embeddings)"));
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(c.num_kv_heads, " kv heads do not divide ", c.num_heads, " attention heads"));
  }
  if (o.extra_layers_from && (*o.extra_layers_from < 1 || *o.extra_layers_from >= c.num_layers)) {
    return absl::InvalidArgumentError(absl::StrCat("--extra-layers-from ", *o.extra_layers_from,
                                                   " must be in [1, ", c.num_layers - 1,
                                                   "] (the model has ", c.num_layers, " layers)"));
  }
  if (!(o.extra_layer_gain >= 0.0f && o.extra_layer_gain <= 100.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--extra-layer-gain ", o.extra_layer_gain, " must be in [0, 100]"));
  }
  c.vocab_size = o.vocab.value_or(tokenizer.vocab_size);
  if (c.vocab_size < tokenizer.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("--vocab ", c.vocab_size,
                                                   " is smaller than the tokenizer's vocabulary (",
                                                   tokenizer.vocab_size, " tokens)"));
  }
  c.dtype = o.dtype;
  c.bos_token_id = tokenizer.bos_token_id;
  if (tokenizer.eos_token_id >= 0) c.eos_token_ids.push_back(tokenizer.eos_token_id);
  if (o.arch == "llama3.1" || o.arch == "llama3.2") {
    // Llama 3.1+ ends turns with <|eot_id|> and tool calls with <|eom_id|>.
    for (const char* extra : {"<|eom_id|>", "<|eot_id|>"}) {
      auto it = tokenizer.added_tokens.find(extra);
      if (it != tokenizer.added_tokens.end() && it->second != tokenizer.eos_token_id) {
        c.eos_token_ids.push_back(it->second);
      }
    }
  }
  if (c.eos_token_ids.empty()) {
    return absl::InvalidArgumentError("the tokenizer config names no eos_token");
  }
  // The written config must read back as the same model.
  absl::StatusOr<ModelConfig> reread = ParseModelConfig(ModelConfigToJson(c), "config.json");
  if (!reread.ok()) return reread.status();
  return c;
}

absl::StatusOr<MakeModelResult> MakeModel(const MakeModelOptions& o) {
  if (o.out_dir.empty()) return absl::InvalidArgumentError("--out DIR is required");
  if (o.tokenizer_path.empty()) {
    return absl::InvalidArgumentError(
        "--tokenizer PATH/tokenizer.json is required (the model's vocabulary and special tokens "
        "come from it)");
  }
  if (o.shards < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--shards must be >= 1, got ", o.shards));
  }
  const std::string tokenizer_config = TokenizerConfigPath(o);
  ASSIGN_OR_RETURN(TokenizerInfo tokenizer, ReadTokenizerInfo(o.tokenizer_path, tokenizer_config));
  MakeModelResult result;
  ASSIGN_OR_RETURN(result.config, BuildModelConfig(o, tokenizer));
  const ModelConfig& c = result.config;

  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(absl::StrCat(o.out_dir, ": cannot create: ", ec.message()));
  }
  RETURN_IF_ERROR(RemoveOldWeights(o.out_dir));

  // Generate in f32, store in the requested dtype.
  WeightScales scales;
  scales.extra_layers_from = o.extra_layers_from.value_or(-1);
  scales.extra_layer_gain = o.extra_layer_gain;
  std::vector<GeneratedTensor> generated = GenerateRandomWeights(c, o.seed, scales);
  std::vector<std::vector<uint8_t>> encoded;
  std::vector<TensorToWrite> tensors;
  encoded.reserve(generated.size());
  for (GeneratedTensor& g : generated) {
    encoded.push_back(EncodeF32(o.dtype, g.values));
    std::vector<float>().swap(g.values);
    tensors.push_back({g.name, o.dtype, g.shape, encoded.back()});
  }
  if (o.shards == 1) {
    const std::string path = absl::StrCat(o.out_dir, "/", kSafetensorsFileName);
    RETURN_IF_ERROR(WriteSafetensors(path, tensors, {{"format", "pt"}}));
    result.files.push_back(path);
  } else {
    ASSIGN_OR_RETURN(auto shards, ShardIntoCount(tensors, o.shards));
    RETURN_IF_ERROR(WriteSafetensorsShards(o.out_dir, shards));
    for (int i = 0; i < o.shards; ++i) {
      result.files.push_back(absl::StrCat(o.out_dir, "/", ShardFileName(i, o.shards)));
    }
    result.files.push_back(absl::StrCat(o.out_dir, "/", kSafetensorsIndexFileName));
  }

  const std::string config_path = o.out_dir + "/config.json";
  RETURN_IF_ERROR(WriteTextFile(config_path, ModelConfigToJson(c)));
  const std::string gen_path = o.out_dir + "/generation_config.json";
  RETURN_IF_ERROR(WriteTextFile(gen_path, GenerationConfigJson(c)));
  const std::string tok_dst = o.out_dir + "/tokenizer.json";
  const std::string tok_cfg_dst = o.out_dir + "/tokenizer_config.json";
  RETURN_IF_ERROR(CopyInto(o.tokenizer_path, tok_dst));
  RETURN_IF_ERROR(CopyInto(tokenizer_config, tok_cfg_dst));
  for (const std::string& f : {config_path, gen_path, tok_dst, tok_cfg_dst}) {
    result.files.push_back(f);
  }
  return result;
}

}  // namespace tandem
