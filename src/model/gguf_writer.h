// Writing GGUF files (version 3, the layout gguf.h describes): metadata in the order given,
// tensor infos, then each tensor's data at an offset aligned to `general.alignment` (32 unless the
// metadata sets it), zero padding in between, as llama.cpp's gguf writer lays files out.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "model/gguf.h"

namespace dspark::model {

// Metadata values, built for writing.
GgufValue gguf_string(std::string value);
GgufValue gguf_uint32(uint32_t value);
GgufValue gguf_int32(int32_t value);
GgufValue gguf_float32(float value);
GgufValue gguf_bool(bool value);
GgufValue gguf_strings(std::vector<std::string> values);
GgufValue gguf_int32s(const std::vector<int32_t>& values);

struct GgufTensorToWrite {
  std::string name;
  GgmlType type = GgmlType::kF32;
  std::vector<int64_t> ne;  // ggml order: ne[0] = columns
  // Appends exactly the tensor's bytes to `out`; called once, in file order, so large models are
  // converted one tensor at a time.
  std::function<void(std::vector<uint8_t>& out)> write_data;
};

// Writes `path`; a dspark::Error naming the file when it cannot be written or a tensor's data has
// the wrong size.
void write_gguf(const std::string& path, const std::vector<std::pair<std::string, GgufValue>>& metadata,
                const std::vector<GgufTensorToWrite>& tensors);

}  // namespace dspark::model
