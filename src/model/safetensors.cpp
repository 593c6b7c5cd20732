#include "model/safetensors.h"


#include <algorithm>
#include <tuple>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <utility>

#include "common/error.h"
#include "common/json_file.h"
#include "common/one_line_error.h"
#include "model/mapped_file.h"

namespace dspark::model {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // same limit as the reference safetensors crate
constexpr const char* kIndexName = "model.safetensors.index.json";

[[noreturn]] void fail(const std::string& file, const std::string& problem) { fail_one_line(file, problem); }

// 'name' for messages: one line, bounded length, control bytes escaped.
std::string quote(const std::string& s) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 200; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > 200) out += "...";
  return out + "'";
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}


// Byte size of every safetensors dtype, and the DType for those we load.
struct DTypeInfo {
  size_t size;
  std::optional<DType> dtype;
};

std::optional<DTypeInfo> lookup_dtype(const std::string& name) {
  static const std::map<std::string, DTypeInfo> table = {
      {"F32", {4, DType::kF32}}, {"F16", {2, DType::kF16}}, {"BF16", {2, DType::kBF16}},
      {"F64", {8, {}}},          {"I64", {8, {}}},          {"U64", {8, {}}},
      {"I32", {4, {}}},          {"U32", {4, {}}},          {"I16", {2, {}}},
      {"U16", {2, {}}},          {"I8", {1, {}}},           {"U8", {1, {}}},
      {"BOOL", {1, {}}},         {"F8_E4M3", {1, {}}},      {"F8_E5M2", {1, {}}},
  };
  auto it = table.find(name);
  if (it == table.end()) return std::nullopt;
  return it->second;
}

// A JSON integer >= 0 that fits in int64, or nullopt.
std::optional<uint64_t> json_count(const json& v) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    if (u <= static_cast<uint64_t>(INT64_MAX)) return u;
    return std::nullopt;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  return std::nullopt;
}

std::string read_small_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot open (") + std::strerror(errno) + ")");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail(path, "read error");
  return ss.str();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Mapping

// A mapped shard; the archive's views point into it.
struct SafetensorsArchive::Mapping {
  std::shared_ptr<const MappedFile> file;
  static std::shared_ptr<const Mapping> map_file(const std::string& path) {
    return std::make_shared<const Mapping>(Mapping{MappedFile::open(path, 8, "a safetensors header")});
  }
};

// ---------------------------------------------------------------------------------------------
// Header parsing and archive assembly

class ArchiveBuilder {
 public:
  explicit ArchiveBuilder(SafetensorsArchive& archive) : a_(archive) {}

  // Maps one file, validates its header and adds its tensors. The first file added supplies
  // metadata().
  void add_file(const std::string& path) {
    auto mapping = SafetensorsArchive::Mapping::map_file(path);
    const uint8_t* base = mapping->file->bytes();
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | base[i];
    if (header_len > kMaxHeaderBytes)
      fail(path, "header length " + std::to_string(header_len) +
                     " is absurd (limit 100 MiB); not a safetensors file?");
    if (header_len > mapping->file->size() - 8)
      fail(path, "header length " + std::to_string(header_len) + " exceeds file size " +
                     std::to_string(mapping->file->size()));
    const char* hbegin = reinterpret_cast<const char*>(base + 8);
    json header = parse_header(path, hbegin, hbegin + header_len);
    const uint64_t data_start = 8 + header_len;
    const uint64_t data_size = mapping->file->size() - data_start;

    bool first_file = a_.mappings_.empty();
    std::vector<ByteRange> ranges;
    for (auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        auto meta = parse_metadata(path, entry);
        if (first_file) a_.metadata_ = std::move(meta);
        continue;
      }
      const auto [begin, end] = add_tensor(path, name, entry, base + data_start, data_start, data_size);
      ranges.push_back({begin, end, name});
    }
    check_contiguous(path, std::move(ranges), data_size);
    a_.mappings_.push_back(std::move(mapping));
  }

 private:
  static json parse_header(const std::string& path, const char* begin, const char* end) {
    // Duplicate top-level names would otherwise be silently collapsed by the parser.
    std::set<std::string> seen;
    std::string duplicate;
    json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
      if (event == json::parse_event_t::key && depth == 1 && duplicate.empty()) {
        const auto& key = parsed.get_ref<const std::string&>();
        if (!seen.insert(key).second) duplicate = key;
      }
      return true;
    };
    // nlohmann stops at a NUL byte as if the input ended; the reference reader rejects it.
    if (const void* nul = std::memchr(begin, '\0', static_cast<size_t>(end - begin)))
      fail(path, "header contains a NUL byte at header offset " +
                     std::to_string(static_cast<const char*>(nul) - begin));
    json header;
    try {
      header = json::parse(begin, end, cb);
    } catch (const json::exception& e) {
      fail(path, "header is not valid JSON: " + json_error_reason(e));
    }
    if (!header.is_object()) fail(path, "header is not a JSON object");
    if (!duplicate.empty()) fail(path, "header lists tensor " + quote(duplicate) + " twice");
    return header;
  }

  static std::map<std::string, std::string> parse_metadata(const std::string& path, const json& m) {
    if (!m.is_object()) fail(path, "__metadata__ is not a JSON object");
    std::map<std::string, std::string> out;
    for (auto& [k, v] : m.items()) {
      if (!v.is_string()) fail(path, "__metadata__ value for " + quote(k) + " is not a string");
      out[k] = v.get<std::string>();
    }
    return out;
  }

  // As the reference reader requires: the tensors' byte ranges, in offset order, tile the data
  // section exactly. Overlapping ranges would give two weights the same bytes.
  struct ByteRange {
    uint64_t begin, end;  // in the data section
    std::string tensor;
  };
  static void check_contiguous(const std::string& path, std::vector<ByteRange> ranges, uint64_t data_size) {
    std::sort(ranges.begin(), ranges.end(), [](const ByteRange& a, const ByteRange& b) {
      return std::tie(a.begin, a.end, a.tensor) < std::tie(b.begin, b.end, b.tensor);
    });
    uint64_t expected = 0;
    for (const ByteRange& r : ranges) {
      if (r.begin != expected)
        fail(path, "tensor " + quote(r.tensor) + " data_offsets begin at " + std::to_string(r.begin) + ", expected " +
                       std::to_string(expected) + " (right after the tensor before it): overlapping or gapped tensor data");
      expected = r.end;
    }
    if (expected != data_size)
      fail(path, "the tensors hold " + std::to_string(expected) + " data bytes, but the file has " +
                     std::to_string(data_size) + " after its header");
  }

  // Validates one header entry and adds the tensor; returns its [begin, end) in the data section.
  std::pair<uint64_t, uint64_t> add_tensor(const std::string& path, const std::string& name, const json& entry,
                                           const uint8_t* data_base, uint64_t data_start, uint64_t data_size) {
    const std::string what = "tensor " + quote(name);
    if (!entry.is_object()) fail(path, what + ": header entry is not a JSON object");
    auto dt = entry.find("dtype");
    if (dt == entry.end() || !dt->is_string()) fail(path, what + ": missing or non-string 'dtype'");
    const std::string dtype_str = dt->get<std::string>();
    auto info = lookup_dtype(dtype_str);
    if (!info) fail(path, what + " has unknown dtype " + quote(dtype_str));

    std::vector<int64_t> shape = parse_shape(path, what, entry);
    uint64_t numel = 1;
    for (int64_t d : shape) {
      if (__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel))
        fail(path, what + " shape " + shape_str(shape) + " overflows");
    }
    uint64_t need = 0;
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(info->size), &need))
      fail(path, what + " shape " + shape_str(shape) + " overflows");

    auto [begin, end] = parse_offsets(path, what, entry);
    if (end - begin != need)
      fail(path, what + " data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                     "] hold " + std::to_string(end - begin) + " bytes, but " + dtype_str + " " +
                     shape_str(shape) + " needs " + std::to_string(need));
    if (end > data_size) {
      // Offsets are relative to the data section; report absolute file bytes.
      uint64_t abs_begin = 0, abs_end = 0;
      bool ok = !__builtin_add_overflow(begin, data_start, &abs_begin) &&
                !__builtin_add_overflow(end, data_start, &abs_end);
      std::string range = ok ? "[" + std::to_string(abs_begin) + ", " + std::to_string(abs_end) + ")"
                             : "[" + std::to_string(begin) + ", " + std::to_string(end) +
                                   ") after byte " + std::to_string(data_start);
      fail(path, what + " data range " + range + " exceeds file size " +
                     std::to_string(data_start + data_size));
    }
    check_unique(path, name);
    if (!info->dtype) {
      a_.unsupported_[name] = {dtype_str, path};
      return {begin, end};
    }
    TensorView view{name, *info->dtype, std::move(shape), data_base + begin,
                    static_cast<size_t>(need), path};
    a_.tensors_.emplace(name, std::move(view));
    return {begin, end};
  }

  static std::vector<int64_t> parse_shape(const std::string& path, const std::string& what,
                                          const json& entry) {
    auto it = entry.find("shape");
    if (it == entry.end() || !it->is_array()) fail(path, what + ": missing or non-array 'shape'");
    std::vector<int64_t> shape;
    for (const json& d : *it) {
      auto v = json_count(d);
      if (!v)
        fail(path, what + " has invalid shape " + it->dump() +
                       ": every dimension must be an integer in [0, 2^63)");
      shape.push_back(static_cast<int64_t>(*v));
    }
    return shape;
  }

  static std::pair<uint64_t, uint64_t> parse_offsets(const std::string& path, const std::string& what,
                                                     const json& entry) {
    auto it = entry.find("data_offsets");
    std::optional<uint64_t> b, e;
    if (it != entry.end() && it->is_array() && it->size() == 2) {
      b = json_count((*it)[0]);
      e = json_count((*it)[1]);
    }
    if (!b || !e || *b > *e)
      fail(path, what + " has invalid data_offsets " +
                     (it == entry.end() ? std::string("(missing)") : it->dump()) +
                     ": expected [begin, end] with 0 <= begin <= end");
    return {*b, *e};
  }

  void check_unique(const std::string& path, const std::string& name) {
    std::string other;
    if (auto t = a_.tensors_.find(name); t != a_.tensors_.end()) other = t->second.file;
    if (auto u = a_.unsupported_.find(name); u != a_.unsupported_.end()) other = u->second.file;
    if (!other.empty()) fail(path, "tensor " + quote(name) + " also appears in " + other);
  }

  SafetensorsArchive& a_;
};

namespace {

// Loads a sharded checkpoint described by an HF index file.
void load_index(const std::string& index_path, ArchiveBuilder& builder,
                const std::function<std::string(const std::string&)>& file_of) {
  const std::string text = read_small_file(index_path);
  json index;
  try {
    index = json::parse(text);
  } catch (const json::exception& e) {
    fail(index_path, "not valid JSON: " + json_error_reason(e));
  }
  if (!index.is_object()) fail(index_path, "not a JSON object");
  auto wm = index.find("weight_map");
  if (wm == index.end() || !wm->is_object()) fail(index_path, "missing or non-object 'weight_map'");

  std::map<std::string, std::string> shard_of;  // tensor -> shard file name
  std::set<std::string> shards;
  for (auto& [name, file] : wm->items()) {
    if (!file.is_string() || file.get<std::string>().empty())
      fail(index_path, "weight_map entry for tensor " + quote(name) + " is not a file name");
    // Shards live in the model directory (Hugging Face writes bare names): an absolute path or a
    // '..' would read any file on the machine as weights.
    const fs::path shard_name(file.get<std::string>());
    if (shard_name.is_absolute() || std::any_of(shard_name.begin(), shard_name.end(), [](const fs::path& p) { return p == ".."; }))
      fail(index_path, "weight_map entry for tensor " + quote(name) + " names " + quote(file.get<std::string>()) +
                           ", outside the model directory");
    shard_of[name] = file.get<std::string>();
    shards.insert(file.get<std::string>());
  }
  const fs::path dir = fs::path(index_path).parent_path();
  for (const std::string& shard : shards) {
    const std::string shard_path = (dir / shard).string();
    std::error_code ec;
    if (!fs::is_regular_file(shard_path, ec)) {
      auto user = std::find_if(shard_of.begin(), shard_of.end(),
                               [&](const auto& kv) { return kv.second == shard; });
      fail(index_path, "shard file " + shard_path + " (listed for tensor " + quote(user->first) +
                           ") does not exist");
    }
    builder.add_file(shard_path);
  }
  for (const auto& [name, shard] : shard_of) {
    const std::string shard_path = (dir / shard).string();
    if (file_of(name) != shard_path)
      fail(index_path, "tensor " + quote(name) + " is listed in shard " + shard_path +
                           " but that file does not contain it");
  }
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The single-file candidate in a directory without an index.
std::string pick_file_in_dir(const std::string& dir) {
  std::error_code ec;
  const fs::path preferred = fs::path(dir) / "model.safetensors";
  if (fs::is_regular_file(preferred, ec)) return preferred.string();
  std::vector<std::string> found;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".safetensors" && it->is_regular_file(ec))
      found.push_back(it->path().filename().string());
  }
  if (ec) fail(dir, "cannot list directory (" + ec.message() + ")");
  std::sort(found.begin(), found.end());
  if (found.empty())
    fail(dir, std::string("no ") + kIndexName + ", model.safetensors or other *.safetensors file");
  if (found.size() > 1) {
    std::string list;
    for (size_t i = 0; i < found.size() && i < 4; ++i) list += (i ? ", " : "") + found[i];
    if (found.size() > 4) list += ", ...";
    fail(dir, "several *.safetensors files (" + list + ") and no " + kIndexName +
                  "; pass one file");
  }
  return (fs::path(dir) / found[0]).string();
}

}  // namespace

SafetensorsArchive SafetensorsArchive::open(const std::string& path) {
  SafetensorsArchive archive;
  archive.path_ = path;
  ArchiveBuilder builder(archive);
  auto file_of = [&](const std::string& name) -> std::string {
    if (auto t = archive.tensors_.find(name); t != archive.tensors_.end()) return t->second.file;
    if (auto u = archive.unsupported_.find(name); u != archive.unsupported_.end()) return u->second.file;
    return "";
  };
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path index = fs::path(path) / kIndexName;
    if (fs::is_regular_file(index, ec))
      load_index(index.string(), builder, file_of);
    else
      builder.add_file(pick_file_in_dir(path));
  } else if (fs::exists(path, ec)) {
    if (ends_with(path, ".index.json"))
      load_index(path, builder, file_of);
    else
      builder.add_file(path);
  } else {
    fail(path, "no such file or directory");
  }
  return archive;
}

SafetensorsArchive::SafetensorsArchive(SafetensorsArchive&&) noexcept = default;
SafetensorsArchive& SafetensorsArchive::operator=(SafetensorsArchive&&) noexcept = default;
SafetensorsArchive::~SafetensorsArchive() = default;

bool SafetensorsArchive::contains(const std::string& name) const {
  return tensors_.count(name) || unsupported_.count(name);
}

const TensorView& SafetensorsArchive::get(const std::string& name) const {
  if (auto it = tensors_.find(name); it != tensors_.end()) return it->second;
  if (auto u = unsupported_.find(name); u != unsupported_.end())
    fail(u->second.file, "tensor " + quote(name) + " has dtype " + u->second.dtype +
                             ", which is not supported for weights (supported: F32, F16, BF16)");
  std::string hint;
  const std::string prefix = "model.";
  if (name.rfind(prefix, 0) == 0 && contains(name.substr(prefix.size())))
    hint = " (found " + quote(name.substr(prefix.size())) + ")";
  else if (contains(prefix + name))
    hint = " (found " + quote(prefix + name) + ")";
  fail(path_, "no tensor named " + quote(name) + hint);
}

const TensorView& SafetensorsArchive::get(const std::string& name,
                                          const std::vector<int64_t>& expected_shape) const {
  const TensorView& view = get(name);
  if (view.shape != expected_shape)
    fail(view.file, "tensor " + quote(name) + " has shape " + shape_str(view.shape) +
                        ", expected " + shape_str(expected_shape));
  return view;
}

std::vector<std::string> SafetensorsArchive::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size() + unsupported_.size());
  for (const auto& kv : tensors_) out.push_back(kv.first);
  for (const auto& kv : unsupported_) out.push_back(kv.first);
  std::sort(out.begin(), out.end());
  return out;
}

const std::map<std::string, std::string>& SafetensorsArchive::metadata() const { return metadata_; }

// ---------------------------------------------------------------------------------------------
// DType and TensorView

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
  }
  return "?";
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// ---------------------------------------------------------------------------------------------
// Writing

namespace {

// Validates the tensors and returns each one's byte size.
void check_tensors_to_write(const std::string& path, const std::vector<TensorToWrite>& tensors) {
  std::set<std::string> seen;
  for (const TensorToWrite& t : tensors) {
    const std::string what = "tensor " + quote(t.name);
    if (t.name == "__metadata__") fail(path, "cannot write a tensor named '__metadata__'");
    if (!seen.insert(t.name).second) fail(path, what + " given twice");
    uint64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0 || __builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel))
        fail(path, what + " has invalid shape " + shape_str(t.shape));
    }
    uint64_t need = 0;
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(t.dtype)), &need) ||
        need != t.n_bytes)
      fail(path, what + ": " + std::to_string(t.n_bytes) + " bytes given, but " +
                     dtype_name(t.dtype) + " " + shape_str(t.shape) + " needs " +
                     std::to_string(need));
    if (t.n_bytes > 0 && t.data == nullptr) fail(path, what + " has no data");
  }
}

std::string build_header(const std::string& path, const std::vector<TensorToWrite>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorToWrite& t : tensors) {
    header[t.name] = {{"dtype", dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.n_bytes}}};
    offset += t.n_bytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    fail(path, "cannot encode header: " + json_error_reason(e));
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

void write_all(std::FILE* f, const std::string& path, const void* data, size_t n) {
  if (n > 0 && std::fwrite(data, 1, n, f) != n) {
    int err = errno;
    std::fclose(f);
    fail(path, std::string("write failed (") + std::strerror(err) + ")");
  }
}

}  // namespace

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  check_tensors_to_write(path, tensors);
  const std::string header = build_header(path, tensors, metadata);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fail(path, std::string("cannot open for writing (") + std::strerror(errno) + ")");
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
  write_all(f, path, len, 8);
  write_all(f, path, header.data(), header.size());
  for (const TensorToWrite& t : tensors) write_all(f, path, t.data, t.n_bytes);
  if (std::fclose(f) != 0) fail(path, std::string("write failed (") + std::strerror(errno) + ")");
}

void write_sharded_safetensors(const std::string& dir, const std::vector<TensorToWrite>& tensors,
                               size_t max_shard_bytes) {
  const std::string index_path = (fs::path(dir) / kIndexName).string();
  check_tensors_to_write(index_path, tensors);
  std::vector<std::vector<TensorToWrite>> shards(1);
  size_t current = 0;
  for (const TensorToWrite& t : tensors) {
    if (!shards.back().empty() && current + t.n_bytes > max_shard_bytes) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(t);
    current += t.n_bytes;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(dir, "cannot create directory (" + ec.message() + ")");

  json weight_map = json::object();
  uint64_t total = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", i + 1, shards.size());
    write_safetensors((fs::path(dir) / name).string(), shards[i]);
    for (const TensorToWrite& t : shards[i]) {
      weight_map[t.name] = name;
      total += t.n_bytes;
    }
  }
  json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_json_file(index_path, index);
}

// ---------------------------------------------------------------------------------------------
// Conversions

namespace {
uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

float bf16_to_f32(uint16_t bits) { return bits_float(static_cast<uint32_t>(bits) << 16); }

uint16_t f32_to_bf16(float value) {
  uint32_t x = float_bits(value);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);  // quiet NaN
  x += 0x7fffu + ((x >> 16) & 1u);  // round to nearest, ties to even; may carry into infinity
  return static_cast<uint16_t>(x >> 16);
}

float f16_to_f32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exp = (bits >> 10) & 0x1fu;
  const uint32_t mant = bits & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in f32
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t f32_to_f16(float value) {
  const uint32_t x = float_bits(value);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u)  // NaN: keep the top payload bits, force quiet
    return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to inf
  if (ax < 0x38800000u) {  // below 2^-14: f16 subnormal or zero, in units of 2^-24
    const uint32_t exp = ax >> 23;
    if (exp < 102) return sign;  // below 2^-25: rounds to zero
    const uint32_t mant = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14..24
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u);  // round the low 13 bits to nearest even
  r -= (127u - 15u) << 23;
  return static_cast<uint16_t>(sign | (r >> 13));
}

}  // namespace dspark::model
