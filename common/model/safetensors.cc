#include "common/model/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <span>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace tandem {
namespace {

using json = nlohmann::json;

// The format's own cap on the header size (safetensors rejects larger headers).
constexpr uint64_t kMaxHeaderBytes = 100 << 20;
// Guards the shape product against overflow; no real tensor comes near.
constexpr int64_t kMaxNumel = int64_t{1} << 48;

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string TensorShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Safetensors spells dtypes exactly: "F32", "F16", "BF16" (and others tandem does not load).
std::optional<DType> SafetensorsDType(std::string_view s) {
  if (s == "F32") return DType::kF32;
  if (s == "F16") return DType::kF16;
  if (s == "BF16") return DType::kBF16;
  return std::nullopt;
}

struct ParsedTensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;  // relative to the data section
};

absl::StatusOr<ParsedTensor> ParseTensorEntry(const std::string& name, const json& v,
                                              const std::string& path, uint64_t data_size) {
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(
        absl::StrCat(path, ": corrupt header: tensor '", name, "' ", what, ": ", v.dump()));
  };
  if (!v.is_object()) return bad("is not an object");
  auto dt = v.find("dtype");
  auto sh = v.find("shape");
  auto off = v.find("data_offsets");
  if (dt == v.end() || !dt->is_string()) return bad("has no dtype string");
  if (sh == v.end() || !sh->is_array()) return bad("has no shape list");
  if (off == v.end() || !off->is_array() || off->size() != 2)
    return bad("has no data_offsets pair");

  ParsedTensor t;
  t.name = name;
  std::string dtype_name = dt->get<std::string>();
  std::optional<DType> dtype = SafetensorsDType(dtype_name);
  if (!dtype) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": tensor '", name,
                                                   "' has unsupported dtype ", dtype_name,
                                                   " (tandem loads F32, F16 and BF16)"));
  }
  t.dtype = *dtype;
  int64_t numel = 1;
  for (const json& d : *sh) {
    if (!d.is_number_unsigned()) return bad("has a shape entry that is not a non-negative integer");
    int64_t dim = static_cast<int64_t>(d.get<uint64_t>());
    if (dim > kMaxNumel || (dim > 0 && numel > kMaxNumel / dim)) return bad("has a huge shape");
    t.shape.push_back(dim);
    numel *= dim;
  }
  for (const json& o : *off) {
    if (!o.is_number_unsigned()) return bad("has data_offsets that are not non-negative integers");
  }
  t.begin = (*off)[0].get<uint64_t>();
  t.end = (*off)[1].get<uint64_t>();
  if (t.begin > t.end) return bad("has data_offsets with begin > end");
  if (t.end > data_size) {
    return absl::DataLossError(absl::StrCat(
        path, ": file is truncated or corrupt: tensor '", name, "' spans bytes [", t.begin, ", ",
        t.end, ") of the data section but the file holds only ", data_size, " data bytes"));
  }
  uint64_t expected = static_cast<uint64_t>(numel) * DTypeSize(t.dtype);
  if (t.end - t.begin != expected) {
    return absl::DataLossError(absl::StrCat(
        path, ": tensor '", name, "' has shape ", TensorShapeString(t.shape), " of ", dtype_name,
        " (", expected, " bytes) but its data_offsets span ", t.end - t.begin, " bytes"));
  }
  return t;
}

struct ParsedHeader {
  uint64_t data_start = 0;  // file offset of the data section
  std::vector<ParsedTensor> tensors;
};

absl::StatusOr<ParsedHeader> ParseHeader(std::span<const uint8_t> file, const std::string& path) {
  if (file.size() < 8) {
    return absl::DataLossError(absl::StrCat(path, ": file is truncated: ", file.size(),
                                            " bytes, too small for a safetensors header"));
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | file[i];  // little endian
  if (header_len > kMaxHeaderBytes) {
    return absl::DataLossError(
        absl::StrCat(path, ": corrupt header: header length ", header_len, " is implausible"));
  }
  if (header_len > file.size() - 8) {
    return absl::DataLossError(absl::StrCat(path, ": file is truncated: header length ", header_len,
                                            " exceeds the file size ", file.size()));
  }
  const char* text = reinterpret_cast<const char*>(file.data() + 8);
  json header = json::parse(text, text + header_len, nullptr, /*allow_exceptions=*/false);
  if (header.is_discarded() || !header.is_object()) {
    return absl::DataLossError(
        absl::StrCat(path, ": corrupt header: the JSON header does not parse as an object"));
  }
  const uint64_t data_size = file.size() - 8 - header_len;
  ParsedHeader out;
  out.data_start = 8 + header_len;
  std::vector<ParsedTensor>& tensors = out.tensors;
  for (auto& [name, v] : header.items()) {
    if (name == "__metadata__") continue;
    ASSIGN_OR_RETURN(ParsedTensor t, ParseTensorEntry(name, v, path, data_size));
    tensors.push_back(std::move(t));
  }
  // No two tensors may share bytes.
  std::vector<const ParsedTensor*> by_offset;
  for (const ParsedTensor& t : tensors) {
    if (t.end > t.begin) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const ParsedTensor* a, const ParsedTensor* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->begin < by_offset[i - 1]->end) {
      return absl::DataLossError(absl::StrCat(path, ": corrupt header: tensors '",
                                              by_offset[i - 1]->name, "' and '", by_offset[i]->name,
                                              "' overlap"));
    }
  }
  return out;
}

// weight_map of an index file: tensor name -> shard file name.
absl::StatusOr<std::map<std::string, std::string>> ParseIndex(const std::string& index_path) {
  absl::StatusOr<std::string> text = ReadFileToString(index_path);
  if (!text.ok()) return text.status();
  json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::DataLossError(absl::StrCat(index_path, ": not a valid JSON object"));
  }
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) {
    return absl::DataLossError(absl::StrCat(index_path, ": field 'weight_map' is missing"));
  }
  std::map<std::string, std::string> out;
  for (auto& [name, file] : wm->items()) {
    if (!file.is_string()) {
      return absl::DataLossError(absl::StrCat(index_path, ": weight_map entry for tensor '", name,
                                              "' is not a file name: ", file.dump()));
    }
    std::string f = file.get<std::string>();
    if (f.empty() || f.find('/') != std::string::npos || f == "." || f == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat(index_path, ": weight_map entry for tensor '", name, "' names '", f,
                       "', which is not a file name in the model directory"));
    }
    out.emplace(name, std::move(f));
  }
  if (out.empty()) return absl::DataLossError(absl::StrCat(index_path, ": weight_map is empty"));
  return out;
}

}  // namespace

absl::StatusOr<std::vector<TensorView>> ParseSafetensors(std::span<const uint8_t> bytes,
                                                         const std::string& path) {
  ASSIGN_OR_RETURN(ParsedHeader parsed, ParseHeader(bytes, path));
  std::vector<TensorView> views;
  views.reserve(parsed.tensors.size());
  for (ParsedTensor& t : parsed.tensors) {
    TensorView& v = views.emplace_back();
    v.name = std::move(t.name);
    v.dtype = t.dtype;
    v.shape = std::move(t.shape);
    v.data = bytes.data() + parsed.data_start + t.begin;
    v.nbytes = static_cast<size_t>(t.end - t.begin);
  }
  return views;
}

absl::Status SafetensorsStore::AddFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file, MappedFile::Open(path));
  ASSIGN_OR_RETURN(ParsedHeader parsed,
                   ParseHeader(std::span<const uint8_t>(file->data(), file->size()), path));
  const int index = static_cast<int>(files_.size());
  const uint8_t* data = file->data() + parsed.data_start;
  for (ParsedTensor& t : parsed.tensors) {
    auto existing = tensors_.find(t.name);
    if (existing != tensors_.end()) {
      return absl::DataLossError(absl::StrCat("tensor '", t.name, "' appears in both ",
                                              files_[existing->second.file]->path(), " and ",
                                              path));
    }
    Entry e;
    e.file = index;
    e.view.name = t.name;
    e.view.dtype = t.dtype;
    e.view.shape = std::move(t.shape);
    e.view.data = data + t.begin;
    e.view.nbytes = static_cast<size_t>(t.end - t.begin);
    tensors_.emplace(t.name, std::move(e));
  }
  files_.push_back(std::move(file));
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<SafetensorsStore>> SafetensorsStore::OpenFile(
    const std::string& path) {
  std::shared_ptr<SafetensorsStore> store(new SafetensorsStore());
  RETURN_IF_ERROR(store->AddFile(path));
  store->description_ = path;
  return store;
}

absl::StatusOr<std::shared_ptr<SafetensorsStore>> SafetensorsStore::OpenDir(
    const std::string& model_dir) {
  const std::string single = absl::StrCat(model_dir, "/", kSafetensorsFileName);
  if (FileExists(single)) return OpenFile(single);
  const std::string index_path = absl::StrCat(model_dir, "/", kSafetensorsIndexFileName);
  if (!FileExists(index_path)) {
    return absl::NotFoundError(absl::StrCat(model_dir, ": no weights: neither ",
                                            kSafetensorsFileName, " nor ",
                                            kSafetensorsIndexFileName, " exists"));
  }
  ASSIGN_OR_RETURN(auto weight_map, ParseIndex(index_path));
  std::shared_ptr<SafetensorsStore> store(new SafetensorsStore());
  std::vector<std::string> shard_names;  // in order of first appearance (sorted by tensor name)
  std::map<std::string, int> shard_index;
  for (const auto& [tensor, shard] : weight_map) {
    if (shard_index.count(shard)) continue;
    shard_index[shard] = static_cast<int>(shard_names.size());
    shard_names.push_back(shard);
    std::string shard_path = absl::StrCat(model_dir, "/", shard);
    absl::Status s = store->AddFile(shard_path);
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat(s.message(), " (shard listed in ", index_path,
                                                 " for tensor '", tensor, "')"));
    }
  }
  for (const auto& [tensor, shard] : weight_map) {
    auto it = store->tensors_.find(tensor);
    std::string shard_path = absl::StrCat(model_dir, "/", shard);
    if (it == store->tensors_.end()) {
      return absl::DataLossError(absl::StrCat(index_path, " maps tensor '", tensor, "' to ",
                                              shard_path, ", which does not contain it"));
    }
    if (store->files_[it->second.file]->path() != shard_path) {
      return absl::DataLossError(absl::StrCat(index_path, " maps tensor '", tensor, "' to ",
                                              shard_path, " but it is in ",
                                              store->files_[it->second.file]->path()));
    }
  }
  store->description_ =
      absl::StrCat(index_path, " (shards: ", absl::StrJoin(shard_names, ", "), ")");
  return store;
}

absl::StatusOr<TensorView> SafetensorsStore::Get(std::string_view name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return absl::NotFoundError(
        absl::StrCat("tensor '", std::string(name), "' not found in ", description_));
  }
  return it->second.view;
}

bool SafetensorsStore::Contains(std::string_view name) const {
  return tensors_.find(name) != tensors_.end();
}

std::string SafetensorsStore::FileOf(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? std::string() : files_[it->second.file]->path();
}

std::vector<std::string> SafetensorsStore::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, entry] : tensors_) names.push_back(name);
  return names;
}

std::vector<std::string> SafetensorsStore::Files() const {
  std::vector<std::string> out;
  for (const auto& f : files_) out.push_back(f->path());
  return out;
}

}  // namespace tandem
