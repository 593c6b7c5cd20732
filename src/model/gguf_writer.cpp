#include "model/gguf_writer.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/error.h"

namespace dspark::model {

namespace {

constexpr uint32_t kVersion = 3;
constexpr uint64_t kDefaultAlignment = 32;

class Bytes {
 public:
  template <typename T>
  void pod(T value) {
    // resize + memcpy rather than insert(): GCC 12 misreads an insert into an empty vector as an
    // overflow (-Wstringop-overflow).
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &value, sizeof(T));
  }
  void string(const std::string& s) {
    pod<uint64_t>(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void value(const GgufValue& v) {
    switch (v.type) {
      case GgufType::kUint8: pod(static_cast<uint8_t>(v.integer)); break;
      case GgufType::kInt8: pod(static_cast<int8_t>(v.integer)); break;
      case GgufType::kUint16: pod(static_cast<uint16_t>(v.integer)); break;
      case GgufType::kInt16: pod(static_cast<int16_t>(v.integer)); break;
      case GgufType::kUint32: pod(static_cast<uint32_t>(v.integer)); break;
      case GgufType::kInt32: pod(static_cast<int32_t>(v.integer)); break;
      case GgufType::kUint64: pod(static_cast<uint64_t>(v.integer)); break;
      case GgufType::kInt64: pod(static_cast<int64_t>(v.integer)); break;
      case GgufType::kFloat32: pod(static_cast<float>(v.real)); break;
      case GgufType::kFloat64: pod(v.real); break;
      case GgufType::kBool: pod(static_cast<uint8_t>(v.integer != 0)); break;
      case GgufType::kString: string(v.string); break;
      case GgufType::kArray:
        pod(static_cast<uint32_t>(v.element_type));
        pod<uint64_t>(v.items.size());
        for (const GgufValue& item : v.items) value(item);
        break;
    }
  }
  void pad_to(uint64_t alignment) { out_.resize((out_.size() + alignment - 1) / alignment * alignment, 0); }
  std::vector<uint8_t>& data() { return out_; }

 private:
  std::vector<uint8_t> out_;
};

GgufValue scalar(GgufType type) {
  GgufValue v;
  v.type = type;
  return v;
}

GgufValue integer_value(GgufType type, int64_t value) {
  GgufValue v = scalar(type);
  v.integer = value;
  return v;
}

size_t tensor_bytes(const GgufTensorToWrite& t) {
  int64_t rows = 1;
  for (size_t d = 1; d < t.ne.size(); ++d) rows *= t.ne[d];
  return ggml_row_bytes(t.type, t.ne.at(0)) * static_cast<size_t>(rows);
}

}  // namespace

GgufValue gguf_string(std::string value) {
  GgufValue v = scalar(GgufType::kString);
  v.string = std::move(value);
  return v;
}
GgufValue gguf_uint32(uint32_t value) { return integer_value(GgufType::kUint32, value); }
GgufValue gguf_int32(int32_t value) { return integer_value(GgufType::kInt32, value); }
GgufValue gguf_bool(bool value) { return integer_value(GgufType::kBool, value); }
GgufValue gguf_float32(float value) {
  GgufValue v = scalar(GgufType::kFloat32);
  v.real = value;
  return v;
}
GgufValue gguf_strings(std::vector<std::string> values) {
  GgufValue v = scalar(GgufType::kArray);
  v.element_type = GgufType::kString;
  v.items.reserve(values.size());
  for (std::string& s : values) v.items.push_back(gguf_string(std::move(s)));
  return v;
}
GgufValue gguf_int32s(const std::vector<int32_t>& values) {
  GgufValue v = scalar(GgufType::kArray);
  v.element_type = GgufType::kInt32;
  v.items.reserve(values.size());
  for (const int32_t x : values) v.items.push_back(gguf_int32(x));
  return v;
}

void write_gguf(const std::string& path, const std::vector<std::pair<std::string, GgufValue>>& metadata,
                const std::vector<GgufTensorToWrite>& tensors) {
  uint64_t alignment = kDefaultAlignment;
  for (const auto& [key, value] : metadata)
    if (key == "general.alignment") alignment = static_cast<uint64_t>(value.integer);
  Bytes header;
  header.pod<uint32_t>(0x46554747);  // "GGUF"
  header.pod<uint32_t>(kVersion);
  header.pod<uint64_t>(tensors.size());
  header.pod<uint64_t>(metadata.size());
  for (const auto& [key, value] : metadata) {
    header.string(key);
    header.pod(static_cast<uint32_t>(value.type));
    header.value(value);
  }
  uint64_t offset = 0;
  for (const GgufTensorToWrite& t : tensors) {
    header.string(t.name);
    header.pod<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (const int64_t n : t.ne) header.pod<uint64_t>(static_cast<uint64_t>(n));
    header.pod(static_cast<uint32_t>(t.type));
    header.pod<uint64_t>(offset);
    offset += (tensor_bytes(t) + alignment - 1) / alignment * alignment;
  }
  header.pad_to(alignment);

  // Written beside the destination and renamed over it once complete: an interrupted run never
  // leaves a truncated file under the real name, and a destination that is one of the inputs
  // (mapped while the tensors stream out) is replaced only after they have been read, where
  // truncating it first killed the process with SIGBUS and destroyed the checkpoint.
  // Through a symlink to the file it names, as writing in place would (the rename would replace
  // the link itself).
  const std::string target = std::filesystem::weakly_canonical(path).string();
  const std::string tmp = target + ".tmp-" + std::to_string(::getpid());
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(path + ": cannot open for writing");
  struct RemoveUnlessRenamed {
    const std::string& file;
    bool renamed = false;
    ~RemoveUnlessRenamed() {
      if (!renamed) std::remove(file.c_str());
    }
  } cleanup{tmp};
  auto write = [&](const std::vector<uint8_t>& bytes) {
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw Error(path + ": write failed");
  };
  write(header.data());
  std::vector<uint8_t> data;
  for (const GgufTensorToWrite& t : tensors) {
    data.clear();
    t.write_data(data);
    if (data.size() != tensor_bytes(t))
      throw Error(path + ": tensor '" + t.name + "' produced " + std::to_string(data.size()) + " bytes, expected " +
                  std::to_string(tensor_bytes(t)));
    data.resize((data.size() + alignment - 1) / alignment * alignment, 0);
    write(data);
  }
  out.close();
  if (!out) throw Error(path + ": write failed");
  if (std::rename(tmp.c_str(), target.c_str()) != 0) throw Error(path + ": cannot rename " + tmp + " into place");
  cleanup.renamed = true;
}

}  // namespace dspark::model
