#include "train/feature_cache.h"

#include <algorithm>
#include <cstdio>

#include "common/error.h"
#include "common/fnv1a.h"
#include "common/json_file.h"

namespace dspark::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// FNV-1a over a file's bytes, as hex: cheap enough for weights of a few hundred MB, and any
// retraining or regeneration changes it.
std::string file_hash(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file.string() + ": cannot open");
  uint64_t h = kFnv1aOffset;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h = fnv1a(std::string_view(buf.data(), static_cast<size_t>(in.gcount())), h);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

// The files a target's numbers come from: a GGUF file itself, or a directory's config.json and
// weight shards.
json target_hashes(const fs::path& target) {
  json files = json::object();
  if (fs::is_regular_file(target)) {
    files[target.filename().string()] = file_hash(target);
    return files;
  }
  std::vector<fs::path> paths;
  for (const auto& e : fs::directory_iterator(target))
    if (e.path().filename() == "config.json" || e.path().extension() == ".safetensors") paths.push_back(e.path());
  std::sort(paths.begin(), paths.end());
  for (const fs::path& p : paths) files[p.filename().string()] = file_hash(p);
  return files;
}

const char* dtype_name(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat32: return "f32";
    case torch::kBFloat16: return "bf16";
    case torch::kFloat16: return "f16";
    default: throw Error("feature cache: unsupported feature dtype " + std::string(c10::toString(t)));
  }
}

std::optional<torch::ScalarType> parse_dtype(const std::string& s) {
  if (s == "f32") return torch::kFloat32;
  if (s == "bf16") return torch::kBFloat16;
  if (s == "f16") return torch::kFloat16;
  return std::nullopt;
}

}  // namespace

json FeatureCache::fingerprint(const fs::path& target, const fs::path& data_file,
                               const std::vector<int64_t>& capture_layers, bool bf16_autocast,
                               const std::string& device_type) {
  return {{"target", target_hashes(target)},     {"data", file_hash(data_file)},
          {"capture_layers", capture_layers},    {"bf16_autocast", bf16_autocast},
          {"device", device_type}};
}

FeatureCache::FeatureCache(fs::path dir, const json& fingerprint) : dir_(std::move(dir)) {
  fs::create_directories(dir_);
  const fs::path fp_file = dir_ / "fingerprint.json";
  if (fs::exists(fp_file)) {
    const json stored = read_json_file(fp_file);
    if (stored != fingerprint) {
      std::string what = "the target's files";
      for (const char* key : {"data", "capture_layers", "bf16_autocast", "device"})
        if (stored.value(key, json()) != fingerprint.value(key, json())) what = std::string("\"") + key + "\"";
      throw Error(dir_.string() + ": a feature cache made for another run (" + what +
                  " differ); give --feature-cache another directory or delete this one");
    }
  } else {
    write_json_file(fp_file, fingerprint);
  }
  recover();
  data_out_.open(dir_ / "features.bin", std::ios::binary | std::ios::app);
  index_out_.open(dir_ / "index.jsonl", std::ios::app);
  data_in_.open(dir_ / "features.bin", std::ios::binary);
  if (!data_out_ || !index_out_ || !data_in_) throw Error(dir_.string() + ": cannot open the feature cache's files");
}

// Reads index.jsonl up to its last whole, consistent line and cuts both files there.
void FeatureCache::recover() {
  const fs::path index_file = dir_ / "index.jsonl", data_file = dir_ / "features.bin";
  int64_t index_bytes = 0;
  if (fs::exists(index_file)) {
    std::ifstream in(index_file, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const int64_t data_size = fs::exists(data_file) ? static_cast<int64_t>(fs::file_size(data_file)) : 0;
    size_t pos = 0;
    for (size_t nl; (nl = text.find('\n', pos)) != std::string::npos; pos = nl + 1) {
      const json line = json::parse(text.substr(pos, nl - pos), nullptr, /*allow_exceptions=*/false);
      if (!line.is_object()) break;
      Entry e;
      e.offset = line.value("offset", int64_t{-1});
      e.rows = line.value("rows", int64_t{-1});
      e.feature_cols = line.value("feature_cols", int64_t{-1});
      e.hidden_cols = line.value("hidden_cols", int64_t{-1});
      const std::optional<torch::ScalarType> dtype = parse_dtype(line.value("dtype", std::string()));
      const std::optional<torch::ScalarType> hidden_dtype = parse_dtype(line.value("hidden_dtype", std::string()));
      if (!dtype || !hidden_dtype || e.offset != end_ || e.rows < 0 || e.feature_cols < 0 || e.hidden_cols < 0) break;
      e.dtype = *dtype;
      e.hidden_dtype = *hidden_dtype;
      const int64_t bytes = e.rows * (e.feature_cols * static_cast<int64_t>(c10::elementSize(e.dtype)) +
                                      e.hidden_cols * static_cast<int64_t>(c10::elementSize(e.hidden_dtype)));
      if (e.offset + bytes > data_size) break;
      index_[line.value("id", std::string())] = e;
      end_ = e.offset + bytes;
      index_bytes = static_cast<int64_t>(nl + 1);
    }
    fs::resize_file(index_file, static_cast<uintmax_t>(index_bytes));
  }
  if (fs::exists(data_file)) fs::resize_file(data_file, static_cast<uintmax_t>(end_));
}

std::optional<TargetFeatures> FeatureCache::find(const std::string& id) {
  const auto it = index_.find(id);
  if (it == index_.end()) return std::nullopt;
  const Entry& e = it->second;
  TargetFeatures f{torch::empty({e.rows, e.feature_cols}, torch::TensorOptions().dtype(e.dtype)),
                   torch::empty({e.rows, e.hidden_cols}, torch::TensorOptions().dtype(e.hidden_dtype))};
  data_in_.clear();
  data_in_.seekg(e.offset);
  data_in_.read(static_cast<char*>(f.features.data_ptr()), static_cast<std::streamsize>(f.features.nbytes()));
  data_in_.read(static_cast<char*>(f.final_hidden.data_ptr()), static_cast<std::streamsize>(f.final_hidden.nbytes()));
  if (!data_in_) throw Error(dir_.string() + "/features.bin: read failed at byte " + std::to_string(e.offset));
  return f;
}

void FeatureCache::put(const std::string& id, const TargetFeatures& f) {
  if (index_.count(id)) return;
  const torch::Tensor features = f.features.to(torch::kCPU).contiguous();
  const torch::Tensor hidden = f.final_hidden.to(torch::kCPU).contiguous();
  DSPARK_ASSERT(features.dim() == 2 && hidden.dim() == 2 && features.size(0) == hidden.size(0));
  Entry e{end_, features.size(0), features.size(1), hidden.size(1), features.scalar_type(), hidden.scalar_type()};
  data_out_.write(static_cast<const char*>(features.data_ptr()), static_cast<std::streamsize>(features.nbytes()));
  data_out_.write(static_cast<const char*>(hidden.data_ptr()), static_cast<std::streamsize>(hidden.nbytes()));
  data_out_.flush();
  if (!data_out_) throw Error(dir_.string() + "/features.bin: write failed (disk full?)");
  // The index line follows its bytes, so a line on disk always describes bytes on disk.
  index_out_ << json{{"id", id}, {"offset", e.offset}, {"rows", e.rows}, {"feature_cols", e.feature_cols},
                     {"hidden_cols", e.hidden_cols}, {"dtype", dtype_name(e.dtype)},
                     {"hidden_dtype", dtype_name(e.hidden_dtype)}}.dump()
             << '\n';
  index_out_.flush();
  if (!index_out_) throw Error(dir_.string() + "/index.jsonl: write failed (disk full?)");
  end_ += static_cast<int64_t>(features.nbytes() + hidden.nbytes());
  index_[id] = e;
}

}  // namespace dspark::train
