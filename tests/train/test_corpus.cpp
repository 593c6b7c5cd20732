#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "test_util.h"
#include "tokenizer/chat_template.h"
#include "train/corpus.h"

namespace dspark::train {
namespace {

namespace fs = std::filesystem;
using dspark::test::TempDir;
using nlohmann::json;

// Strings planted in files the builder must never use.
constexpr const char* kEvalMarker = "EVAL_LEAK";
constexpr const char* kRejectedMarker = "REJECTED_SIDE";
constexpr const char* kExcludedMarker = "EXCLUDED_FILE";

const std::set<std::string> kTrainSources{"gsm8k-train",        "math-train",        "gpteacher-codegen",
                                          "code-alpaca-2k",     "mbpp-train",        "gpteacher-roleplay",
                                          "rasbt-instruction",  "hh-rlhf-harmless",  "self-instruct-seed",
                                          "python-stdlib"};

void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  test::write_text(path, text);
}

void write_jsonl(const fs::path& path, const std::vector<json>& records) {
  std::string text;
  for (const json& r : records) text += r.dump() + "\n";
  write_file(path, text);
}

std::vector<json> instruction_records(const std::string& tag, const char* answer_key, int n) {
  std::vector<json> records;
  for (int i = 0; i < n; ++i) {
    records.push_back({{"instruction", tag + " instruction " + std::to_string(i)},
                       {"input", i % 2 ? "input " + std::to_string(i) : ""},
                       {answer_key, tag + " answer " + std::to_string(i)}});
  }
  return records;
}

// A miniature shared/data with every train file and every eval file (the latter full of markers).
struct FakeData {
  TempDir dir;
  fs::path data() const { return dir / "data"; }
  fs::path stdlib() const { return dir / "stdlib"; }

  FakeData() {
    const fs::path d = data();
    std::vector<json> gsm8k, math, hh, seeds, mbpp;
    for (int i = 0; i < 20; ++i) {
      const std::string n = std::to_string(i);
      gsm8k.push_back({{"question", "Q" + n + ": how many apples?"},
                       {"answer", "She has 2+3 = <<2+3=5>>5 apples.\n#### 5"}});
      math.push_back({{"problem", "Problem " + n}, {"solution", "So $x=\\boxed{" + n + "}$."}, {"idx", i}});
      hh.push_back({{"chosen", "\n\nHuman: question " + n + "\n\nAssistant: answer " + n +
                                   "\n\nHuman: and then?\n\nAssistant: more " + n},
                    {"rejected", std::string("\n\nHuman: question\n\nAssistant: ") + kRejectedMarker}});
      seeds.push_back({{"id", "seed_task_" + n},
                       {"instruction", "Seed " + n},
                       {"instances", json::array({{{"input", ""}, {"output", "seed output " + n}}})},
                       {"is_classification", false}});
    }
    hh.push_back({{"chosen", "\n\nHuman: dangling\n\nAssistant: reply\n\nHuman: no answer"}, {"rejected", ""}});
    hh.push_back({{"chosen", "\n\nHuman: empty\n\nAssistant: "}, {"rejected", ""}});
    for (int task = 1; task <= 974; ++task) {
      const std::string t = std::to_string(task);
      mbpp.push_back({{"task_id", task},
                      {"text", (task <= 600 ? std::string(kEvalMarker) + " " : std::string()) + "Write f" + t + "."},
                      {"code", "def f" + t + "():\r\n\treturn " + t},
                      {"test_list", json::array({"assert f" + t + "() == " + t})}});
    }
    write_jsonl(d / "math/gsm8k/train.jsonl", gsm8k);
    write_jsonl(d / "math/math_train/train.jsonl", math);
    std::vector<json> codegen = instruction_records("codegen", "response", 20);
    codegen.push_back(codegen[3]);  // an exact duplicate
    write_file(d / "code/gpteacher_codegen/codegen-instruct.json", json(codegen).dump());
    write_file(d / "code/code_alpaca_2k/code_alpaca_2k.json", json(instruction_records("alpaca", "output", 20)).dump());
    write_jsonl(d / "code/mbpp/mbpp.jsonl", mbpp);
    write_file(d / "chat/gpteacher_roleplay/roleplay-simple-deduped-roleplay-instruct.json",
               json(instruction_records("roleplay", "response", 20)).dump());
    write_file(d / "chat/rasbt_instruction_data/instruction-data.json",
               json(instruction_records("rasbt", "output", 20)).dump());
    write_jsonl(d / "chat/hh_rlhf_harmless_base/test.jsonl", hh);
    write_jsonl(d / "chat/self_instruct/seed_tasks.jsonl", seeds);

    const json leak{{"question", kEvalMarker}, {"answer", kEvalMarker}, {"turns", {kEvalMarker}},
                    {"instruction", kEvalMarker}, {"text", kEvalMarker}, {"prompt", kEvalMarker}};
    for (const char* eval : {"math/gsm8k/test.jsonl", "math/gsm8k/test_socratic.jsonl", "code/humaneval/HumanEval.jsonl",
                             "chat/vicuna_bench/question.jsonl", "chat/self_instruct/user_oriented_instructions.jsonl",
                             "eval/gsm8k.jsonl", "eval/humaneval.jsonl", "eval/mbpp.jsonl"}) {
      write_jsonl(d / eval, {leak});
    }
    write_file(d / "code/mbpp/sanitized-mbpp.json", json::array({leak}).dump());

    const fs::path s = stdlib();
    write_file(s / "mod_a.py", "def a():\n    return 1\n");
    write_file(s / "pkg/__init__.py", "from .mod_b import b\n");
    write_file(s / "pkg/mod_b.py", "def b():\n    return 2\n");
    for (const char* excluded : {"test/test_x.py", "tests/t.py", "site-packages/s.py", "idlelib/i.py",
                                 "pkg/tests/t2.py", "__pycache__/c.py", "test_mod.py", "notes.txt"}) {
      write_file(s / excluded, std::string("# ") + kExcludedMarker + "\n");
    }
    write_file(s / "big.py", "# " + std::string(kExcludedMarker) + "\n" + std::string(2000, '#') + "\n");
    write_file(s / "latin1.py", std::string("# ") + kExcludedMarker + " caf\xE9\n");
  }

  CorpusOptions options(uint64_t seed = 7) const {
    CorpusOptions o;
    o.data_dir = data();
    o.seed = seed;
    o.valid_fraction = 0.1;
    o.min_valid_per_source = 1;
    o.python_stdlib_dir = stdlib();
    o.python_stdlib_bytes = 10'000;
    o.python_max_file_bytes = 1000;
    return o;
  }
};

const FakeData& fake_data() {
  static const FakeData data;  // built once for the suite, removed at exit
  return data;
}

std::vector<std::string> ids_of(const std::vector<Record>& records) {
  std::vector<std::string> ids;
  for (const Record& r : records) ids.push_back(r.id);
  return ids;
}

bool mentions(const Record& r, const std::string& needle) {
  if (r.text.find(needle) != std::string::npos) return true;
  return std::any_of(r.messages.begin(), r.messages.end(),
                     [&](const Message& m) { return m.content.find(needle) != std::string::npos; });
}

const Record& find_record(const Corpus& corpus, const std::string& id) {
  for (const auto* split : {&corpus.train, &corpus.valid}) {
    for (const Record& r : *split) {
      if (r.id == id) return r;
    }
  }
  throw std::runtime_error("no record " + id);
}

// Checks shared by the fake and the real data: only train sources, MBPP train tasks only, a
// non-empty validation slice per domain, and no record in both splits.
void expect_clean_split(const Corpus& corpus) {
  std::set<std::string> train_ids, valid_ids;
  std::map<Domain, size_t> valid_per_domain;
  for (const auto* split : {&corpus.train, &corpus.valid}) {
    for (const Record& r : *split) {
      EXPECT_TRUE(kTrainSources.count(r.source)) << r.source;
      EXPECT_TRUE(r.id.starts_with(r.source + "/")) << r.id;
      if (r.source == "mbpp-train") {
        const int task = std::stoi(r.id.substr(r.id.find('/') + 1));
        EXPECT_GE(task, 601) << r.id;
        EXPECT_LE(task, 974) << r.id;
      }
      if (r.source == "python-stdlib") {
        EXPECT_TRUE(r.is_raw_text());
        EXPECT_EQ(r.domain, Domain::kCode);
      } else {
        ASSERT_GE(r.messages.size(), 2u) << r.id;
        EXPECT_EQ(r.messages.front().role, "user") << r.id;
        EXPECT_EQ(r.messages.back().role, "assistant") << r.id;
      }
      (split == &corpus.train ? train_ids : valid_ids).insert(r.id);
      if (split == &corpus.valid) ++valid_per_domain[r.domain];
    }
  }
  EXPECT_EQ(train_ids.size(), corpus.train.size()) << "duplicate ids in train";
  EXPECT_EQ(valid_ids.size(), corpus.valid.size()) << "duplicate ids in valid";
  for (const std::string& id : valid_ids) EXPECT_FALSE(train_ids.count(id)) << id << " is in both splits";
  for (const Domain d : {Domain::kMath, Domain::kCode, Domain::kChat}) {
    EXPECT_GT(valid_per_domain[d], 0u) << domain_name(d);
  }
}

TEST(Corpus, FakeDataUsesOnlyTrainSourcesAndSplitsCleanly) {
  const Corpus corpus = build_corpus(fake_data().options());
  expect_clean_split(corpus);
  for (const auto* split : {&corpus.train, &corpus.valid}) {
    for (const Record& r : *split) {
      EXPECT_FALSE(mentions(r, kEvalMarker)) << r.id;
      EXPECT_FALSE(mentions(r, kRejectedMarker)) << r.id;
      EXPECT_FALSE(mentions(r, kExcludedMarker)) << r.id;
    }
  }
  std::set<std::string> sources, python_files;
  size_t mbpp = 0;
  for (const auto* split : {&corpus.train, &corpus.valid}) {
    for (const Record& r : *split) {
      sources.insert(r.source);
      mbpp += r.source == "mbpp-train";
      if (r.source == "python-stdlib") python_files.insert(r.id);
    }
  }
  EXPECT_EQ(sources, kTrainSources);
  EXPECT_EQ(mbpp, 374u);  // tasks 601-974
  EXPECT_EQ(python_files, (std::set<std::string>{"python-stdlib/mod_a.py", "python-stdlib/pkg/__init__.py",
                                                 "python-stdlib/pkg/mod_b.py"}));
  EXPECT_EQ(corpus.train.size() + corpus.valid.size(), 20u * 8 + 1 + 374 + 3);  // + the trimmed HH dialogue
}

TEST(Corpus, SplitIsDeterministicForASeed) {
  const Corpus a = build_corpus(fake_data().options(7));
  const Corpus b = build_corpus(fake_data().options(7));
  EXPECT_EQ(ids_of(a.train), ids_of(b.train));
  EXPECT_EQ(ids_of(a.valid), ids_of(b.valid));
  const Corpus c = build_corpus(fake_data().options(8));
  EXPECT_NE(ids_of(a.train), ids_of(c.train));
  EXPECT_NE(ids_of(a.valid), ids_of(c.valid));
  expect_clean_split(c);
}

TEST(Corpus, RecordsAreConvertedAsDocumented) {
  CorpusOptions options = fake_data().options();
  options.math_instruction_fraction = 0.0;
  const Corpus corpus = build_corpus(options);
  const Record& gsm8k = find_record(corpus, "gsm8k-train/0");
  EXPECT_EQ(gsm8k.domain, Domain::kMath);
  EXPECT_EQ(gsm8k.messages, (std::vector<Message>{{"user", "Q0: how many apples?"},
                                                  {"assistant", "She has 2+3 = 5 apples.\nThe answer is $\\boxed{5}$."}}));
  EXPECT_EQ(find_record(corpus, "math-train/4").messages[1].content, "So $x=\\boxed{4}$.");
  EXPECT_EQ(find_record(corpus, "mbpp-train/601").messages,
            (std::vector<Message>{{"user", "Write f601.\nYour code should pass these tests:\n\nassert f601() == 601"},
                                  {"assistant", "```python\ndef f601():\n\treturn 601\n```"}}));
  EXPECT_EQ(find_record(corpus, "code-alpaca-2k/1").messages[0].content, "alpaca instruction 1\n\ninput 1");
  EXPECT_EQ(find_record(corpus, "code-alpaca-2k/2").messages[0].content, "alpaca instruction 2");
  EXPECT_EQ(find_record(corpus, "self-instruct-seed/seed_task_3").messages[1].content, "seed output 3");
  EXPECT_EQ(find_record(corpus, "hh-rlhf-harmless/5").messages,
            (std::vector<Message>{{"user", "question 5"}, {"assistant", "answer 5"}, {"user", "and then?"},
                                  {"assistant", "more 5"}}));
  // A trailing user turn is dropped; a dialogue with an empty turn is skipped.
  EXPECT_EQ(find_record(corpus, "hh-rlhf-harmless/20").messages.size(), 2u);
  std::map<std::string, SourceStats> stats;
  for (const SourceStats& s : corpus.sources) stats[s.name] = s;
  EXPECT_EQ(stats["hh-rlhf-harmless"].skipped, 1u);
  EXPECT_EQ(stats["gpteacher-codegen"].duplicates, 1u);
  EXPECT_EQ(stats["mbpp-train"].read, 374u);
  EXPECT_EQ(stats["mbpp-train"].excluded, 600u);  // tasks 1-600 are never converted
  EXPECT_GT(stats["python-stdlib"].skipped, 0u);  // big.py and latin1.py

  options.math_instruction_fraction = 1.0;
  const Corpus with_instruction = build_corpus(options);
  EXPECT_TRUE(find_record(with_instruction, "math-train/4").messages[0].content.ends_with(
      "\nPlease reason step by step, and put your final answer within \\boxed{}."));
}

TEST(Corpus, PythonBytesAreCapped) {
  CorpusOptions options = fake_data().options();
  options.python_stdlib_bytes = 30;  // room for one small file only
  Corpus corpus = build_corpus(options);
  size_t python_bytes = 0, python_records = 0;
  for (const auto* split : {&corpus.train, &corpus.valid}) {
    for (const Record& r : *split) {
      if (r.source == "python-stdlib") python_bytes += r.text.size(), ++python_records;
    }
  }
  EXPECT_LE(python_bytes, 30u);
  EXPECT_GE(python_records, 1u);
  options.python_stdlib_bytes = 0;
  corpus = build_corpus(options);
  for (const Record& r : corpus.train) EXPECT_NE(r.source, "python-stdlib");
}

TEST(Corpus, WrittenFilesReadBackWithStats) {
  const Corpus corpus = build_corpus(fake_data().options());
  TempDir out;
  write_corpus(corpus, out.path());
  const std::vector<Record> train = read_records(out / "train.jsonl");
  const std::vector<Record> valid = read_records(out / "valid.jsonl");
  ASSERT_EQ(train.size(), corpus.train.size());
  ASSERT_EQ(valid.size(), corpus.valid.size());
  for (size_t i = 0; i < train.size(); ++i) EXPECT_EQ(record_to_json(train[i]), record_to_json(corpus.train[i]));
  const json first = json::parse(test::read_text(out / "train.jsonl").substr(0, record_to_json(corpus.train[0]).size()));
  EXPECT_TRUE(first.contains("domain") && first.contains("source") && (first.contains("messages") || first.contains("text")));

  const json stats = json::parse(test::read_text(out / "stats.json"));
  EXPECT_EQ(stats["seed"], 7);
  EXPECT_EQ(stats["splits"]["valid"]["total"]["records"], corpus.valid.size());
  EXPECT_EQ(stats["splits"]["train"]["total"]["records"], corpus.train.size());
  for (const char* domain : {"math", "code", "chat"}) EXPECT_GT(stats["splits"]["valid"][domain]["records"], 0);
  EXPECT_EQ(stats["sources"].size(), kTrainSources.size());

  EXPECT_THROW(parse_record("{\"domain\":\"poetry\",\"source\":\"x\",\"text\":\"t\"}", "line 1"), Error);
  EXPECT_THROW(parse_record("{\"domain\":\"chat\",\"source\":\"x\"}", "line 1"), Error);
  EXPECT_THROW(parse_record("not json", "line 1"), Error);
}

TEST(Corpus, MissingOrMalformedDataIsAnError) {
  CorpusOptions options = fake_data().options();
  options.data_dir = fake_data().dir / "nowhere";
  EXPECT_THROW(build_corpus(options), Error);

  TempDir broken;
  fs::copy(fake_data().data(), broken / "data", fs::copy_options::recursive);
  write_file(broken / "data/math/math_train/train.jsonl", "{\"problem\": \"no solution\"}\n");
  options.data_dir = broken / "data";
  try {
    build_corpus(options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("math_train/train.jsonl:1"), std::string::npos) << e.what();
  }
}

TEST(Corpus, RenderingMatchesTheChatPromptAndMarksAssistantContent) {
  const Record chat{Domain::kChat, "t", "t/0", {{"user", "Hi"}, {"assistant", "Hello!"}, {"user", "Bye"}, {"assistant", "Ciao"}}, ""};
  const RenderedRecord r = render_record(chat);
  const std::string prompt = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
  EXPECT_EQ(prompt, tokenizer::render_chatml({{"user", "Hi"}}, {.add_generation_prompt = true, .enable_thinking = false}));
  EXPECT_EQ(r.text, prompt + "Hello!<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
                             "Ciao<|im_end|>\n");
  ASSERT_EQ(r.trained_spans.size(), 2u);
  auto span_text = [&](size_t i) {
    return r.text.substr(r.trained_spans[i].first, r.trained_spans[i].second - r.trained_spans[i].first);
  };
  EXPECT_EQ(span_text(0), "Hello!<|im_end|>");
  EXPECT_EQ(span_text(1), "Ciao<|im_end|>");

  Record raw;
  raw.domain = Domain::kCode;
  raw.source = "python-stdlib";
  raw.text = "x = 1\n";
  const RenderedRecord rr = render_record(raw);
  EXPECT_EQ(rr.text, "x = 1\n<|endoftext|>");
  EXPECT_EQ(rr.trained_spans, (std::vector<std::pair<size_t, size_t>>{{0, rr.text.size()}}));
}

// The real shared/data: the same guarantees, and every train file is read in full.
TEST(Corpus, RealDataSplitIsClean) {
  const fs::path data = test::shared_dir() / "data";
  if (!fs::is_directory(data)) GTEST_SKIP() << "no shared/data";
  CorpusOptions options;
  options.data_dir = data;
  options.python_stdlib_bytes = 0;
  const Corpus corpus = build_corpus(options);
  expect_clean_split(corpus);
  std::map<std::string, SourceStats> stats;
  for (const SourceStats& s : corpus.sources) stats[s.name] = s;
  EXPECT_EQ(stats["gsm8k-train"].read, 7473u);
  EXPECT_EQ(stats["math-train"].read, 4500u);
  EXPECT_EQ(stats["mbpp-train"].read, 374u);
  EXPECT_EQ(stats["mbpp-train"].excluded, 600u);
  EXPECT_EQ(stats["gpteacher-codegen"].read + stats["gpteacher-codegen"].skipped, 4535u);
  EXPECT_EQ(stats["self-instruct-seed"].read, 175u);
  EXPECT_GT(stats["hh-rlhf-harmless"].read, 2300u);
  size_t multi_turn = 0;
  for (const Record& r : corpus.train) multi_turn += r.messages.size() > 2;
  EXPECT_GT(multi_turn, 1000u);  // HH dialogues stay multi-turn
}

}  // namespace
}  // namespace dspark::train
