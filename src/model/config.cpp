#include "model/config.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "common/error.h"
#include "common/json_file.h"
#include "common/one_line_error.h"
#include "model/gguf.h"

namespace dspark::model {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kQwen3Arch = "Qwen3ForCausalLM";
constexpr const char* kLlamaArch = "LlamaForCausalLM";

[[noreturn]] void fail(const std::string& source, const std::string& problem) { fail_one_line(source, problem); }

// A JSON value for a message: compact, one line, bounded.
std::string brief(const json& v) {
  std::string s = v.dump(-1, ' ', true, json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return std::string(v.type_name()) + " " + s;
}


// Typed access to one JSON object; `prefix` qualifies key names in messages ("rope_scaling.").
class Reader {
 public:
  Reader(const json& obj, const std::string& source, std::string prefix = "")
      : obj_(obj), source_(source), prefix_(std::move(prefix)) {}

  // Absent and null both count as "not given".
  const json* find(const std::string& key) const {
    auto it = obj_.find(key);
    return (it == obj_.end() || it->is_null()) ? nullptr : &*it;
  }
  bool has(const std::string& key) const { return find(key) != nullptr; }

  const json& require(const std::string& key) const {
    const json* v = find(key);
    if (!v) fail(source_, "missing required key '" + prefix_ + key + "'");
    return *v;
  }

  std::optional<int64_t> opt_int(const std::string& key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    return as_int(key, *v);
  }
  int64_t req_int(const std::string& key) const { return as_int(key, require(key)); }

  std::optional<double> opt_double(const std::string& key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    return as_double(key, *v);
  }
  double req_double(const std::string& key) const { return as_double(key, require(key)); }

  std::optional<bool> opt_bool(const std::string& key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) wrong_type(key, "a boolean", *v);
    return v->get<bool>();
  }

  std::optional<std::string> opt_string(const std::string& key) const {
    const json* v = find(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) wrong_type(key, "a string", *v);
    return v->get<std::string>();
  }

  // An id or a list of ids; absent/null -> empty.
  std::vector<int64_t> token_ids(const std::string& key) const {
    const json* v = find(key);
    std::vector<int64_t> ids;
    if (!v) return ids;
    if (v->is_array()) {
      for (const json& e : *v) ids.push_back(as_int(key, e));
    } else {
      ids.push_back(as_int(key, *v));
    }
    for (int64_t id : ids)
      if (id < 0) fail(source_, "'" + prefix_ + key + "' contains negative id " + std::to_string(id));
    return ids;
  }

  [[noreturn]] void wrong_type(const std::string& key, const char* expected, const json& v) const {
    fail(source_, "key '" + prefix_ + key + "' must be " + expected + ", got " + brief(v));
  }

 private:
  int64_t as_int(const std::string& key, const json& v) const {
    if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
    if (v.is_number_unsigned() && v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX))
      return static_cast<int64_t>(v.get<uint64_t>());
    wrong_type(key, "an integer", v);
  }
  double as_double(const std::string& key, const json& v) const {
    if (!v.is_number()) wrong_type(key, "a number", v);
    double d = v.get<double>();
    if (!std::isfinite(d)) wrong_type(key, "a finite number", v);
    return d;
  }

  const json& obj_;
  const std::string& source_;
  std::string prefix_;
};

struct ArchChoice {
  Arch arch;
  std::string architecture;
};

std::optional<Arch> arch_from_model_type(const std::optional<std::string>& model_type) {
  if (model_type == "qwen3") return Arch::kQwen3;
  if (model_type == "llama") return Arch::kLlama;
  return std::nullopt;
}

ArchChoice read_architecture(const Reader& r, const std::string& src, bool allow_any) {
  std::string architecture;
  if (const json* a = r.find("architectures")) {
    if (!a->is_array() || a->empty() || !(*a)[0].is_string())
      r.wrong_type("architectures", "a non-empty list of strings", *a);
    architecture = (*a)[0].get<std::string>();
  }
  const auto model_type = r.opt_string("model_type");
  if (architecture == kQwen3Arch) return {Arch::kQwen3, architecture};
  if (architecture == kLlamaArch) return {Arch::kLlama, architecture};
  const auto from_type = arch_from_model_type(model_type);
  if (architecture.empty()) {
    if (!from_type)
      fail(src, "no 'architectures' and model_type '" + model_type.value_or("") +
                    "' is not supported (supported: qwen3, llama)");
    return {*from_type, *from_type == Arch::kQwen3 ? kQwen3Arch : kLlamaArch};
  }
  if (!allow_any)
    fail(src, "architecture '" + architecture + "' is not supported (supported: " + kQwen3Arch +
                  ", " + kLlamaArch + ")");
  if (!from_type)
    fail(src, "architecture '" + architecture + "' has model_type '" + model_type.value_or("") +
                  "'; a drafter config needs model_type qwen3 or llama");
  return {*from_type, architecture};
}

RopeScaling read_rope_scaling(const json& obj, const std::string& src, const std::string& key) {
  Reader r(obj, src, key + ".");
  RopeScaling rs;
  std::string type = r.opt_string("rope_type").value_or(r.opt_string("type").value_or("default"));
  if (type == "default") return rs;
  if (type != "llama3")
    fail(src, key + " type '" + type + "' is not supported (supported: default, llama3)");
  rs.type = type;
  rs.factor = r.opt_double("factor").value_or(rs.factor);
  rs.low_freq_factor = r.opt_double("low_freq_factor").value_or(rs.low_freq_factor);
  rs.high_freq_factor = r.opt_double("high_freq_factor").value_or(rs.high_freq_factor);
  rs.original_max_position_embeddings =
      r.opt_int("original_max_position_embeddings").value_or(rs.original_max_position_embeddings);
  if (!(rs.factor > 0) || !(rs.low_freq_factor > 0) || !(rs.high_freq_factor > rs.low_freq_factor) ||
      rs.original_max_position_embeddings <= 0)
    fail(src, key + " llama3 parameters are invalid (need factor > 0, 0 < low_freq_factor < "
                    "high_freq_factor, original_max_position_embeddings > 0)");
  return rs;
}

// rope_theta and rope_scaling, from transformers-4 keys or transformers-5 rope_parameters.
// rope_theta may sit at the top level, in rope_parameters or in rope_scaling; all given must agree.
void read_rope(const Reader& r, const json& j, const std::string& src, ModelConfig& c) {
  const json* params = r.find("rope_parameters");
  if (params && !params->is_object()) r.wrong_type("rope_parameters", "an object", *params);
  const json* scaling = r.find("rope_scaling");
  if (scaling && !scaling->is_object()) r.wrong_type("rope_scaling", "an object", *scaling);

  std::optional<double> theta;
  std::string theta_key;
  auto take_theta = [&](const json& obj, const std::string& prefix) {
    auto t = Reader(obj, src, prefix).opt_double("rope_theta");
    if (!t) return;
    if (theta && *theta != *t)
      fail(src, theta_key + " (" + json(*theta).dump() + ") and " + prefix + "rope_theta (" +
                    json(*t).dump() + ") disagree");
    theta = t;
    theta_key = prefix + "rope_theta";
  };
  take_theta(j, "");
  if (params) take_theta(*params, "rope_parameters.");
  if (scaling) take_theta(*scaling, "rope_scaling.");
  c.rope_theta = theta.value_or(10000.0);

  if (scaling)
    c.rope_scaling = read_rope_scaling(*scaling, src, "rope_scaling");
  else if (params)
    c.rope_scaling = read_rope_scaling(*params, src, "rope_parameters");
}

std::string read_dtype(const Reader& r, const std::string& src) {
  const char* key = r.has("dtype") ? "dtype" : "torch_dtype";
  std::string dtype = r.opt_string(key).value_or("");
  if (dtype.rfind("torch.", 0) == 0) dtype = dtype.substr(6);
  if (!dtype.empty() && dtype != "bfloat16" && dtype != "float16" && dtype != "float32")
    fail(src, std::string(key) + " '" + dtype +
                  "' is not supported (supported: bfloat16, float16, float32)");
  return dtype;
}

// Features HF would honour but our forward pass does not implement.
void reject_unsupported(const Reader& r, const std::string& src) {
  if (auto act = r.opt_string("hidden_act"); act && *act != "silu")
    fail(src, "hidden_act '" + *act + "' is not supported (supported: silu)");
  if (r.opt_bool("mlp_bias").value_or(false)) fail(src, "mlp_bias true is not supported");
  if (r.opt_bool("use_sliding_window").value_or(false))
    fail(src, "use_sliding_window true is not supported (full attention only)");
  if (const json* lt = r.find("layer_types")) {
    if (!lt->is_array()) r.wrong_type("layer_types", "a list of strings", *lt);
    for (const json& t : *lt)
      if (!t.is_string() || t.get<std::string>() != "full_attention")
        fail(src, "layer_types entry " + brief(t) + " is not supported (full_attention only)");
  }
}

void check_sizes(const ModelConfig& c, const std::string& src) {
  const std::pair<const char*, int64_t> positive[] = {
      {"vocab_size", c.vocab_size},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.n_layers},
      {"num_attention_heads", c.n_heads},
      {"num_key_value_heads", c.n_kv_heads},
      {"head_dim", c.head_dim},
      {"max_position_embeddings", c.max_position_embeddings},
  };
  for (const auto& [key, value] : positive)
    if (value <= 0) fail(src, std::string(key) + " must be positive, got " + std::to_string(value));
  if (c.n_heads % c.n_kv_heads != 0)
    fail(src, "num_attention_heads " + std::to_string(c.n_heads) +
                  " is not divisible by num_key_value_heads " + std::to_string(c.n_kv_heads));
  if (!(c.rms_norm_eps > 0)) fail(src, "rms_norm_eps must be positive");
  if (!(c.rope_theta > 0)) fail(src, "rope_theta must be positive");
}

ModelConfig parse_model_config(const json& j, const std::string& src, bool allow_any) {
  if (!j.is_object()) fail(src, "config is not a JSON object");
  Reader r(j, src);
  ModelConfig c;
  ArchChoice arch = read_architecture(r, src, allow_any);
  c.arch = arch.arch;
  c.architecture = arch.architecture;
  c.vocab_size = r.req_int("vocab_size");
  c.hidden_size = r.req_int("hidden_size");
  c.intermediate_size = r.req_int("intermediate_size");
  c.n_layers = r.req_int("num_hidden_layers");
  c.n_heads = r.req_int("num_attention_heads");
  c.rms_norm_eps = r.req_double("rms_norm_eps");
  c.n_kv_heads = r.opt_int("num_key_value_heads").value_or(c.n_heads);
  if (auto hd = r.opt_int("head_dim")) {
    c.head_dim = *hd;
  } else {
    if (c.n_heads > 0 && c.hidden_size % c.n_heads != 0)
      fail(src, "no head_dim and hidden_size " + std::to_string(c.hidden_size) +
                    " is not divisible by num_attention_heads " + std::to_string(c.n_heads));
    c.head_dim = c.n_heads > 0 ? c.hidden_size / c.n_heads : 0;
  }
  read_rope(r, j, src, c);
  c.tie_word_embeddings = r.opt_bool("tie_word_embeddings").value_or(false);
  c.qk_norm = c.arch == Arch::kQwen3;
  c.attention_bias = r.opt_bool("attention_bias").value_or(false);
  c.max_position_embeddings =
      r.opt_int("max_position_embeddings").value_or(c.arch == Arch::kQwen3 ? 32768 : 2048);
  c.torch_dtype = read_dtype(r, src);
  c.bos_token_id = r.opt_int("bos_token_id");
  if (c.bos_token_id && *c.bos_token_id < 0)
    fail(src, "bos_token_id must be non-negative, got " + std::to_string(*c.bos_token_id));
  c.eos_token_ids = r.token_ids("eos_token_id");
  reject_unsupported(r, src);
  check_sizes(c, src);
  c.raw = j;
  return c;
}

json ids_to_json(const std::vector<int64_t>& ids) {
  if (ids.empty()) return nullptr;
  if (ids.size() == 1) return ids[0];
  return ids;
}

}  // namespace

const char* arch_name(Arch arch) {
  switch (arch) {
    case Arch::kQwen3: return "qwen3";
    case Arch::kLlama: return "llama";
  }
  return "?";
}

void ModelConfig::check_positions(int64_t n, const std::string& what) const {
  if (max_position_embeddings > 0 && n > max_position_embeddings)
    throw Error(what + ": " + std::to_string(n) + " positions exceed the model's max_position_embeddings (" +
                std::to_string(max_position_embeddings) + ")");
}

ModelConfig ModelConfig::load(const std::string& path, bool allow_any_architecture) {
  std::error_code ec;
  std::string file = fs::is_directory(path, ec) ? (fs::path(path) / "config.json").string() : path;
  return from_json(read_json_file(file), file, allow_any_architecture);
}

ModelConfig ModelConfig::from_json(const json& j, const std::string& source_name,
                                   bool allow_any_architecture) {
  try {
    return parse_model_config(j, source_name, allow_any_architecture);
  } catch (const json::exception& e) {  // safety net: every access above is type-checked
    fail(source_name, json_error_reason(e));
  }
}

json ModelConfig::to_json() const {
  json j = raw.is_object() ? raw : json::object();
  for (const char* key : {"dtype", "rope_parameters"}) j.erase(key);
  j["architectures"] = json::array({architecture});
  j["model_type"] = arch_name(arch);
  j["vocab_size"] = vocab_size;
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = n_layers;
  j["num_attention_heads"] = n_heads;
  j["num_key_value_heads"] = n_kv_heads;
  j["head_dim"] = head_dim;
  j["rms_norm_eps"] = rms_norm_eps;
  j["rope_theta"] = rope_theta;
  if (rope_scaling.type.empty()) {
    j["rope_scaling"] = nullptr;
  } else {
    j["rope_scaling"] = {{"rope_type", rope_scaling.type},
                         {"factor", rope_scaling.factor},
                         {"low_freq_factor", rope_scaling.low_freq_factor},
                         {"high_freq_factor", rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings",
                          rope_scaling.original_max_position_embeddings}};
  }
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["attention_bias"] = attention_bias;
  j["max_position_embeddings"] = max_position_embeddings;
  if (torch_dtype.empty())
    j.erase("torch_dtype");
  else
    j["torch_dtype"] = torch_dtype;
  j["bos_token_id"] = bos_token_id ? json(*bos_token_id) : json(nullptr);
  j["eos_token_id"] = ids_to_json(eos_token_ids);
  if (!j.contains("hidden_act")) j["hidden_act"] = "silu";
  return j;
}

GenerationConfig GenerationConfig::load_or_default(const std::string& model_dir,
                                                   const ModelConfig& model) {
  std::error_code ec;
  fs::path dir = fs::is_regular_file(model_dir, ec) ? fs::path(model_dir).parent_path()
                                                    : fs::path(model_dir);
  const std::string file = (dir / "generation_config.json").string();
  GenerationConfig g;
  g.eos_token_ids = model.eos_token_ids;
  if (is_gguf_path(model_dir) || !fs::exists(file, ec)) return g;  // a GGUF file carries no sampling defaults

  const json j = read_json_file(file);
  try {
    if (!j.is_object()) fail(file, "not a JSON object");
    Reader r(j, file);
    if (r.has("eos_token_id")) g.eos_token_ids = r.token_ids("eos_token_id");
    g.do_sample = r.opt_bool("do_sample").value_or(g.do_sample);
    g.temperature = r.opt_double("temperature").value_or(g.temperature);
    g.top_k = r.opt_int("top_k").value_or(g.top_k);
    g.top_p = r.opt_double("top_p").value_or(g.top_p);
    g.min_p = r.opt_double("min_p").value_or(g.min_p);
  } catch (const json::exception& e) {
    fail(file, json_error_reason(e));
  }
  if (g.temperature < 0) fail(file, "temperature must be >= 0");
  if (g.top_k < 0) fail(file, "top_k must be >= 0");
  if (!(g.top_p > 0 && g.top_p <= 1)) fail(file, "top_p must be in (0, 1]");
  if (!(g.min_p >= 0 && g.min_p <= 1)) fail(file, "min_p must be in [0, 1]");
  return g;
}

json GenerationConfig::to_json() const {
  return {{"eos_token_id", ids_to_json(eos_token_ids)},
          {"do_sample", do_sample},
          {"temperature", temperature},
          {"top_k", top_k},
          {"top_p", top_p},
          {"min_p", min_p}};
}

}  // namespace dspark::model
