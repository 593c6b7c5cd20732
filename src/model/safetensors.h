// Reading and writing safetensors checkpoints (one file or a Hugging Face sharded set).
//
// Format: an 8-byte little-endian header length N, then N bytes of JSON
//   {"__metadata__": {str: str}, "<name>": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}, ...}
// then the data; offsets are relative to the first byte after the header.
//
// Files are mapped read-only (MAP_PRIVATE) and every header is validated before any view is
// handed out, so a lying header yields a dspark::Error naming the file, never an out-of-bounds read.
// Tensors of other safetensors dtypes (I64, F64, ...) are indexed and listed by names(), but get()
// rejects them: the engine only takes F32, F16 and BF16 weights.
//
// Alignment: `data` is aligned to the element size when the header is padded to a multiple of 8,
// as every standard writer (including ours) does; the archive does not enforce it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dspark::model {

enum class DType { kF32, kF16, kBF16 };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // "F32", "F16", "BF16"

struct TensorView {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;  // into the read-only mapping; valid while the archive (or a move of it) lives
  size_t n_bytes;
  std::string file;  // the file it came from, for error messages
  int64_t numel() const;
};

class SafetensorsArchive {
 public:
  // path: a .safetensors file, or a directory holding model.safetensors.index.json (sharded),
  // else model.safetensors, else exactly one *.safetensors file.
  static SafetensorsArchive open(const std::string& path);

  SafetensorsArchive(SafetensorsArchive&&) noexcept;
  SafetensorsArchive& operator=(SafetensorsArchive&&) noexcept;
  SafetensorsArchive(const SafetensorsArchive&) = delete;
  SafetensorsArchive& operator=(const SafetensorsArchive&) = delete;
  ~SafetensorsArchive();

  bool contains(const std::string& name) const;  // any dtype
  // Throws naming the tensor and the archive path when absent or of an unsupported dtype.
  const TensorView& get(const std::string& name) const;
  // get() plus a shape check: "<file>: tensor 'x' has shape [4, 8], expected [4, 16]".
  const TensorView& get(const std::string& name, const std::vector<int64_t>& expected_shape) const;
  std::vector<std::string> names() const;                      // sorted, every dtype
  const std::map<std::string, TensorView>& views() const { return tensors_; }  // the supported ones
  const std::map<std::string, std::string>& metadata() const;  // __metadata__ of the first file
  const std::string& path() const { return path_; }            // as passed to open()

  struct Mapping;  // one mapped file (defined in the .cpp)

 private:
  struct Unsupported {
    std::string dtype;
    std::string file;
  };
  SafetensorsArchive() = default;

  std::string path_;
  std::vector<std::shared_ptr<const Mapping>> mappings_;
  std::map<std::string, TensorView> tensors_;        // node-based: references survive moves
  std::map<std::string, Unsupported> unsupported_;  // valid tensors of dtypes we do not load
  std::map<std::string, std::string> metadata_;

  friend class ArchiveBuilder;
};

struct TensorToWrite {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data;
  size_t n_bytes;
};

// Writes a standard safetensors file: header padded with spaces to a multiple of 8, tensors in the
// order given, data_offsets relative to the data start.
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

// Writes shards of at most max_shard_bytes of data each (a larger tensor gets a shard of its own),
// named model-00001-of-0000N.safetensors, plus model.safetensors.index.json, into dir (created if
// needed). Always writes the index, even for a single shard.
void write_sharded_safetensors(const std::string& dir, const std::vector<TensorToWrite>& tensors,
                               size_t max_shard_bytes);

// Exact widening conversions, and f32 -> narrow with round-to-nearest-even (NaN stays NaN,
// overflow becomes infinity, f16 subnormals are produced).
float bf16_to_f32(uint16_t bits);
uint16_t f32_to_bf16(float value);
float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float value);

}  // namespace dspark::model
