// Bad input to the CLI: each case exits non-zero (never a crash) with one line on stderr naming
// the file and the problem.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>

#include "expect_error.h"
#include "test_util.h"

namespace dspark {
namespace {

using test::fixture;
using test::run_dspark;

// A copy of the tied fixture that a test may damage.
struct DamagedModel {
  test::TempDir dir;
  std::filesystem::path model = dir / "model";
  DamagedModel() {
    std::filesystem::create_directories(model);
    for (const auto& entry : std::filesystem::directory_iterator(fixture("tiny-qwen3-tied")))
      if (entry.is_regular_file())
        std::filesystem::copy_file(entry.path(), model / entry.path().filename());
    std::filesystem::permissions(model / "config.json", std::filesystem::perms::owner_write,
                                 std::filesystem::perm_options::add);
    std::filesystem::permissions(model / "model.safetensors", std::filesystem::perms::owner_write,
                                 std::filesystem::perm_options::add);
  }
  nlohmann::json config() const { return nlohmann::json::parse(test::read_text(model / "config.json")); }
  void set_config(const nlohmann::json& j) const { test::write_text(model / "config.json", j.dump()); }
  test::CommandResult logits(const std::string& ids = "1,2,3") const {
    return run_dspark("logits --model " + model.string() + " --ids " + ids + " --out " + (dir / "out.f32").string());
  }
};

using test::expect_one_line_error;

TEST(BadInput, GoodModelWorks) {  // the control: the undamaged copy succeeds
  DamagedModel m;
  const auto r = m.logits();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::filesystem::file_size(m.dir / "out.f32"), 3u * 512 * 4);
}

// The global --device: a device name it does not know, and CUDA asked of a CPU-only libtorch (the
// suite's), each give one line naming the flag; --device cpu is the default's twin.
TEST(BadInput, UnknownDevice) {
  if (test::test_device_name() != "cpu") GTEST_SKIP() << "run_dspark already passes --device";
  DamagedModel m;
  expect_one_line_error(run_dspark("--device tpu logits --model " + m.model.string() + " --ids 1 --out " +
                                   (m.dir / "o").string()),
                        {"--device", "'tpu'"});
}

TEST(BadInput, CudaDeviceWithoutCuda) {
  if (test::test_device_name() != "cpu" || torch::cuda::is_available()) GTEST_SKIP() << "this libtorch has CUDA";
  DamagedModel m;
  expect_one_line_error(run_dspark("--device cuda logits --model " + m.model.string() + " --ids 1 --out " +
                                   (m.dir / "o").string()),
                        {"--device cuda", "no usable CUDA"});
}

TEST(BadInput, CpuDeviceWorks) {
  if (test::test_device_name() != "cpu") GTEST_SKIP() << "run_dspark already passes --device";
  DamagedModel m;
  const auto r = run_dspark("--device cpu logits --model " + m.model.string() + " --ids 1,2 --out " +
                            (m.dir / "out.f32").string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::filesystem::file_size(m.dir / "out.f32"), 2u * 512 * 4);
}

// --dtype: a value it does not know is one line naming the flag and the value; f16 (a conversion
// on load) is the control.
TEST(BadInput, UnknownDtype) {
  DamagedModel m;
  expect_one_line_error(run_dspark("logits --model " + m.model.string() + " --ids 1 --dtype f8 --out " +
                                   (m.dir / "o").string()),
                        {"--dtype", "'f8'", "auto, f16, bf16, f32, q8_0 or q4_0"});
  const auto r = run_dspark("logits --model " + m.model.string() + " --ids 1,2 --dtype f16 --out " +
                            (m.dir / "out.f32").string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(std::filesystem::file_size(m.dir / "out.f32"), 2u * 512 * 4);
}

// --draft-dtype: the same one line for a value it does not know; q4_0 (the drafter quantized at
// load, beside the target's bf16) is the control.
TEST(BadInput, UnknownDraftDtype) {
  const std::filesystem::path models = std::filesystem::path(DSPARK_SOURCE_DIR) / "models";
  const std::string args = "generate --model " + (models / "tiny-target-8l").string() + " --draft " +
                           (models / "tiny-target-8l-dspark").string() +
                           " --prompt-ids 1,2,3 --max-tokens 8 --temperature 0 --schedule fixed --draft-dtype ";
  expect_one_line_error(run_dspark(args + "q5"), {"--draft-dtype", "'q5'", "auto, f16, bf16, f32, q8_0 or q4_0"});
  const auto r = run_dspark(args + "q4_0 --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"num_drafts\""), std::string::npos) << r.out;
}

TEST(BadInput, MissingModelDirectory) {
  test::TempDir dir;
  expect_one_line_error(run_dspark("logits --model " + (dir / "nope").string() + " --ids 1 --out " +
                                   (dir / "o").string()),
                        {(dir / "nope").string()});
}

TEST(BadInput, MissingSafetensors) {
  DamagedModel m;
  std::filesystem::remove(m.model / "model.safetensors");
  expect_one_line_error(m.logits(), {m.model.string(), "safetensors"});
}

TEST(BadInput, TruncatedSafetensors) {
  DamagedModel m;
  std::filesystem::resize_file(m.model / "model.safetensors", std::filesystem::file_size(m.model / "model.safetensors") / 2);
  expect_one_line_error(m.logits(), {"model.safetensors"});
}

TEST(BadInput, HeaderLiesAboutSizes) {
  DamagedModel m;
  // A well-formed file whose header claims 64 bytes for a [4, 4] F32 tensor but holds only 32.
  std::string header = R"({"model.embed_tokens.weight":{"dtype":"F32","shape":[4,4],"data_offsets":[0,64]}})";
  while (header.size() % 8) header += ' ';
  std::string file(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  file += header + std::string(32, '\0');
  test::write_text(m.model / "model.safetensors", file);
  expect_one_line_error(m.logits(), {"model.safetensors", "model.embed_tokens.weight"});
}

// `model quantize --out` naming a file of the checkpoint it reads once truncated that file while
// it was mapped (SIGBUS, and the checkpoint was lost): refused, the file untouched.
TEST(BadInput, QuantizeOverItsOwnCheckpointIsRefused) {
  DamagedModel m;
  const std::string before = test::read_text(m.model / "model.safetensors");
  expect_one_line_error(run_dspark("model quantize --model " + m.model.string() + " --type q8_0 --out " +
                                   (m.model / "model.safetensors").string()),
                        {"--out", "model.safetensors", "checkpoint being read"});
  EXPECT_EQ(test::read_text(m.model / "model.safetensors"), before);
}

// Weights that are all NaN (0xFF bytes after the header) load, and greedy decoding then has no
// argmax: one line naming the problem, where it once printed token 0 again and again.
TEST(BadInput, NanWeightsAreAnErrorNotText) {
  DamagedModel m;
  std::string file = test::read_text(m.model / "model.safetensors");
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, file.data(), 8);
  std::fill(file.begin() + 8 + static_cast<std::ptrdiff_t>(header_bytes), file.end(), '\xff');
  test::write_text(m.model / "model.safetensors", file);
  expect_one_line_error(run_dspark("generate --model " + m.model.string() + " --prompt-ids 1,2 --max-tokens 4 --temperature 0"),
                        {"argmax", "NaN"});
}

TEST(BadInput, WrongTensorShape) {
  DamagedModel m;
  auto config = m.config();
  config["intermediate_size"] = 96;  // weights are [128, 64]
  m.set_config(config);
  expect_one_line_error(m.logits(), {"model.safetensors", "mlp.gate_proj.weight", "shape"});
}

TEST(BadInput, MissingConfigKey) {
  DamagedModel m;
  auto config = m.config();
  config.erase("hidden_size");
  m.set_config(config);
  expect_one_line_error(m.logits(), {"config.json", "hidden_size"});
}

TEST(BadInput, InvalidJson) {
  DamagedModel m;
  test::write_text(m.model / "config.json", "{\"vocab_size\": 512,");
  expect_one_line_error(m.logits(), {"config.json"});
}

TEST(BadInput, TokenIdOutOfRange) {
  DamagedModel m;
  expect_one_line_error(m.logits("1,512"), {"512", "out of range"});
}

TEST(BadInput, NonNumericTokenId) {
  DamagedModel m;
  expect_one_line_error(m.logits("1,x"), {"--ids", "'x'"});
}

TEST(BadInput, BadSamplingParameter) {
  DamagedModel m;
  expect_one_line_error(run_dspark("generate --model " + m.model.string() + " --prompt-ids 1,2 --top-p 0"),
                        {"top_p"});
}

TEST(BadInput, NegativeTemperature) {
  DamagedModel m;
  expect_one_line_error(run_dspark("generate --model " + m.model.string() + " --prompt-ids 1,2 --temperature -1"),
                        {"temperature", "-1"});
}

// The shipped model was trained on 4096 positions: a request that would run past them is refused
// before any work, naming both numbers.
TEST(BadInput, RequestBeyondTheModelsContext) {
  const std::string model = std::string(DSPARK_SOURCE_DIR) + "/models/tiny-target-8l";
  expect_one_line_error(run_dspark("generate --model " + model + " --prompt-ids 1,2 --max-tokens 5000 --ignore-eos"),
                        {"5002", "4096"});
  expect_one_line_error(run_dspark("generate --model " + model + " --prompt-ids 1,2 --max-tokens 200 --max-context 100"),
                        {"202", "100"});
  expect_one_line_error(run_dspark("generate --model " + model + " --prompt-ids 1,2 --max-context 9000"),
                        {"9000", "max_position_embeddings"});
}

// Mistakes CLI11 catches (an unknown option, an unparsable number, a value out of range) and an
// unknown command: one line and exit 1 like every other error, not CLI11's codes 105-114.
TEST(BadInput, ParseErrorsExitOneWithOneLine) {
  const std::string model = std::string(DSPARK_SOURCE_DIR) + "/models/tiny-target-8l";
  expect_one_line_error(run_dspark("bogus"), {"unknown command 'bogus'", "generate"});
  expect_one_line_error(run_dspark("generate --model " + model + " --bogus"), {"--bogus"});
  expect_one_line_error(run_dspark("generate --model " + model + " --prompt-ids 1 --max-tokens abc"),
                        {"--max-tokens", "abc"});
  expect_one_line_error(run_dspark("serve --port 99999"), {"--port", "99999"});
  expect_one_line_error(run_dspark("--threads -1 generate --model " + model + " --prompt-ids 1"), {"--threads"});
}

// Values that passed a check they should have failed, or failed with another command's message.
TEST(BadInput, PromptGammaThresholdAndFileMistakes) {
  test::TempDir dir;
  const std::string model = std::string(DSPARK_SOURCE_DIR) + "/models/tiny-target-8l";
  const std::string generate = "generate --model " + model + " --max-tokens 2 ";
  expect_one_line_error(run_dspark(generate + "--prompt ''"), {"--prompt is empty"});
  expect_one_line_error(run_dspark(generate + "--chat --prompt-ids 1,2"), {"--chat", "--prompt-ids"});
  expect_one_line_error(run_dspark(generate + "--prompt hi --draft " + model + "-dspark --gamma -1"), {"--gamma", "-1"});
  expect_one_line_error(run_dspark(generate + "--prompt hi --draft " + model + "-eagle3 --gamma 100"),
                        {"--gamma 100", "at most 64"});
  expect_one_line_error(run_dspark(generate + "--prompt hi --draft " + model + "-dspark --confidence-threshold nan"),
                        {"confidence threshold"});
  expect_one_line_error(run_dspark("tokenize --tokenizer " + model + " --jsonl " + dir.str()), {"--jsonl", "directory"});
  std::string ids = "1";
  for (int i = 1; i < 4097; ++i) ids += ",1";
  expect_one_line_error(run_dspark("logits --model " + model + " --ids " + ids + " --out " + dir.file("l.f32")),
                        {"4097", "max_position_embeddings"});
  const std::string gguf = test::fixture("gguf-tiny/untied-q8_0.gguf").string();
  expect_one_line_error(run_dspark("model quantize --model " + gguf + " --type q4_0 --out " + dir.file("q.gguf")),
                        {"untied-q8_0.gguf", "not quantized again"});
  expect_one_line_error(run_dspark(generate + "--prompt hi --draft " + model + "-dspark --method dsprak"),
                        {"'dsprak'", "ngram"});
  expect_one_line_error(run_dspark("bench dtypes --model " + model + " --dtypes q9"), {"--dtypes", "'q9'"});
  // A trailing comma once dropped silently (getline), -1 wrapped to 2^64 - 1, and ngram ignored
  // the drafter it was given.
  expect_one_line_error(run_dspark(generate + "--prompt-ids 1,2,"), {"--prompt-ids", "''"});
  expect_one_line_error(run_dspark(generate + "--prompt hi --temperature 1 --seed -1"), {"--seed", ">= 0"});
  expect_one_line_error(run_dspark(generate + "--prompt hi --method ngram --draft " + model + "-dspark"),
                        {"ngram", "no --draft"});
  // A drafter whose block outgrows the target's context is refused at load (sizing buffers for a
  // block of 10 million once took all the machine's memory).
  const std::filesystem::path drafter = dir / "big-block";
  std::filesystem::create_directories(drafter);
  for (const auto& entry : std::filesystem::directory_iterator(model + "-dspark"))
    if (entry.is_regular_file()) std::filesystem::copy_file(entry.path(), drafter / entry.path().filename());
  nlohmann::json config = nlohmann::json::parse(test::read_text(drafter / "config.json"));
  config["block_size"] = 10000000;
  std::filesystem::permissions(drafter / "config.json", std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
  test::write_text(drafter / "config.json", config.dump());
  expect_one_line_error(run_dspark(generate + "--prompt hi --draft " + drafter.string()),
                        {"config.json", "block_size 10000000", "max_position_embeddings"});
  // A gamma beyond the block: calibrate wrote an sts.json the drafter then refused to load with,
  // and bench accept ran the block while reporting the larger gamma.
  test::write_text(dir / "prompts.jsonl", "{\"turns\": [\"What is 2 + 2?\"]}\n");
  const std::string prompts = dir.file("prompts.jsonl");
  expect_one_line_error(run_dspark("calibrate --target " + model + " --draft " + model + "-dspark --prompts " + prompts +
                                   " --dry-run --gamma 9"),
                        {"--gamma 9", "block size 7"});
  expect_one_line_error(run_dspark("bench accept --target " + model + " --draft " + model + "-dspark --prompts " + prompts +
                                   " --gamma 12"),
                        {"--gamma 12", "block size 7"});
  // A confidence cut with a drafter that has no confidences was ignored in silence.
  expect_one_line_error(run_dspark(generate + "--prompt hi --draft " + model + "-dflash --confidence-threshold 0.5"),
                        {"--confidence-threshold", "dflash drafter has none"});
  expect_one_line_error(run_dspark("draft --target " + model + " --prompt hi"), {"--draft DIR", "--method ngram"});
  // A file that is not a profile: said so, not the JSON library's "key 'format' not found".
  test::write_text(dir / "empty.json", "{}");
  expect_one_line_error(run_dspark(generate + "--prompt hi --draft " + model + "-dspark --schedule dspark-sync --sps " +
                                   dir.file("empty.json")),
                        {"empty.json", "not a dspark step-cost profile"});
  // Outputs written at the end of a long run are checked before it.
  expect_one_line_error(run_dspark("profile --model " + model + " --out " + dir.str()), {"--out", "is a directory"});
  expect_one_line_error(run_dspark("bench accept --target " + model + " --draft " + model + "-dspark --prompts x --json-out " +
                                   dir.file("missing/a.json")),
                        {"--json-out", "no directory"});
}

// Numeric options are checked where they are parsed: a zero batch size once crashed bench forward
// (a segfault), a zero window eval loss (a floating-point exception), and a huge request count ran
// profile out of memory.
TEST(BadInput, NumericOptionsAreCheckedBeforeAnyWork) {
  const std::string model = std::string(DSPARK_SOURCE_DIR) + "/models/tiny-target-8l";
  expect_one_line_error(run_dspark("bench forward --model " + model + " --contexts 32 --batch-sizes 0"),
                        {"--batch-sizes", "must be in [1, 4096]", "got 0"});
  expect_one_line_error(run_dspark("eval loss --model " + model + " --corpus x --seq-len 0"), {"--seq-len", ">= 2"});
  expect_one_line_error(run_dspark("profile --model " + model + " --max-requests 100000"), {"--max-requests"});
  expect_one_line_error(run_dspark("train drafter --method dspark --data " + model + "/config.json --out y --lr nan"),
                        {"--lr", "nan"});
  expect_one_line_error(run_dspark("bench forward --model " + model + " --contexts 5000 --batch-sizes 1"),
                        {"5001 positions", "max_position_embeddings"});
  // regenerate appends to --out: a context the model cannot hold once left an empty file behind.
  test::TempDir dir;
  expect_one_line_error(run_dspark("data regenerate --target " + model + " --corpus " + dir.str() + " --out " +
                                   dir.file("out.jsonl") + " --max-length 10000"),
                        {"--max-length", "max_position_embeddings"});
  EXPECT_FALSE(std::filesystem::exists(dir / "out.jsonl"));
}

}  // namespace
}  // namespace dspark
