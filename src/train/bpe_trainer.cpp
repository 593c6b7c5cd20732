#include "train/bpe_trainer.h"

#include <omp.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "common/error.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/regex.h"
#include "tokenizer/string_index.h"
#include "tokenizer/unicode.h"

namespace dspark::train {
namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

using WordCounts = std::unordered_map<std::string, uint64_t, tokenizer::StringViewHash, std::equal_to<>>;

uint64_t pack(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}
int32_t left_of(uint64_t key) { return static_cast<int32_t>(key >> 32); }
int32_t right_of(uint64_t key) { return static_cast<int32_t>(key & 0xFFFFFFFFu); }

// std::hash of an integer is the identity; pair keys need their bits mixed.
struct PairHash {
  size_t operator()(uint64_t key) const {
    key ^= key >> 33;
    key *= 0xFF51AFD7ED558CCDull;
    key ^= key >> 33;
    return static_cast<size_t>(key);
  }
};

struct PairData {
  int64_t count = 0;
  std::vector<uint32_t> words;  // words that contained the pair when it was counted (may be stale)
};

struct HeapEntry {
  int64_t count;
  uint64_t pair;
};

// The 256 byte symbols in the order of their byte-level characters ("!" first, as in GPT-2 and
// Qwen vocabularies).
std::vector<unsigned char> bytes_in_alphabet_order() {
  std::vector<unsigned char> bytes(256);
  for (int b = 0; b < 256; ++b) bytes[b] = static_cast<unsigned char>(b);
  std::sort(bytes.begin(), bytes.end(), [](unsigned char x, unsigned char y) {
    return tokenizer::byte_to_alphabet(x) < tokenizer::byte_to_alphabet(y);
  });
  return bytes;
}

}  // namespace

struct BpeTrainer::State {
  tokenizer::AddedVocabulary added;
  tokenizer::PreTokenizer pre_tokenizer;
  WordCounts counts;
  uint64_t total = 0;

  // Adds the words of `text` to `into`; returns how many there were.
  uint64_t count_text(std::string_view text, WordCounts& into) const {
    uint64_t n = 0;
    for (const tokenizer::TextSegment& segment : added.split(text)) {
      if (segment.added_id) continue;
      std::string_view plain = text.substr(segment.start, segment.end - segment.start);
      std::string normalized;
      if (tokenizer::may_change_under_nfc(plain)) {
        normalized = tokenizer::nfc(plain);
        plain = normalized;
      }
      pre_tokenizer.for_each_word(plain, [&](std::string_view word) {
        ++n;
        if (auto it = into.find(word); it != into.end()) {
          ++it->second;
        } else {
          into.emplace(std::string(word), 1);
        }
      });
    }
    return n;
  }

  void merge_counts(WordCounts&& other) {
    if (counts.empty()) {
      counts = std::move(other);
      return;
    }
    for (auto it = other.begin(); it != other.end();) {
      auto node = other.extract(it++);
      if (auto found = counts.find(node.key()); found != counts.end()) {
        found->second += node.mapped();
      } else {
        counts.insert(std::move(node));
      }
    }
  }
};

std::vector<SpecialToken> default_special_tokens() {
  return {{"<|endoftext|>", true}, {"<|im_start|>", true}, {"<|im_end|>", true},
          {"<think>", false},      {"</think>", false},    {"<|mask|>", true}};
}

std::optional<int32_t> TrainedBpe::special_id(std::string_view content) const {
  for (size_t i = 0; i < special_tokens.size(); ++i) {
    if (special_tokens[i].content == content) return static_cast<int32_t>(tokens.size() + i);
  }
  return std::nullopt;
}

BpeTrainer::BpeTrainer(BpeTrainerOptions options) : options_(std::move(options)), state_(std::make_unique<State>()) {
  const int64_t minimum = 256 + static_cast<int64_t>(options_.special_tokens.size()) + 1;
  if (options_.vocab_size < minimum) {
    throw Error("BPE vocabulary size " + std::to_string(options_.vocab_size) + " is too small: the 256 bytes and " +
                std::to_string(options_.special_tokens.size()) + " special tokens need at least " +
                std::to_string(minimum));
  }
  std::vector<tokenizer::AddedToken> added;
  for (size_t i = 0; i < options_.special_tokens.size(); ++i) {
    const SpecialToken& token = options_.special_tokens[i];
    if (token.content.empty()) throw Error("special token " + std::to_string(i) + " is empty");
    for (size_t j = 0; j < i; ++j) {
      if (options_.special_tokens[j].content == token.content) throw Error("special token '" + token.content + "' is listed twice");
    }
    added.push_back(tokenizer::AddedToken{static_cast<int32_t>(i), token.content, token.special});
  }
  state_->added = tokenizer::AddedVocabulary(std::move(added));
  state_->pre_tokenizer.add_isolated_split(
      tokenizer::Regex(tokenizer::to_pcre2_pattern(kQwenPretokenizerPattern), false));
}

BpeTrainer::~BpeTrainer() = default;
BpeTrainer::BpeTrainer(BpeTrainer&&) noexcept = default;
BpeTrainer& BpeTrainer::operator=(BpeTrainer&&) noexcept = default;

void BpeTrainer::count(std::string_view text) {
  if (const auto bad = tokenizer::find_invalid_utf8(text)) {
    throw Error("BPE training text is not valid UTF-8 at byte " + std::to_string(*bad));
  }
  state_->total += state_->count_text(text, state_->counts);
}

void BpeTrainer::count(const std::vector<std::string>& texts) {
  const int n_threads = std::max(1, options_.threads > 0 ? options_.threads : omp_get_max_threads());
  std::vector<WordCounts> local(static_cast<size_t>(n_threads));
  std::vector<uint64_t> totals(static_cast<size_t>(n_threads), 0);
  std::string error;
  const State& state = *state_;
  const auto n = static_cast<int64_t>(texts.size());
#pragma omp parallel for schedule(dynamic, 64) num_threads(n_threads)
  for (int64_t i = 0; i < n; ++i) {
    const int thread = omp_get_thread_num();
    const std::string& text = texts[static_cast<size_t>(i)];
    if (const auto bad = tokenizer::find_invalid_utf8(text)) {
#pragma omp critical(dspark_bpe_error)
      if (error.empty()) {
        error = "BPE training text " + std::to_string(i) + " is not valid UTF-8 at byte " + std::to_string(*bad);
      }
      continue;
    }
    totals[thread] += state.count_text(text, local[thread]);
  }
  if (!error.empty()) throw Error(error);
  for (size_t t = 0; t < local.size(); ++t) {
    state_->merge_counts(std::move(local[t]));
    state_->total += totals[t];
  }
}

size_t BpeTrainer::distinct_words() const { return state_->counts.size(); }
uint64_t BpeTrainer::total_words() const { return state_->total; }

TrainedBpe BpeTrainer::train(const std::function<void(const BpeProgress&)>& progress) const {
  const auto start = std::chrono::steady_clock::now();
  TrainedBpe result;
  result.special_tokens = options_.special_tokens;
  const size_t target_tokens = static_cast<size_t>(options_.vocab_size) - options_.special_tokens.size();

  std::array<int32_t, 256> byte_id{};
  std::unordered_map<std::string, int32_t> id_of_bytes;
  for (const unsigned char b : bytes_in_alphabet_order()) {
    byte_id[b] = static_cast<int32_t>(result.tokens.size());
    id_of_bytes.emplace(std::string(1, static_cast<char>(b)), byte_id[b]);
    result.tokens.emplace_back(1, static_cast<char>(b));
  }
  std::vector<std::string>& tokens = result.tokens;

  // Words of at least two bytes as symbol sequences, with their counts.
  std::vector<std::vector<int32_t>> words;
  std::vector<int64_t> freq;
  words.reserve(state_->counts.size());
  for (const auto& [word, n] : state_->counts) {
    if (word.size() < 2) continue;
    std::vector<int32_t> symbols(word.size());
    for (size_t i = 0; i < word.size(); ++i) symbols[i] = byte_id[static_cast<unsigned char>(word[i])];
    words.push_back(std::move(symbols));
    freq.push_back(static_cast<int64_t>(n));
  }

  std::unordered_map<uint64_t, PairData, PairHash> pairs;
  for (uint32_t w = 0; w < words.size(); ++w) {
    const std::vector<int32_t>& s = words[w];
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      PairData& p = pairs[pack(s[i], s[i + 1])];
      p.count += freq[w];
      if (p.words.empty() || p.words.back() != w) p.words.push_back(w);
    }
  }

  // Max-heap on count; among equal counts the lexicographically smallest (left, right) first.
  auto lower_priority = [&tokens](const HeapEntry& x, const HeapEntry& y) {
    if (x.count != y.count) return x.count < y.count;
    const int left = tokens[left_of(x.pair)].compare(tokens[left_of(y.pair)]);
    if (left != 0) return left > 0;
    return tokens[right_of(x.pair)].compare(tokens[right_of(y.pair)]) > 0;
  };
  std::vector<HeapEntry> heap;
  heap.reserve(pairs.size());
  for (const auto& [key, data] : pairs) heap.push_back({data.count, key});
  std::make_heap(heap.begin(), heap.end(), lower_priority);
  auto push = [&](HeapEntry entry) {
    heap.push_back(entry);
    std::push_heap(heap.begin(), heap.end(), lower_priority);
  };

  std::vector<uint64_t> touched;  // pairs whose count grew during one merge
  auto dec = [&](int32_t left, int32_t right, int64_t n) {
    const auto it = pairs.find(pack(left, right));
    DSPARK_ASSERT(it != pairs.end());
    it->second.count -= n;
  };
  auto inc = [&](int32_t left, int32_t right, int64_t n, uint32_t w) {
    const uint64_t key = pack(left, right);
    PairData& p = pairs[key];
    p.count += n;
    if (p.words.empty() || p.words.back() != w) p.words.push_back(w);
    touched.push_back(key);
  };

  const size_t merges_total = target_tokens - 256;
  std::unordered_set<uint64_t, PairHash> merged_pairs;
  while (tokens.size() < target_tokens) {
    if (heap.empty()) {
      throw Error("BPE training ran out of pairs after " + std::to_string(result.merges.size()) + " merges (" +
                  std::to_string(tokens.size() + options_.special_tokens.size()) +
                  " tokens); the corpus is too small for a vocabulary of " + std::to_string(options_.vocab_size));
    }
    std::pop_heap(heap.begin(), heap.end(), lower_priority);
    const HeapEntry top = heap.back();
    heap.pop_back();
    const auto found = pairs.find(top.pair);
    const int64_t actual = found == pairs.end() ? 0 : found->second.count;
    if (actual != top.count) {  // stale: counts only fall, so re-queue at the true count
      if (actual > 0) push({actual, top.pair});
      continue;
    }
    if (actual <= 0) continue;

    const int32_t a = left_of(top.pair), b = right_of(top.pair);
    std::string merged = tokens[a] + tokens[b];
    int32_t c;
    if (const auto existing = id_of_bytes.find(merged); existing != id_of_bytes.end()) {
      c = existing->second;  // another merge path already made these bytes
    } else {
      c = static_cast<int32_t>(tokens.size());
      id_of_bytes.emplace(merged, c);
      tokens.push_back(std::move(merged));
    }
    // A pair merged before can reappear only next to a token whose bytes another merge path made
    // again; the earlier merge already covers it, so it is applied but not listed twice.
    if (merged_pairs.insert(top.pair).second) result.merges.emplace_back(a, b);

    std::vector<uint32_t> affected = std::move(found->second.words);
    found->second.words = {};
    std::sort(affected.begin(), affected.end());
    affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
    touched.clear();
    for (const uint32_t w : affected) {
      std::vector<int32_t>& s = words[w];
      const int64_t n = freq[w];
      size_t out = 0;
      for (size_t i = 0; i < s.size();) {
        if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
          if (out > 0) {
            dec(s[out - 1], a, n);
            inc(s[out - 1], c, n, w);
          }
          dec(a, b, n);
          if (i + 2 < s.size()) {
            dec(b, s[i + 2], n);
            inc(c, s[i + 2], n, w);
          }
          s[out++] = c;
          i += 2;
        } else {
          s[out++] = s[i++];
        }
      }
      s.resize(out);
    }
    if (const auto merged_pair = pairs.find(top.pair); merged_pair != pairs.end() && merged_pair->second.count == 0) {
      pairs.erase(merged_pair);
    }
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (const uint64_t key : touched) {
      const int64_t count = pairs.at(key).count;
      if (count > 0) push({count, key});
    }
    if (progress) {
      progress(BpeProgress{result.merges.size(), merges_total,
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()});
    }
  }
  return result;
}

std::string_view chat_template_source() {
  // Qwen3's template less the tool sections; every role other than assistant is a plain turn.
  static constexpr std::string_view kTemplate = R"({%- if messages[0].role == 'system' %}
    {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- set ns = namespace(found_query=false, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if not ns.found_query and message.role == "user" %}
        {%- set ns.found_query = true %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.role == "assistant" %}
        {%- set content = message.content %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is defined and message.reasoning_content is not none %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in message.content %}
                {%- set content = message.content.split('</think>')[-1].lstrip('\n') %}
                {%- set reasoning_content = message.content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif not (message.role == "system" and loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %})";
  return kTemplate;
}

namespace {

ojson byte_level_step() {
  ojson step;
  step["type"] = "ByteLevel";
  step["add_prefix_space"] = false;
  step["trim_offsets"] = false;
  step["use_regex"] = false;
  return step;
}

ojson added_token_fields(const SpecialToken& token) {
  ojson entry;
  entry["content"] = token.content;
  entry["lstrip"] = false;
  entry["normalized"] = false;
  entry["rstrip"] = false;
  entry["single_word"] = false;
  entry["special"] = token.special;
  return entry;
}

void write_json(const fs::path& file, const ojson& document) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(file.string() + ": cannot open for writing");
  out << document.dump(2) << '\n';
  out.flush();
  if (!out) throw Error(file.string() + ": write failed");
}

}  // namespace

void write_tokenizer_files(const TrainedBpe& bpe, const fs::path& dir, const TokenizerFileOptions& options) {
  for (const char* required : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    if (!bpe.special_id(required)) {
      throw Error(dir.string() + ": cannot write a ChatML tokenizer without the special token " + std::string(required));
    }
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(dir.string() + ": cannot create the tokenizer directory (" + ec.message() + ")");

  ojson added_tokens = ojson::array();
  for (const SpecialToken& token : bpe.special_tokens) {
    ojson entry;
    entry["id"] = *bpe.special_id(token.content);
    entry["content"] = token.content;
    entry["single_word"] = false;
    entry["lstrip"] = false;
    entry["rstrip"] = false;
    entry["normalized"] = false;
    entry["special"] = token.special;
    added_tokens.push_back(std::move(entry));
  }

  ojson split;
  split["type"] = "Split";
  split["pattern"] = ojson{{"Regex", std::string(kQwenPretokenizerPattern)}};
  split["behavior"] = "Isolated";
  split["invert"] = false;
  ojson pre_tokenizer;
  pre_tokenizer["type"] = "Sequence";
  pre_tokenizer["pretokenizers"] = ojson::array({split, byte_level_step()});

  ojson vocab = ojson::object();
  std::vector<std::string> spelling(bpe.tokens.size());
  for (size_t id = 0; id < bpe.tokens.size(); ++id) {
    spelling[id] = tokenizer::bytes_to_alphabet(bpe.tokens[id]);
    vocab[spelling[id]] = id;
  }
  if (vocab.size() != bpe.tokens.size()) throw Error(dir.string() + ": trained BPE has duplicate tokens");
  ojson merges = ojson::array();
  for (const auto& [left, right] : bpe.merges) merges.push_back(ojson::array({spelling[left], spelling[right]}));

  ojson model;
  model["type"] = "BPE";
  model["dropout"] = nullptr;
  model["unk_token"] = nullptr;
  model["continuing_subword_prefix"] = "";
  model["end_of_word_suffix"] = "";
  model["fuse_unk"] = false;
  model["byte_fallback"] = false;
  model["ignore_merges"] = false;
  model["vocab"] = std::move(vocab);
  model["merges"] = std::move(merges);

  ojson tokenizer_json;
  tokenizer_json["version"] = "1.0";
  tokenizer_json["truncation"] = nullptr;
  tokenizer_json["padding"] = nullptr;
  tokenizer_json["added_tokens"] = std::move(added_tokens);
  tokenizer_json["normalizer"] = ojson{{"type", "NFC"}};
  tokenizer_json["pre_tokenizer"] = std::move(pre_tokenizer);
  tokenizer_json["post_processor"] = byte_level_step();
  tokenizer_json["decoder"] = byte_level_step();
  tokenizer_json["model"] = std::move(model);
  write_json(dir / "tokenizer.json", tokenizer_json);

  ojson decoder = ojson::object();
  ojson additional = ojson::array();
  for (const SpecialToken& token : bpe.special_tokens) {
    decoder[std::to_string(*bpe.special_id(token.content))] = added_token_fields(token);
    if (token.special && token.content != "<|endoftext|>") additional.push_back(token.content);
  }
  ojson config;
  config["add_bos_token"] = false;
  config["add_prefix_space"] = false;
  config["added_tokens_decoder"] = std::move(decoder);
  config["additional_special_tokens"] = std::move(additional);
  config["bos_token"] = nullptr;
  config["chat_template"] = std::string(chat_template_source());
  config["clean_up_tokenization_spaces"] = false;
  config["eos_token"] = "<|im_end|>";
  config["errors"] = "replace";
  if (bpe.special_id("<|mask|>")) config["mask_token"] = "<|mask|>";
  config["model_max_length"] = options.model_max_length;
  config["pad_token"] = "<|endoftext|>";
  config["split_special_tokens"] = false;
  config["tokenizer_class"] = "Qwen2Tokenizer";
  config["unk_token"] = nullptr;
  write_json(dir / "tokenizer_config.json", config);
}

}  // namespace dspark::train
