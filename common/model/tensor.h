// A view of a tensor inside a memory-mapped weights file.
#ifndef TANDEM_COMMON_MODEL_TENSOR_H_
#define TANDEM_COMMON_MODEL_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/types/dtype.h"

namespace tandem {

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;     // row-major, as in safetensors (PyTorch [out, in] for Linear)
  const uint8_t* data = nullptr;  // not owned; lives as long as the file it came from
  size_t nbytes = 0;

  bool valid() const { return data != nullptr; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// Converts any supported dtype to f32 (dst must hold numel() floats).
void ConvertToF32(const TensorView& t, float* dst);

}  // namespace tandem

#endif  // TANDEM_COMMON_MODEL_TENSOR_H_
