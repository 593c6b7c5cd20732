// Helpers for the GGUF tests: the fixture files and their expected.json, and rewriting a GGUF file
// with changed metadata or tensors (through our writer) to make bad inputs.
#pragma once
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/gguf.h"
#include "model/gguf_writer.h"
#include "test_util.h"

namespace dspark::test {

inline std::filesystem::path gguf_fixture(const std::string& name) { return fixture("gguf-tiny") / name; }

// The entry of `file` (e.g. "untied-q8_0.gguf") in its family's expected.json.
inline nlohmann::json gguf_expected(const std::string& file) {
  const std::string family = file.substr(0, file.find('-'));
  const auto doc = nlohmann::json::parse(read_text(gguf_fixture(family + ".expected.json")));
  for (const auto& entry : doc["files"])
    if (entry["file"] == file) return entry;
  return nullptr;
}

inline const std::vector<std::string>& gguf_fixture_files() {
  static const std::vector<std::string> files = {
      "untied-f32.gguf", "untied-f16.gguf", "untied-bf16.gguf", "untied-q8_0.gguf", "untied-q4_0.gguf",
      "k256-f16.gguf",   "k256-q8_0.gguf",  "k256-q4_0.gguf",   "k256-q6_k.gguf",   "k256-q4_k_m.gguf"};
  return files;
}

struct GgufCopy {
  std::vector<std::pair<std::string, model::GgufValue>> metadata;
  std::vector<model::GgufTensorInfo> tensors;  // data still points into `source`
};

// Writes `src` again as `dst` after `edit` changed its metadata or tensor infos (a changed type
// or shape gets zero bytes of the new size; otherwise the data is copied).
inline void rewrite_gguf(const std::string& src, const std::string& dst, const std::function<void(GgufCopy&)>& edit) {
  const model::GgufFile file = model::GgufFile::open(src);
  GgufCopy copy;
  for (const auto& [key, value] : file.metadata()) copy.metadata.emplace_back(key, value);
  copy.tensors = file.tensors();
  edit(copy);
  std::vector<model::GgufTensorToWrite> out;
  for (const model::GgufTensorInfo& t : copy.tensors) {
    model::GgufTensorToWrite w{t.name, t.type, t.ne, nullptr};
    int64_t rows = 1;
    for (size_t d = 1; d < t.ne.size(); ++d) rows *= t.ne[d];
    const size_t n_bytes = model::ggml_row_bytes(t.type, t.ne[0]) * static_cast<size_t>(rows);
    const model::GgufTensorInfo original = t;
    w.write_data = [original, n_bytes](std::vector<uint8_t>& bytes) {
      bytes.assign(n_bytes, 0);
      if (n_bytes == original.n_bytes) std::memcpy(bytes.data(), original.data, n_bytes);
    };
    out.push_back(std::move(w));
  }
  model::write_gguf(dst, copy.metadata, out);
}

inline void set_metadata(GgufCopy& copy, const std::string& key, model::GgufValue value) {
  for (auto& [k, v] : copy.metadata)
    if (k == key) {
      v = std::move(value);
      return;
    }
  copy.metadata.emplace_back(key, std::move(value));
}

inline model::GgufTensorInfo& tensor_of(GgufCopy& copy, const std::string& name) {
  for (model::GgufTensorInfo& t : copy.tensors)
    if (t.name == name) return t;
  throw std::runtime_error("no tensor " + name);
}

}  // namespace dspark::test
