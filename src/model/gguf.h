// Reading GGUF files, llama.cpp's model container (specification: ggml's docs/gguf.md, version 3).
//
// Layout, all little-endian:
//   magic "GGUF", uint32 version, uint64 n_tensors, uint64 n_kv,
//   n_kv x (string key, uint32 value type, value)          strings: uint64 length + UTF-8 bytes
//   n_tensors x (string name, uint32 n_dims, uint64 ne[n_dims], uint32 ggml type, uint64 offset)
//   padding to `general.alignment` (default 32), then the tensor data; each offset is relative to
//   the data start and a multiple of the alignment.
// Dimensions are ggml's: ne[0] is the contiguous one (columns), so a [rows, cols] matrix is stored
// as ne = {cols, rows}.
//
// The file is mapped read-only and every count, length, offset and size is checked against the
// file before it is used, so a corrupt, truncated or lying file is a one-line dspark::Error
// "<file>: <problem>", never an out-of-bounds read. Tensors of any ggml type are indexed (their
// sizes are known); whether a type can be converted is ggml_quants.h's business.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/ggml_quants.h"

namespace dspark::model {

class MappedFile;

// True when `path` names a GGUF file (by its extension), the test every loader uses to choose.
bool is_gguf_path(const std::string& path);

enum class GgufType : uint32_t {  // metadata value types, numbered as in the specification
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6, kBool = 7,
  kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};
const char* gguf_type_name(GgufType type);  // "uint32", "string", ...

// One metadata value. Integers are held in `integer` (uint64 values above INT64_MAX are refused at
// read), floats in `real`, bools in `integer` (0/1).
struct GgufValue {
  GgufType type = GgufType::kUint8;
  int64_t integer = 0;
  double real = 0;
  std::string string;
  GgufType element_type = GgufType::kUint8;  // of an array
  std::vector<GgufValue> items;              // of an array
};

struct GgufTensorInfo {
  std::string name;
  GgmlType type = GgmlType::kF32;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the contiguous dimension
  uint64_t offset = 0;      // relative to the data start
  const uint8_t* data = nullptr;  // into the mapping; valid while the file object lives
  size_t n_bytes = 0;
  int64_t numel() const;
  int64_t n_rows() const { return numel() / ne[0]; }
};

class GgufFile {
 public:
  static GgufFile open(const std::string& path);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // absolute file offset of the tensor data

  bool has(const std::string& key) const { return metadata_.count(key) > 0; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  // Typed access; an absent key or another type is an error naming the file and the key.
  const GgufValue& value(const std::string& key) const;
  std::string get_string(const std::string& key) const;
  int64_t get_int(const std::string& key) const;  // any integer type
  double get_float(const std::string& key) const;  // float32/float64 (or an integer)
  bool get_bool(const std::string& key) const;
  std::vector<std::string> get_strings(const std::string& key) const;  // array of string
  std::vector<int64_t> get_ints(const std::string& key) const;         // array of integers
  std::optional<int64_t> find_int(const std::string& key) const;
  std::optional<double> find_float(const std::string& key) const;
  std::optional<std::string> find_string(const std::string& key) const;

  bool contains(const std::string& name) const { return index_.count(name) > 0; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }  // in file order
  // The tensor `name`; an error naming it when absent, or when `ne` is given and differs
  // ("<file>: tensor 'x' has shape [96, 64], expected [96, 192]", ggml order).
  const GgufTensorInfo& tensor(const std::string& name, const std::vector<int64_t>& ne = {}) const;
  // All values of a tensor as f32 (dequantized exactly as llama.cpp does); throws naming the file,
  // the tensor and its type when the type cannot be converted.
  std::vector<float> read_f32(const GgufTensorInfo& info) const;

  [[noreturn]] void fail(const std::string& problem) const;

 private:
  GgufFile() = default;
  std::string path_;
  std::shared_ptr<const MappedFile> file_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> index_;  // name -> position in tensors_

  friend class GgufParser;
};

// "[96, 64]" for messages.
std::string format_ne(const std::vector<int64_t>& ne);

}  // namespace dspark::model
