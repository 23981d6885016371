#include "common/model/safetensors_writer.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/model/safetensors.h"
#include "common/util/fp8.h"
#include "common/util/half.h"
#include "common/util/status_macros.h"
#include "nlohmann/json.hpp"

namespace tandem {
namespace {

using json = nlohmann::json;

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::Status CheckTensors(const std::string& path, std::span<const TensorToWrite> tensors) {
  std::set<std::string_view> names;
  for (const TensorToWrite& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__") {
      return absl::InvalidArgumentError(absl::StrCat(path, ": invalid tensor name '", t.name, "'"));
    }
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", t.name, "' is given twice"));
    }
    for (int64_t d : t.shape) {
      if (d < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": tensor '", t.name, "' has a negative dimension"));
      }
    }
    const uint64_t expected = static_cast<uint64_t>(Numel(t.shape)) * DTypeSize(t.dtype);
    if (t.data.size() != expected) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", t.name, "' has ", t.data.size(),
                       " bytes of data but its shape and dtype need ", expected));
    }
  }
  return absl::OkStatus();
}

int64_t TotalBytes(std::span<const TensorToWrite> tensors) {
  int64_t total = 0;
  for (const TensorToWrite& t : tensors) total += static_cast<int64_t>(t.data.size());
  return total;
}

absl::Status WriteWholeFile(const std::string& path, const std::string& contents) {
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return absl::PermissionDeniedError(
          absl::StrCat(tmp, ": cannot create: ", std::strerror(errno)));
    }
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.close();
    if (!out) return absl::DataLossError(absl::StrCat(tmp, ": write failed"));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat(path, ": rename failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<uint8_t> EncodeF32(DType dtype, std::span<const float> values) {
  std::vector<uint8_t> out(values.size() * DTypeSize(dtype));
  switch (dtype) {
    case DType::kF32:
      if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
      break;
    case DType::kBF16:
      for (size_t i = 0; i < values.size(); ++i) {
        uint16_t v = F32ToBf16(values[i]);
        std::memcpy(out.data() + 2 * i, &v, 2);
      }
      break;
    case DType::kF16:
      for (size_t i = 0; i < values.size(); ++i) {
        uint16_t v = F32ToF16(values[i]);
        std::memcpy(out.data() + 2 * i, &v, 2);
      }
      break;
    case DType::kFP8E4M3:
      for (size_t i = 0; i < values.size(); ++i) out[i] = F32ToFp8E4M3(values[i]);
      break;
  }
  return out;
}

absl::Status WriteSafetensors(const std::string& path, std::span<const TensorToWrite> tensors,
                              const std::map<std::string, std::string>& metadata) {
  RETURN_IF_ERROR(CheckTensors(path, tensors));
  std::vector<const TensorToWrite*> order;
  for (const TensorToWrite& t : tensors) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const TensorToWrite* a, const TensorToWrite* b) {
    return DTypeSize(a->dtype) > DTypeSize(b->dtype);
  });

  // nlohmann::json sorts object keys, which is fine: offsets, not key order, place the data.
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorToWrite* t : order) {
    header[t->name] = {{"dtype", std::string(DTypeName(t->dtype))},
                       {"shape", t->shape},
                       {"data_offsets", {offset, offset + t->data.size()}}};
    offset += t->data.size();
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');

  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return absl::PermissionDeniedError(
          absl::StrCat(tmp, ": cannot create: ", std::strerror(errno)));
    }
    uint8_t len[8];
    uint64_t n = header_text.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(header_text.data(), static_cast<std::streamsize>(header_text.size()));
    for (const TensorToWrite* t : order) {
      out.write(reinterpret_cast<const char*>(t->data.data()),
                static_cast<std::streamsize>(t->data.size()));
    }
    out.close();
    if (!out) {
      std::remove(tmp.c_str());
      return absl::DataLossError(absl::StrCat(tmp, ": write failed (disk full?)"));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat(path, ": rename failed: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::string ShardFileName(int index, int count) {
  return absl::StrFormat("model-%05d-of-%05d.safetensors", index + 1, count);
}

absl::Status WriteSafetensorsShards(const std::string& dir,
                                    const std::vector<std::vector<TensorToWrite>>& shards) {
  const std::string index_path = absl::StrCat(dir, "/", kSafetensorsIndexFileName);
  if (shards.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(index_path, ": no shards to write"));
  }
  json weight_map = json::object();
  int64_t total = 0;
  const int count = static_cast<int>(shards.size());
  for (int i = 0; i < count; ++i) {
    const std::string name = ShardFileName(i, count);
    if (shards[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(dir, "/", name, ": shard is empty"));
    }
    for (const TensorToWrite& t : shards[i]) {
      if (weight_map.contains(t.name)) {
        return absl::InvalidArgumentError(
            absl::StrCat(index_path, ": tensor '", t.name, "' is in two shards"));
      }
      weight_map[t.name] = name;
    }
    RETURN_IF_ERROR(WriteSafetensors(absl::StrCat(dir, "/", name), shards[i]));
    total += TotalBytes(shards[i]);
  }
  json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  return WriteWholeFile(index_path, index.dump(2) + "\n");
}

std::vector<std::vector<TensorToWrite>> ShardBySize(std::span<const TensorToWrite> tensors,
                                                    int64_t max_shard_bytes) {
  std::vector<std::vector<TensorToWrite>> shards;
  int64_t current = 0;
  for (const TensorToWrite& t : tensors) {
    const int64_t size = static_cast<int64_t>(t.data.size());
    if (shards.empty() || (current > 0 && current + size > max_shard_bytes)) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(t);
    current += size;
  }
  return shards;
}

absl::StatusOr<std::vector<std::vector<TensorToWrite>>> ShardIntoCount(
    std::span<const TensorToWrite> tensors, int count) {
  const int n = static_cast<int>(tensors.size());
  if (count < 1 || count > n) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot split ", n, " tensors into ", count, " non-empty shards"));
  }
  const double total = static_cast<double>(TotalBytes(tensors));
  // begin[k]: first tensor of shard k; the first tensor whose start offset reaches k/count of the
  // bytes, kept strictly increasing and leaving at least one tensor for each later shard.
  std::vector<int> begin(count + 1, 0);
  begin[count] = n;
  double start = 0;
  int i = 0;
  for (int k = 1; k < count; ++k) {
    while (i < n && start < total * k / count) start += tensors[i++].data.size();
    begin[k] = std::clamp(i, begin[k - 1] + 1, n - (count - k));
  }
  std::vector<std::vector<TensorToWrite>> shards(count);
  for (int k = 0; k < count; ++k) {
    shards[k].assign(tensors.begin() + begin[k], tensors.begin() + begin[k + 1]);
  }
  return shards;
}

}  // namespace tandem
