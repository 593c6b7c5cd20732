#include "model/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "common/error.h"
#include "expect_error.h"
#include "test_util.h"

namespace dspark::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kFixtures = std::string(DSPARK_SHARED_DIR) + "/fixtures";

using test::TempDir;
using test::write_text;

using test::expect_error;

// A Llama-3.1-style config, shrunk.
json llama3_json() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": false,
    "attention_dropout": 0.0,
    "bos_token_id": 128000,
    "eos_token_id": [128001, 128008, 128009],
    "hidden_act": "silu",
    "hidden_size": 256,
    "initializer_range": 0.02,
    "intermediate_size": 896,
    "max_position_embeddings": 131072,
    "mlp_bias": false,
    "model_type": "llama",
    "num_attention_heads": 8,
    "num_hidden_layers": 4,
    "num_key_value_heads": 2,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_scaling": {
      "factor": 8.0,
      "high_freq_factor": 4.0,
      "low_freq_factor": 1.0,
      "original_max_position_embeddings": 8192,
      "rope_type": "llama3"
    },
    "rope_theta": 500000.0,
    "tie_word_embeddings": false,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.43.0.dev0",
    "use_cache": true,
    "vocab_size": 128256
  })");
}

json tied_json() {
  std::ifstream in(kFixtures + "/tiny-qwen3-tied/config.json");
  return json::parse(in);
}

void expect_same(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.arch, b.arch);
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.n_layers, b.n_layers);
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_scaling.type, b.rope_scaling.type);
  EXPECT_EQ(a.rope_scaling.factor, b.rope_scaling.factor);
  EXPECT_EQ(a.rope_scaling.low_freq_factor, b.rope_scaling.low_freq_factor);
  EXPECT_EQ(a.rope_scaling.high_freq_factor, b.rope_scaling.high_freq_factor);
  EXPECT_EQ(a.rope_scaling.original_max_position_embeddings, b.rope_scaling.original_max_position_embeddings);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.torch_dtype, b.torch_dtype);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.eos_token_ids, b.eos_token_ids);
}

// ---------------------------------------------------------------------------------------------
// Fixtures

TEST(Config, TiedQwen3Fixture) {
  const std::string dir = kFixtures + "/tiny-qwen3-tied";
  ModelConfig c = ModelConfig::load(dir);
  EXPECT_EQ(c.arch, Arch::kQwen3);
  EXPECT_EQ(c.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.intermediate_size, 128);
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling.type, "");
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.max_position_embeddings, 4096);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.bos_token_id, 456);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{458}));
  EXPECT_EQ(c.raw["max_window_layers"], 2);
  expect_same(c, ModelConfig::load(dir + "/config.json"));
}

TEST(Config, UntiedQwen3Fixture) {
  ModelConfig c = ModelConfig::load(kFixtures + "/tiny-qwen3-untied/config.json");
  EXPECT_EQ(c.arch, Arch::kQwen3);
  EXPECT_EQ(c.hidden_size, 96);
  EXPECT_EQ(c.intermediate_size, 160);
  EXPECT_EQ(c.n_layers, 3);
  EXPECT_EQ(c.n_heads, 6);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.head_dim, 32);  // not hidden / heads
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.torch_dtype, "float32");
}

TEST(Config, DeepSpecDrafterNeedsTheFlag) {
  const std::string path = kFixtures + "/deepspec-tiny/dspark/config.json";
  expect_error([&] { ModelConfig::load(path); },
               {path, "architecture 'Qwen3DSparkModel' is not supported", "Qwen3ForCausalLM",
                "LlamaForCausalLM"});
  ModelConfig c = ModelConfig::load(kFixtures + "/deepspec-tiny/dspark", true);
  EXPECT_EQ(c.arch, Arch::kQwen3);
  EXPECT_EQ(c.architecture, "Qwen3DSparkModel");
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_EQ(c.raw["block_size"], 5);
  EXPECT_EQ(c.raw["mask_token_id"], 461);
  EXPECT_EQ(c.raw["target_layer_ids"], json::array({0, 1}));
  EXPECT_EQ(c.raw["markov_rank"], 16);

  // DFlash lacks the DSpark-only keys; it loads the same way.
  ModelConfig f = ModelConfig::load(kFixtures + "/deepspec-tiny/dflash/config.json", true);
  EXPECT_EQ(f.raw["markov_rank"], 0);
  EXPECT_FALSE(f.raw.contains("markov_head_type"));

  // Drafter keys survive to_json and the round trip.
  json out = c.to_json();
  EXPECT_EQ(out["block_size"], 5);
  EXPECT_EQ(out["architectures"], json::array({"Qwen3DSparkModel"}));
  expect_same(c, ModelConfig::from_json(out, "roundtrip", true));

  json bad = c.raw;
  bad["model_type"] = "mistral";
  expect_error([&] { ModelConfig::from_json(bad, "drafter.json", true); },
               {"drafter.json", "Qwen3DSparkModel", "model_type 'mistral'", "qwen3 or llama"});
}

TEST(Config, Llama3WithRopeScaling) {
  ModelConfig c = ModelConfig::from_json(llama3_json(), "llama/config.json");
  EXPECT_EQ(c.arch, Arch::kLlama);
  EXPECT_EQ(c.architecture, "LlamaForCausalLM");
  EXPECT_EQ(c.head_dim, 32);  // hidden / heads
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000);
  EXPECT_EQ(c.rope_scaling.type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 8);
  EXPECT_DOUBLE_EQ(c.rope_scaling.low_freq_factor, 1);
  EXPECT_DOUBLE_EQ(c.rope_scaling.high_freq_factor, 4);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.max_position_embeddings, 131072);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{128001, 128008, 128009}));

  // Legacy "type" key and attention_bias.
  json j = llama3_json();
  j["rope_scaling"].erase("rope_type");
  j["rope_scaling"]["type"] = "llama3";
  j["attention_bias"] = true;
  ModelConfig legacy = ModelConfig::from_json(j, "x");
  EXPECT_EQ(legacy.rope_scaling.type, "llama3");
  EXPECT_TRUE(legacy.attention_bias);
}

TEST(Config, Transformers5Spelling) {
  json j = llama3_json();
  j.erase("torch_dtype");
  j.erase("rope_theta");
  j["rope_parameters"] = j["rope_scaling"];
  j["rope_parameters"]["rope_theta"] = 500000.0;
  j.erase("rope_scaling");
  j["dtype"] = "bfloat16";
  ModelConfig c = ModelConfig::from_json(j, "t5.json");
  expect_same(c, ModelConfig::from_json(llama3_json(), "t4.json"));

  json q = tied_json();
  q.erase("rope_theta");
  q.erase("rope_scaling");
  q.erase("torch_dtype");
  q["rope_parameters"] = {{"rope_theta", 1000000.0}, {"rope_type", "default"}};
  q["dtype"] = "bfloat16";
  expect_same(ModelConfig::from_json(q, "q5.json"), ModelConfig::from_json(tied_json(), "q4.json"));

  // Some transitional configs carry rope_theta only inside rope_scaling.
  json t = llama3_json();
  t.erase("rope_theta");
  t["rope_scaling"]["rope_theta"] = 500000.0;
  expect_same(ModelConfig::from_json(t, "t.json"), ModelConfig::from_json(llama3_json(), "t4.json"));
}

TEST(Config, DefaultsForOptionalKeys) {
  json j = {{"model_type", "qwen3"},  {"vocab_size", 100},      {"hidden_size", 64},
            {"intermediate_size", 128}, {"num_hidden_layers", 1}, {"num_attention_heads", 4},
            {"rms_norm_eps", 1e-6}};
  ModelConfig q = ModelConfig::from_json(j, "min.json");
  EXPECT_EQ(q.arch, Arch::kQwen3);
  EXPECT_EQ(q.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(q.n_kv_heads, 4);
  EXPECT_EQ(q.head_dim, 16);
  EXPECT_FALSE(q.tie_word_embeddings);
  EXPECT_TRUE(q.qk_norm);
  EXPECT_EQ(q.max_position_embeddings, 32768);
  EXPECT_DOUBLE_EQ(q.rope_theta, 10000);
  EXPECT_EQ(q.torch_dtype, "");
  EXPECT_FALSE(q.bos_token_id.has_value());
  EXPECT_TRUE(q.eos_token_ids.empty());
  expect_same(q, ModelConfig::from_json(q.to_json(), "rt"));

  j["model_type"] = "llama";
  j["head_dim"] = nullptr;  // null counts as absent
  j["num_key_value_heads"] = nullptr;
  j["torch_dtype"] = "torch.float16";
  ModelConfig l = ModelConfig::from_json(j, "min.json");
  EXPECT_EQ(l.arch, Arch::kLlama);
  EXPECT_FALSE(l.qk_norm);
  EXPECT_EQ(l.head_dim, 16);
  EXPECT_EQ(l.n_kv_heads, 4);
  EXPECT_EQ(l.max_position_embeddings, 2048);
  EXPECT_EQ(l.torch_dtype, "float16");
}

TEST(Config, ToJsonRoundTrips) {
  for (const std::string& dir : {kFixtures + "/tiny-qwen3-tied", kFixtures + "/tiny-qwen3-untied"}) {
    ModelConfig c = ModelConfig::load(dir);
    json out = c.to_json();
    EXPECT_EQ(out["model_type"], "qwen3");
    EXPECT_EQ(out["eos_token_id"], 458);
    expect_same(c, ModelConfig::from_json(out, "rt"));
    // And through a file.
    TempDir tmp;
    write_text(tmp.file("config.json"), out.dump(2));
    expect_same(c, ModelConfig::load(tmp.str()));
  }
  ModelConfig l = ModelConfig::from_json(llama3_json(), "llama");
  json out = l.to_json();
  EXPECT_EQ(out["rope_scaling"]["rope_type"], "llama3");
  EXPECT_EQ(out["eos_token_id"], json::array({128001, 128008, 128009}));
  expect_same(l, ModelConfig::from_json(out, "rt"));

  // transformers-5 input is written back in transformers-4 spelling without conflicts.
  json t5 = tied_json();
  t5.erase("rope_theta");
  t5["rope_parameters"] = {{"rope_theta", 5.0}, {"rope_type", "default"}};
  t5["dtype"] = t5["torch_dtype"];
  t5.erase("torch_dtype");
  ModelConfig c5 = ModelConfig::from_json(t5, "t5");
  json o5 = c5.to_json();
  EXPECT_FALSE(o5.contains("rope_parameters"));
  EXPECT_FALSE(o5.contains("dtype"));
  EXPECT_EQ(o5["rope_theta"], 5.0);
  expect_same(c5, ModelConfig::from_json(o5, "rt"));

  // Edited fields win over raw.
  c5.n_layers = 7;
  c5.eos_token_ids.clear();
  c5.bos_token_id.reset();
  ModelConfig edited = ModelConfig::from_json(c5.to_json(), "rt");
  EXPECT_EQ(edited.n_layers, 7);
  EXPECT_TRUE(edited.eos_token_ids.empty());
  EXPECT_FALSE(edited.bos_token_id.has_value());
}

// ---------------------------------------------------------------------------------------------
// Errors

TEST(Config, MissingRequiredKeysAreNamed) {
  for (const char* key : {"vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
                          "num_attention_heads", "rms_norm_eps"}) {
    SCOPED_TRACE(key);
    json j = tied_json();
    j.erase(key);
    expect_error([&] { ModelConfig::from_json(j, "some/config.json"); },
                 {"some/config.json: missing required key '" + std::string(key) + "'"});
    j[key] = nullptr;
    expect_error([&] { ModelConfig::from_json(j, "some/config.json"); },
                 {"missing required key '" + std::string(key) + "'"});
  }
}

struct BadConfig {
  const char* what;
  std::function<void(json&)> edit;
  std::vector<std::string> needles;
};

TEST(Config, InvalidValuesAreRejected) {
  const std::vector<BadConfig> cases = {
      {"string int", [](json& j) { j["hidden_size"] = "64"; },
       {"key 'hidden_size' must be an integer, got string \"64\""}},
      {"float int", [](json& j) { j["vocab_size"] = 512.5; }, {"key 'vocab_size' must be an integer"}},
      {"huge int", [](json& j) { j["vocab_size"] = 18446744073709551615ull; },
       {"key 'vocab_size' must be an integer"}},
      {"string eps", [](json& j) { j["rms_norm_eps"] = "1e-6"; }, {"key 'rms_norm_eps' must be a number"}},
      {"bool as int", [](json& j) { j["num_hidden_layers"] = true; }, {"'num_hidden_layers' must be an integer"}},
      {"tie not bool", [](json& j) { j["tie_word_embeddings"] = 1; }, {"'tie_word_embeddings' must be a boolean"}},
      {"bias not bool", [](json& j) { j["attention_bias"] = "false"; }, {"'attention_bias' must be a boolean"}},
      {"unsupported arch", [](json& j) { j["architectures"] = {"MistralForCausalLM"}; },
       {"architecture 'MistralForCausalLM' is not supported (supported: Qwen3ForCausalLM, LlamaForCausalLM)"}},
      {"architectures not list", [](json& j) { j["architectures"] = "Qwen3ForCausalLM"; },
       {"key 'architectures' must be a non-empty list of strings"}},
      {"architectures empty", [](json& j) { j["architectures"] = json::array(); },
       {"key 'architectures' must be a non-empty list of strings"}},
      {"no arch, bad model_type", [](json& j) { j.erase("architectures"); j["model_type"] = "gpt2"; },
       {"no 'architectures' and model_type 'gpt2' is not supported"}},
      {"no arch, no model_type", [](json& j) { j.erase("architectures"); j.erase("model_type"); },
       {"no 'architectures'"}},
      {"heads not divisible", [](json& j) { j["num_key_value_heads"] = 3; },
       {"num_attention_heads 4 is not divisible by num_key_value_heads 3"}},
      {"zero kv heads", [](json& j) { j["num_key_value_heads"] = 0; }, {"num_key_value_heads must be positive, got 0"}},
      {"negative vocab", [](json& j) { j["vocab_size"] = -5; }, {"vocab_size must be positive, got -5"}},
      {"zero layers", [](json& j) { j["num_hidden_layers"] = 0; }, {"num_hidden_layers must be positive"}},
      {"zero heads", [](json& j) { j["num_attention_heads"] = 0; }, {"must be positive"}},
      {"zero head_dim", [](json& j) { j["head_dim"] = 0; }, {"head_dim must be positive"}},
      {"hidden not divisible", [](json& j) { j.erase("head_dim"); j["hidden_size"] = 66; },
       {"no head_dim and hidden_size 66 is not divisible by num_attention_heads 4"}},
      {"zero eps", [](json& j) { j["rms_norm_eps"] = 0; }, {"rms_norm_eps must be positive"}},
      {"negative theta", [](json& j) { j["rope_theta"] = -1.0; }, {"rope_theta must be positive"}},
      {"yarn", [](json& j) { j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; },
       {"rope_scaling type 'yarn' is not supported (supported: default, llama3)"}},
      {"rope_scaling not object", [](json& j) { j["rope_scaling"] = 8; }, {"'rope_scaling' must be an object"}},
      {"bad llama3 params",
       [](json& j) { j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0}}; },
       {"rope_scaling llama3 parameters are invalid"}},
      {"llama3 factor string",
       [](json& j) { j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", "8"}}; },
       {"key 'rope_scaling.factor' must be a number"}},
      {"rope_parameters not object", [](json& j) { j["rope_parameters"] = "x"; },
       {"'rope_parameters' must be an object"}},
      {"rope theta conflict", [](json& j) { j["rope_parameters"] = {{"rope_theta", 5.0}}; },
       {"rope_theta (1000000.0) and rope_parameters.rope_theta (5.0) disagree"}},
      {"rope theta conflict in rope_scaling",
       [](json& j) { j["rope_scaling"] = {{"rope_type", "default"}, {"rope_theta", 5.0}}; },
       {"rope_theta (1000000.0) and rope_scaling.rope_theta (5.0) disagree"}},
      {"dtype unsupported", [](json& j) { j["torch_dtype"] = "int8"; },
       {"torch_dtype 'int8' is not supported (supported: bfloat16, float16, float32)"}},
      {"dtype not string", [](json& j) { j["dtype"] = 16; }, {"key 'dtype' must be a string"}},
      {"eos negative", [](json& j) { j["eos_token_id"] = {1, -2}; }, {"'eos_token_id' contains negative id -2"}},
      {"eos strings", [](json& j) { j["eos_token_id"] = {"</s>"}; }, {"key 'eos_token_id' must be an integer"}},
      {"bos negative", [](json& j) { j["bos_token_id"] = -1; }, {"bos_token_id must be non-negative"}},
      {"gelu", [](json& j) { j["hidden_act"] = "gelu"; }, {"hidden_act 'gelu' is not supported (supported: silu)"}},
      {"mlp_bias", [](json& j) { j["mlp_bias"] = true; }, {"mlp_bias true is not supported"}},
      {"sliding window", [](json& j) { j["use_sliding_window"] = true; }, {"use_sliding_window true is not supported"}},
      {"sliding layer", [](json& j) { j["layer_types"] = {"full_attention", "sliding_attention"}; },
       {"layer_types entry string \"sliding_attention\" is not supported"}},
      {"not an object", [](json& j) { j = json::array({1}); }, {"config is not a JSON object"}},
  };
  for (const BadConfig& bc : cases) {
    SCOPED_TRACE(bc.what);
    json j = tied_json();
    bc.edit(j);
    std::vector<std::string> needles = bc.needles;
    needles.push_back("bad/config.json: ");
    expect_error([&] { ModelConfig::from_json(j, "bad/config.json"); }, needles);
  }
}

TEST(Config, FileErrorsNameTheFile) {
  TempDir tmp;
  expect_error([&] { ModelConfig::load(tmp.str()); }, {tmp.file("config.json"), "cannot open"});
  write_text(tmp.file("config.json"), "{\"vocab_size\": 5,");
  expect_error([&] { ModelConfig::load(tmp.str()); }, {tmp.file("config.json"), "not valid JSON"});
  write_text(tmp.file("config.json"), "");
  expect_error([&] { ModelConfig::load(tmp.file("config.json")); }, {tmp.file("config.json"), "not valid JSON"});
  json j = tied_json();
  j["hidden_size"] = "x";
  write_text(tmp.file("config.json"), j.dump());
  expect_error([&] { ModelConfig::load(tmp.str()); }, {tmp.file("config.json") + ": key 'hidden_size'"});
}

// ---------------------------------------------------------------------------------------------
// GenerationConfig

TEST(GenerationConfig, FixtureFile) {
  const std::string dir = kFixtures + "/tiny-qwen3-tied";
  ModelConfig c = ModelConfig::load(dir);
  GenerationConfig g = GenerationConfig::load_or_default(dir, c);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{458, 456}));
  EXPECT_FALSE(g.do_sample);
  EXPECT_DOUBLE_EQ(g.temperature, 1.0);
  EXPECT_EQ(g.top_k, 0);
  EXPECT_DOUBLE_EQ(g.top_p, 1.0);
  EXPECT_DOUBLE_EQ(g.min_p, 0.0);
  // A file inside the directory works as well.
  EXPECT_EQ(GenerationConfig::load_or_default(dir + "/config.json", c).eos_token_ids, g.eos_token_ids);
}

TEST(GenerationConfig, AbsentFileUsesModelEos) {
  TempDir tmp;
  ModelConfig c = ModelConfig::from_json(llama3_json(), "llama");
  GenerationConfig g = GenerationConfig::load_or_default(tmp.str(), c);
  EXPECT_EQ(g.eos_token_ids, c.eos_token_ids);
  EXPECT_FALSE(g.do_sample);
  EXPECT_EQ(g.top_k, 0);
}

TEST(GenerationConfig, SamplingParamsAndRoundTrip) {
  TempDir tmp;
  ModelConfig c = ModelConfig::load(kFixtures + "/tiny-qwen3-untied");
  write_text(tmp.file("generation_config.json"),
             R"({"do_sample": true, "temperature": 0.6, "top_k": 20, "top_p": 0.95, "min_p": null,
                 "transformers_version": "4.51.0"})");
  GenerationConfig g = GenerationConfig::load_or_default(tmp.str(), c);
  EXPECT_EQ(g.eos_token_ids, (std::vector<int64_t>{458}));  // from the model config
  EXPECT_TRUE(g.do_sample);
  EXPECT_DOUBLE_EQ(g.temperature, 0.6);
  EXPECT_EQ(g.top_k, 20);
  EXPECT_DOUBLE_EQ(g.top_p, 0.95);
  EXPECT_DOUBLE_EQ(g.min_p, 0.0);

  g.eos_token_ids = {1, 2};
  g.min_p = 0.05;
  write_text(tmp.file("generation_config.json"), g.to_json().dump());
  GenerationConfig back = GenerationConfig::load_or_default(tmp.str(), c);
  EXPECT_EQ(back.eos_token_ids, g.eos_token_ids);
  EXPECT_EQ(back.do_sample, g.do_sample);
  EXPECT_EQ(back.temperature, g.temperature);
  EXPECT_EQ(back.top_k, g.top_k);
  EXPECT_EQ(back.top_p, g.top_p);
  EXPECT_EQ(back.min_p, g.min_p);
}

TEST(GenerationConfig, ErrorsNameTheFile) {
  TempDir tmp;
  ModelConfig c = ModelConfig::load(kFixtures + "/tiny-qwen3-untied");
  const std::string file = tmp.file("generation_config.json");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "not valid JSON"},
      {"[]", "not a JSON object"},
      {R"({"temperature": -1})", "temperature must be >= 0"},
      {R"({"top_k": -1})", "top_k must be >= 0"},
      {R"({"top_p": 0})", "top_p must be in (0, 1]"},
      {R"({"top_p": 1.5})", "top_p must be in (0, 1]"},
      {R"({"min_p": 2})", "min_p must be in [0, 1]"},
      {R"({"do_sample": "yes"})", "key 'do_sample' must be a boolean"},
      {R"({"top_k": 2.5})", "key 'top_k' must be an integer"},
      {R"({"eos_token_id": "x"})", "key 'eos_token_id' must be an integer"},
  };
  for (const auto& [text, needle] : cases) {
    SCOPED_TRACE(text);
    write_text(file, text);
    expect_error([&] { GenerationConfig::load_or_default(tmp.str(), c); }, {file + ": ", needle});
  }
}

}  // namespace
}  // namespace dspark::model
