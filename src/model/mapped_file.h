// A whole file mapped read-only (MAP_PRIVATE), shared by the checkpoint readers (safetensors, GGUF).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace dspark::model {

class MappedFile {
 public:
  // Maps `path`; a dspark::Error "<path>: <problem>" when it cannot be opened, is not a regular
  // file, or is shorter than min_bytes (too_short: what it is too short for, for the message).
  static std::shared_ptr<const MappedFile> open(const std::string& path, size_t min_bytes, const std::string& too_short);

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const uint8_t* bytes() const { return bytes_; }
  size_t size() const { return size_; }

 private:
  MappedFile() = default;
  const uint8_t* bytes_ = nullptr;
  size_t size_ = 0;
};

}  // namespace dspark::model
