#include "tokenizer/tokenizer_json.h"

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "tokenizer/regex.h"
#include "tokenizer/tokenizer_json_sax.h"

namespace dspark::tokenizer {
namespace {

using nlohmann::json;

// The split regex that ByteLevel applies itself when use_regex is true (GPT-2's).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

class SpecReader {
 public:
  explicit SpecReader(std::string origin) : origin_(std::move(origin)) {}

  // `root` is the document without model.vocab / model.merges, which arrive in `captured`.
  TokenizerSpec read(const json& root, const TokenizerJsonSax& capture, BpeSpec captured) {
    if (!root.is_object()) fail("the top level is not a JSON object");
    TokenizerSpec spec;
    // The model first: for another tokenizer family its type is the most telling complaint.
    if (!root.contains("model")) fail("no \"model\" section");
    spec.bpe = read_model(root["model"], capture, std::move(captured));
    spec.nfc = read_normalizer(root.value("normalizer", json()));
    read_pre_tokenizer(root.value("pre_tokenizer", json()), spec.splits);
    if (!saw_byte_level_) fail("pre_tokenizer has no ByteLevel step; only byte-level BPE is supported");
    check_decoder(root.value("decoder", json()));
    spec.added_tokens = read_added_tokens(root.value("added_tokens", json::array()));
    return spec;
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const { throw Error(origin_ + ": " + problem); }

  std::string type_of(const json& node, const char* what) const {
    if (!node.is_object() || !node.contains("type") || !node["type"].is_string()) {
      fail(std::string(what) + " has no \"type\"");
    }
    return node["type"].get<std::string>();
  }

  bool read_normalizer(const json& node) const {
    if (node.is_null()) return false;
    const std::string type = type_of(node, "normalizer");
    if (type == "NFC") return true;
    if (type == "Sequence") {
      bool nfc = false;
      for (const json& child : node.value("normalizers", json::array())) nfc = read_normalizer(child) || nfc;
      return nfc;
    }
    fail("unsupported normalizer '" + type + "' (supported: NFC, a Sequence of NFC, or none)");
  }

  void read_pre_tokenizer(const json& node, std::vector<SplitSpec>& splits) {
    if (node.is_null()) return;
    const std::string type = type_of(node, "pre_tokenizer");
    if (type == "Sequence") {
      for (const json& child : node.value("pretokenizers", json::array())) read_pre_tokenizer(child, splits);
    } else if (type == "Split") {
      splits.push_back(read_split(node));
    } else if (type == "ByteLevel") {
      read_byte_level(node, splits);
    } else {
      fail("unsupported pre_tokenizer '" + type + "' (supported: Split, ByteLevel, Sequence)");
    }
  }

  SplitSpec read_split(const json& node) const {
    const std::string behavior = node.value("behavior", std::string("Isolated"));
    if (behavior != "Isolated") fail("unsupported Split behavior '" + behavior + "' (supported: Isolated)");
    if (node.value("invert", false)) fail("unsupported Split with invert: true");
    const json& pattern = node.value("pattern", json());
    if (pattern.contains("Regex") && pattern["Regex"].is_string()) {
      return SplitSpec{to_pcre2_pattern(pattern["Regex"].get<std::string>()), false};
    }
    if (pattern.contains("String") && pattern["String"].is_string()) {
      return SplitSpec{pattern["String"].get<std::string>(), true};
    }
    fail("Split pre_tokenizer has no \"Regex\" or \"String\" pattern");
  }

  void read_byte_level(const json& node, std::vector<SplitSpec>& splits) {
    if (node.value("add_prefix_space", false)) fail("unsupported ByteLevel with add_prefix_space: true");
    if (node.value("use_regex", true)) splits.push_back(SplitSpec{to_pcre2_pattern(kGpt2Pattern), false});
    saw_byte_level_ = true;
  }

  void check_decoder(const json& node) const {
    if (node.is_null()) fail("no decoder; only the ByteLevel decoder is supported");
    const std::string type = type_of(node, "decoder");
    if (type == "Sequence") {
      for (const json& child : node.value("decoders", json::array())) check_decoder(child);
    } else if (type != "ByteLevel") {
      fail("unsupported decoder '" + type + "' (supported: ByteLevel)");
    }
  }

  BpeSpec read_model(const json& model, const TokenizerJsonSax& capture, BpeSpec bpe) const {
    if (!model.is_object()) fail("\"model\" is not an object");
    // Hugging Face also accepts an untagged model that has merges; that is BPE.
    const std::string type = model.contains("type") ? type_of(model, "model") : "BPE";
    if (type != "BPE") fail("unsupported model type '" + type + "' (only byte-level BPE is supported)");
    check_plain_bpe(model);
    if (!capture.vocab_seen()) fail("model has no \"vocab\" object");
    if (!capture.merges_seen()) fail("model has no \"merges\" array");
    bpe.ignore_merges = model.value("ignore_merges", false);
    if (model.contains("unk_token") && model["unk_token"].is_string()) bpe.unk_token = model["unk_token"];
    return bpe;
  }

  // Options that would change what BPE produces and that byte-level models do not use.
  void check_plain_bpe(const json& model) const {
    if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() != 0.0) {
      fail("unsupported BPE dropout (encoding would not be deterministic)");
    }
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty()) {
        fail(std::string("unsupported BPE ") + key + " (byte-level BPE uses none)");
      }
    }
    if (model.value("byte_fallback", false)) fail("unsupported BPE byte_fallback (byte-level BPE needs none)");
  }

  std::vector<AddedToken> read_added_tokens(const json& list) const {
    if (!list.is_array()) fail("\"added_tokens\" is not an array");
    std::vector<AddedToken> tokens;
    for (const json& entry : list) {
      if (!entry.is_object() || !entry.contains("id") || !entry.contains("content")) {
        fail("an added_tokens entry lacks \"id\" or \"content\"");
      }
      const int64_t id = entry["id"].get<int64_t>();
      if (id < 0 || id > INT32_MAX) fail("added token id " + std::to_string(id) + " is out of range");
      tokens.push_back(AddedToken{static_cast<int32_t>(id), entry["content"].get<std::string>(),
                                  entry.value("special", false), entry.value("lstrip", false),
                                  entry.value("rstrip", false), entry.value("single_word", false),
                                  entry.value("normalized", false)});
    }
    return tokens;
  }

  std::string origin_;
  bool saw_byte_level_ = false;
};

std::string read_file(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) throw Error(file.string() + ": cannot open tokenizer file");
  std::string contents(static_cast<size_t>(in.tellg()), '\0');
  in.seekg(0);
  if (!in.read(contents.data(), static_cast<std::streamsize>(contents.size()))) {
    throw Error(file.string() + ": cannot read tokenizer file");
  }
  return contents;
}

}  // namespace

TokenizerSpec read_tokenizer_json(const std::filesystem::path& file) {
  const std::string text = read_file(file);
  json root;
  BpeSpec captured;
  TokenizerJsonSax capture(file.string(), root, captured);
  try {
    json::sax_parse(text, &capture);
  } catch (const json::exception& e) {
    throw Error(file.string() + ": not valid JSON (" + e.what() + ")");
  }
  try {
    return SpecReader(file.string()).read(root, capture, std::move(captured));
  } catch (const json::exception& e) {
    throw Error(file.string() + ": unexpected value (" + e.what() + ")");
  }
}

}  // namespace dspark::tokenizer
