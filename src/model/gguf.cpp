#include "model/gguf.h"

#include <cstring>
#include <limits>

#include "common/error.h"
#include "common/one_line_error.h"
#include "model/mapped_file.h"

namespace dspark::model {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr int kMaxDims = 4;              // GGML_MAX_DIMS
constexpr uint64_t kMaxNameBytes = 63;   // GGML_MAX_NAME - 1
constexpr int kMaxArrayDepth = 8;        // nested arrays: the specification allows them; bound the recursion

// A name from the file for messages: bounded in length (fail_one_line removes line breaks).
std::string one_line(const std::string& name) { return name.size() > 100 ? name.substr(0, 100) + "..." : name; }

}  // namespace

bool is_gguf_path(const std::string& path) {
  return path.size() > 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
}

const char* gguf_type_name(GgufType type) {
  switch (type) {
    case GgufType::kUint8: return "uint8";
    case GgufType::kInt8: return "int8";
    case GgufType::kUint16: return "uint16";
    case GgufType::kInt16: return "int16";
    case GgufType::kUint32: return "uint32";
    case GgufType::kInt32: return "int32";
    case GgufType::kFloat32: return "float32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kUint64: return "uint64";
    case GgufType::kInt64: return "int64";
    case GgufType::kFloat64: return "float64";
  }
  return "unknown";
}

std::string format_ne(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

int64_t GgufTensorInfo::numel() const {
  int64_t n = 1;
  for (const int64_t d : ne) n *= d;
  return n;
}

// Reads the header from the mapping, checking every length against what is left of the file.
class GgufParser {
 public:
  explicit GgufParser(GgufFile& file) : f_(file), bytes_(file.file_->bytes()), size_(file.file_->size()) {}

  void parse() {
    if (read_u32("the magic") != kMagic) f_.fail("not a GGUF file (the first 4 bytes are not \"GGUF\")");
    f_.version_ = read_u32("the version");
    if (f_.version_ != 2 && f_.version_ != 3)
      f_.fail("GGUF version " + std::to_string(f_.version_) + " is not supported (supported: 2, 3)");
    const uint64_t n_tensors = read_u64("the tensor count");
    const uint64_t n_kv = read_u64("the metadata count");
    // Every entry takes at least 8 bytes of the file: a count that says otherwise is a lie.
    if (n_kv > size_ / 8 || n_tensors > size_ / 8)
      f_.fail("header claims " + std::to_string(n_kv) + " metadata entries and " + std::to_string(n_tensors) +
              " tensors, more than the file's " + std::to_string(size_) + " bytes can hold");
    for (uint64_t i = 0; i < n_kv; ++i) read_kv();
    if (const auto it = f_.metadata_.find("general.alignment"); it != f_.metadata_.end()) {
      if (it->second.type != GgufType::kUint32) f_.fail("general.alignment is not a uint32");
      const auto alignment = static_cast<uint64_t>(it->second.integer);
      if (alignment == 0 || (alignment & (alignment - 1)) != 0)
        f_.fail("general.alignment " + std::to_string(alignment) + " is not a power of two");
      f_.alignment_ = alignment;
    }
    for (uint64_t i = 0; i < n_tensors; ++i) read_tensor_info();
    const uint64_t data_offset = (pos_ + f_.alignment_ - 1) / f_.alignment_ * f_.alignment_;
    if (data_offset > size_ && !f_.tensors_.empty())
      f_.fail("tensor data would start at byte " + std::to_string(data_offset) + ", past the end of the file (" +
              std::to_string(size_) + " bytes)");
    f_.data_offset_ = data_offset;
    // As llama.cpp's reader requires: each tensor's data follows the one before it (in the order
    // of the tensor infos), padded to the alignment. Anything else overlaps tensors (two
    // weights reading the same bytes) or leaves gaps no writer makes.
    uint64_t expected = 0;
    for (GgufTensorInfo& t : f_.tensors_) {
      place(t);
      if (t.offset != expected)
        f_.fail("tensor '" + one_line(t.name) + "' data starts at offset " + std::to_string(t.offset) + ", expected " +
                std::to_string(expected) + " (right after the tensor before it): overlapping or gapped tensor data");
      expected += (t.n_bytes + f_.alignment_ - 1) / f_.alignment_ * f_.alignment_;
    }
  }

 private:
  void need(uint64_t n, const std::string& what) const {
    if (n > size_ - pos_)
      f_.fail("truncated: " + what + " at byte " + std::to_string(pos_) + " needs " + std::to_string(n) +
              " bytes, the file has " + std::to_string(size_ - pos_) + " left");
  }
  template <typename T>
  T read_pod(const std::string& what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  uint32_t read_u32(const std::string& what) { return read_pod<uint32_t>(what); }
  uint64_t read_u64(const std::string& what) { return read_pod<uint64_t>(what); }

  std::string read_string(const std::string& what) {
    const uint64_t n = read_u64(what + " length");
    need(n, what);
    std::string s(reinterpret_cast<const char*>(bytes_ + pos_), n);
    pos_ += n;
    return s;
  }

  GgufType read_type(const std::string& what) {
    const uint32_t raw = read_u32(what);
    if (raw > static_cast<uint32_t>(GgufType::kFloat64))
      f_.fail(what + " has unknown value type " + std::to_string(raw));
    return static_cast<GgufType>(raw);
  }

  GgufValue read_value(GgufType type, const std::string& key, int depth) {
    GgufValue v;
    v.type = type;
    switch (type) {
      case GgufType::kUint8: v.integer = read_pod<uint8_t>(key); break;
      case GgufType::kInt8: v.integer = read_pod<int8_t>(key); break;
      case GgufType::kUint16: v.integer = read_pod<uint16_t>(key); break;
      case GgufType::kInt16: v.integer = read_pod<int16_t>(key); break;
      case GgufType::kUint32: v.integer = read_pod<uint32_t>(key); break;
      case GgufType::kInt32: v.integer = read_pod<int32_t>(key); break;
      case GgufType::kInt64: v.integer = read_pod<int64_t>(key); break;
      case GgufType::kUint64: {
        const uint64_t u = read_pod<uint64_t>(key);
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
          f_.fail(key + ": uint64 value " + std::to_string(u) + " is out of range");
        v.integer = static_cast<int64_t>(u);
        break;
      }
      case GgufType::kFloat32: v.real = read_pod<float>(key); break;
      case GgufType::kFloat64: v.real = read_pod<double>(key); break;
      case GgufType::kBool: {
        const uint8_t b = read_pod<uint8_t>(key);
        if (b > 1) f_.fail(key + ": bool value " + std::to_string(b) + " is neither 0 nor 1");
        v.integer = b;
        break;
      }
      case GgufType::kString: v.string = read_string(key); break;
      case GgufType::kArray: {
        if (depth >= kMaxArrayDepth) f_.fail(key + ": arrays nested deeper than " + std::to_string(kMaxArrayDepth));
        v.element_type = read_type(key + " element type");
        const uint64_t n = read_u64(key + " array length");
        // Each element takes at least one byte: a longer array cannot fit in what is left.
        if (n > size_ - pos_)
          f_.fail("truncated: " + key + " claims " + std::to_string(n) + " elements, the file has " +
                  std::to_string(size_ - pos_) + " bytes left");
        v.items.reserve(n);
        for (uint64_t i = 0; i < n; ++i) v.items.push_back(read_value(v.element_type, key, depth + 1));
        break;
      }
    }
    return v;
  }

  void read_kv() {
    const std::string key = read_string("a metadata key");
    const std::string shown = "metadata key '" + one_line(key) + "'";
    if (key.empty()) f_.fail("a metadata key is empty");
    const GgufType type = read_type(shown);
    GgufValue value = read_value(type, shown, 0);
    if (!f_.metadata_.emplace(key, std::move(value)).second) f_.fail(shown + " appears twice");
  }

  void read_tensor_info() {
    GgufTensorInfo t;
    t.name = read_string("a tensor name");
    const std::string shown = "tensor '" + one_line(t.name) + "'";
    if (t.name.empty() || t.name.size() > kMaxNameBytes)
      f_.fail(shown + ": name length " + std::to_string(t.name.size()) + " is not in 1.." +
              std::to_string(kMaxNameBytes));
    const uint32_t n_dims = read_u32(shown + " dimension count");
    if (n_dims < 1 || n_dims > kMaxDims)
      f_.fail(shown + " has " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
    uint64_t numel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t n = read_u64(shown + " dimension");
      if (n == 0 || n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
          __builtin_mul_overflow(numel, n, &numel) || numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        f_.fail(shown + " has an invalid dimension " + std::to_string(n));
      t.ne.push_back(static_cast<int64_t>(n));
    }
    const uint32_t raw_type = read_u32(shown + " type");
    const std::optional<GgmlTypeInfo> info = ggml_type_info(raw_type);
    if (!info) f_.fail(shown + " has unknown ggml type " + std::to_string(raw_type));
    t.type = static_cast<GgmlType>(raw_type);
    if (t.ne[0] % info->block_size != 0)
      f_.fail(shown + " of type " + info->name + " has " + std::to_string(t.ne[0]) +
              " columns, not a multiple of its block size " + std::to_string(info->block_size));
    uint64_t n_bytes = 0;
    if (__builtin_mul_overflow(numel / static_cast<uint64_t>(info->block_size), info->block_bytes, &n_bytes))
      f_.fail(shown + " is too large");
    t.n_bytes = n_bytes;
    t.offset = read_u64(shown + " offset");
    if (!f_.index_.emplace(t.name, f_.tensors_.size()).second) f_.fail(shown + " appears twice");
    f_.tensors_.push_back(std::move(t));
  }

  void place(GgufTensorInfo& t) const {
    const std::string shown = "tensor '" + one_line(t.name) + "'";
    if (t.offset % f_.alignment_ != 0)
      f_.fail(shown + " offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
              std::to_string(f_.alignment_));
    const uint64_t available = size_ - f_.data_offset_;
    if (t.offset > available || t.n_bytes > available - t.offset)
      f_.fail(shown + " data [" + std::to_string(t.offset) + ", +" + std::to_string(t.n_bytes) +
              ") runs past the end of the file (" + std::to_string(available) + " data bytes)");
    t.data = bytes_ + f_.data_offset_ + t.offset;
  }

  GgufFile& f_;
  const uint8_t* bytes_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

GgufFile GgufFile::open(const std::string& path) {
  GgufFile file;
  file.path_ = path;
  file.file_ = MappedFile::open(path, 24, "a GGUF header");
  GgufParser(file).parse();
  return file;
}

void GgufFile::fail(const std::string& problem) const { fail_one_line(path_, problem); }

const GgufValue& GgufFile::value(const std::string& key) const {
  const auto it = metadata_.find(key);
  if (it == metadata_.end()) fail("metadata key '" + key + "' is missing");
  return it->second;
}

namespace {

bool is_integer(GgufType t) {
  return t == GgufType::kUint8 || t == GgufType::kInt8 || t == GgufType::kUint16 || t == GgufType::kInt16 ||
         t == GgufType::kUint32 || t == GgufType::kInt32 || t == GgufType::kUint64 || t == GgufType::kInt64;
}
bool is_number(GgufType t) { return is_integer(t) || t == GgufType::kFloat32 || t == GgufType::kFloat64; }

}  // namespace

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type != GgufType::kString) fail("metadata key '" + key + "' is a " + gguf_type_name(v.type) + ", expected a string");
  return v.string;
}

int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue& v = value(key);
  if (!is_integer(v.type)) fail("metadata key '" + key + "' is a " + gguf_type_name(v.type) + ", expected an integer");
  return v.integer;
}

double GgufFile::get_float(const std::string& key) const {
  const GgufValue& v = value(key);
  if (!is_number(v.type)) fail("metadata key '" + key + "' is a " + gguf_type_name(v.type) + ", expected a number");
  return is_integer(v.type) ? static_cast<double>(v.integer) : v.real;
}

bool GgufFile::get_bool(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type != GgufType::kBool) fail("metadata key '" + key + "' is a " + gguf_type_name(v.type) + ", expected a bool");
  return v.integer != 0;
}

namespace {

bool is_string(GgufType t) { return t == GgufType::kString; }

// The items of array `key` after checking their type (element_ok), mapped by `pick`.
template <typename Pick>
auto array_items(const GgufFile& f, const std::string& key, bool (*element_ok)(GgufType), const char* what, Pick pick) {
  const GgufValue& v = f.value(key);
  if (v.type != GgufType::kArray || !element_ok(v.element_type)) f.fail("metadata key '" + key + "' is not an array of " + what);
  std::vector<decltype(pick(v))> out;
  out.reserve(v.items.size());
  for (const GgufValue& item : v.items) out.push_back(pick(item));
  return out;
}

}  // namespace

std::vector<std::string> GgufFile::get_strings(const std::string& key) const {
  return array_items(*this, key, is_string, "strings", [](const GgufValue& item) { return item.string; });
}

std::vector<int64_t> GgufFile::get_ints(const std::string& key) const {
  return array_items(*this, key, is_integer, "integers", [](const GgufValue& item) { return item.integer; });
}

std::optional<int64_t> GgufFile::find_int(const std::string& key) const {
  return has(key) ? std::optional<int64_t>(get_int(key)) : std::nullopt;
}
std::optional<double> GgufFile::find_float(const std::string& key) const {
  return has(key) ? std::optional<double>(get_float(key)) : std::nullopt;
}
std::optional<std::string> GgufFile::find_string(const std::string& key) const {
  return has(key) ? std::optional<std::string>(get_string(key)) : std::nullopt;
}

const GgufTensorInfo& GgufFile::tensor(const std::string& name, const std::vector<int64_t>& ne) const {
  const auto it = index_.find(name);
  if (it == index_.end()) fail("tensor '" + name + "' is missing");
  const GgufTensorInfo& t = tensors_[it->second];
  if (!ne.empty() && t.ne != ne)
    fail("tensor '" + name + "' has shape " + format_ne(t.ne) + ", expected " + format_ne(ne) + " (ggml order)");
  return t;
}

std::vector<float> GgufFile::read_f32(const GgufTensorInfo& info) const {
  if (!can_dequantize(info.type))
    fail("tensor '" + info.name + "' has type " + ggml_type_name(info.type) +
         ", which is not supported (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K)");
  std::vector<float> values(static_cast<size_t>(info.numel()));
  const int64_t n_rows = info.n_rows(), n_cols = info.ne[0];
  const size_t row_bytes = ggml_row_bytes(info.type, n_cols);
#pragma omp parallel for schedule(static) if (n_rows >= 64)
  for (int64_t r = 0; r < n_rows; ++r)
    dequantize_row(info.type, info.data + static_cast<size_t>(r) * row_bytes, values.data() + r * n_cols, n_cols);
  return values;
}

}  // namespace dspark::model
