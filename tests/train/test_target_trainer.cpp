// Target pretraining: the trained-token mask, that a few steps lower the loss, and that resuming
// from a checkpoint reproduces the uninterrupted run bit for bit.
#include <gtest/gtest.h>

#include <fstream>

#include <ATen/autocast_mode.h>

#include "common/error.h"
#include "model/config.h"
#include "expect_error.h"
#include "test_util.h"
#include "train/target_trainer.h"
#include "train/token_dataset.h"

namespace dspark {
namespace {

namespace fs = std::filesystem;
const fs::path kTokenizer = test::fixture("tiny-qwen3-tied");

train::Record chat_record(const std::string& user, const std::string& assistant, const std::string& id) {
  train::Record r;
  r.domain = train::Domain::kChat;
  r.source = "test";
  r.id = id;
  r.messages = {{"user", user}, {"assistant", assistant}};
  return r;
}

// A small corpus directory: repetitive English so a tiny model learns something in a few steps.
void write_corpus(const fs::path& dir) {
  fs::create_directories(dir);
  std::ofstream train(dir / "train.jsonl"), valid(dir / "valid.jsonl");
  const std::vector<std::string> words = {"the cat sat on the mat", "a dog ran in the park", "we like to read books"};
  for (int i = 0; i < 60; ++i)
    train << train::record_to_json(chat_record("say something " + std::to_string(i % 5), words[i % 3] + " and " + words[(i + 1) % 3], "t/" + std::to_string(i))) << "\n";
  for (int i = 0; i < 6; ++i)
    valid << train::record_to_json(chat_record("say something " + std::to_string(i), words[i % 3] + " and " + words[(i + 2) % 3], "v/" + std::to_string(i))) << "\n";
}

fs::path write_config(const fs::path& dir) {
  nlohmann::json j = {{"architectures", {"Qwen3ForCausalLM"}}, {"model_type", "qwen3"}, {"vocab_size", 512},
                      {"hidden_size", 32}, {"intermediate_size", 64}, {"num_hidden_layers", 2},
                      {"num_attention_heads", 2}, {"num_key_value_heads", 1}, {"head_dim", 16},
                      {"rms_norm_eps", 1e-6}, {"rope_theta", 10000.0}, {"max_position_embeddings", 512},
                      {"tie_word_embeddings", true}, {"eos_token_id", 458}, {"torch_dtype", "bfloat16"}};
  test::write_text(dir / "config.json", j.dump());
  return dir / "config.json";
}

train::TargetTrainOptions options_for(const test::TempDir& dir, const std::string& run) {
  train::TargetTrainOptions o;
  o.model_config = dir / "config.json";
  o.corpus_dir = dir / "corpus";
  o.tokenizer_dir = kTokenizer;
  o.out_dir = dir / run;
  o.seq_len = 32;
  o.batch_size = 4;
  o.epochs = 20;
  o.peak_lr = 1e-2;
  o.min_lr = 1e-3;
  o.warmup_steps = 2;
  o.save_every = 4;
  o.eval_every = 0;
  o.keep_checkpoints = 10;
  return o;
}

TEST(TokenStream, OnlyAssistantContentAndItsEndAreTrained) {
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(kTokenizer);
  train::TokenStream stream;
  stream.append(tok, chat_record("hi", "hello there", "x"));
  std::vector<int32_t> trained;
  for (size_t i = 0; i < stream.ids.size(); ++i)
    if (stream.trained[i]) trained.push_back(stream.ids[i]);
  std::vector<int32_t> expected = tok.encode("hello there<|im_end|>");
  EXPECT_EQ(trained, expected);
  EXPECT_EQ(tok.decode(std::vector<int32_t>(stream.ids.begin(), stream.ids.end())),
            train::render_record(chat_record("hi", "hello there", "x")).text);
}

TEST(WindowSchedule, EachEpochVisitsEveryWindowOnce) {
  train::WindowSchedule schedule(10, 3);
  std::vector<int> seen(10);
  for (int64_t step = 0; step < 5; ++step)  // 5 steps of 2 = one epoch
    for (int64_t w : schedule.windows_of_step(step, 2)) ++seen[w];
  for (int count : seen) EXPECT_EQ(count, 1);
  EXPECT_NE(schedule.windows_of_step(0, 10), schedule.windows_of_step(1, 10));  // epochs reshuffle
}

TEST(TargetTrainer, FewStepsLowerTheValidationLoss) {
  torch::manual_seed(0);
  test::TempDir dir;
  write_corpus(dir / "corpus");
  write_config(dir.path());
  train::TargetTrainOptions o = options_for(dir, "run");
  o.max_steps = 12;
  const train::TargetTrainResult r = train::train_target(o);
  EXPECT_EQ(r.steps, 12);
  const auto before = train::evaluate_target(dir / "run/checkpoints/step-000000", o.corpus_dir, kTokenizer, 32, 0);
  const auto after = train::evaluate_target(dir / "run/checkpoints/step-000012", o.corpus_dir, kTokenizer, 32, 0);
  ASSERT_TRUE(before.count("chat") && after.count("chat"));
  std::printf("validation loss: %.4f -> %.4f\n", before.at("chat"), after.at("chat"));
  EXPECT_LT(after.at("chat"), before.at("chat") - 0.5);  // ln(512) = 6.2 at the start
  // The same checkpoint evaluated quantized runs the quantized kernels (activations quantized as in
  // decoding): the loss moves, within the quality goals (q8_0 +0.5%, q4_0 +5%; measured on
  // this model: +0.02% and +0.08%), where a wrong kernel would move it by far more.
  const fs::path trained = dir / "run/checkpoints/step-000012";
  const double q8 = train::evaluate_target(trained, o.corpus_dir, kTokenizer, 32, 0, model::WeightDType::kQ8_0).at("chat");
  const double q4 = train::evaluate_target(trained, o.corpus_dir, kTokenizer, 32, 0, model::WeightDType::kQ4_0).at("chat");
  std::printf("validation loss: f32 %.5f, q8_0 %.5f, q4_0 %.5f\n", after.at("chat"), q8, q4);
  EXPECT_NE(q4, after.at("chat"));
  EXPECT_NEAR(q8, after.at("chat"), 0.005 * after.at("chat"));
  EXPECT_NEAR(q4, after.at("chat"), 0.05 * after.at("chat"));
}

// eval loss takes a GGUF file as every other command does, tokenizer included (it looked for
// FILE.gguf/tokenizer.json): llama.cpp's f32 file of the untied fixture scores the corpus as the
// Hugging Face checkpoint it was converted from does.
TEST(EvaluateTarget, AGgufFileScoresAsItsCheckpoint) {
  test::TempDir dir;
  write_corpus(dir / "corpus");
  const fs::path hf = test::fixture("tiny-qwen3-untied"), gguf = test::fixture("gguf-tiny") / "untied-f32.gguf";
  const auto from_hf = train::evaluate_target(hf, dir / "corpus", hf, 32, 0);
  const auto from_gguf = train::evaluate_target(gguf, dir / "corpus", gguf, 32, 0);
  ASSERT_TRUE(from_hf.count("chat") && from_gguf.count("chat"));
  EXPECT_NEAR(from_gguf.at("chat"), from_hf.at("chat"), 1e-4);
}

// bf16 autocast trains like f32: the same 12 steps lower the validation loss by as much as the f32
// run's, to within 10% of its drop (the 20-layer target's 50-step runs agree to 4 digits:
// docs/training.md; on this 12-step toy the runs diverge more: the bf16 run ended within 2% of f32's
// on an AMD Zen 5 and 4.3% below it on a Zen 2, a drop 4% larger), yet the runs differ (the products
// did run in bf16), and autocast is off again once training returns.
TEST(TargetTrainer, Bf16AutocastTrainsLikeF32) {
  test::TempDir dir;
  write_corpus(dir / "corpus");
  write_config(dir.path());
  train::TargetTrainOptions f32 = options_for(dir, "f32");
  f32.max_steps = 12;
  train::TargetTrainOptions bf16 = options_for(dir, "bf16");
  bf16.max_steps = 12;
  bf16.bf16_autocast = true;
  const train::TargetTrainResult a = train::train_target(f32);
  const train::TargetTrainResult b = train::train_target(bf16);
  EXPECT_FALSE(at::autocast::is_cpu_enabled());
  const double before =
      train::evaluate_target(dir / "f32/checkpoints/step-000000", f32.corpus_dir, kTokenizer, 32, 0).at("chat");
  std::printf("validation loss: start %.4f, f32 %.4f, bf16 autocast %.4f\n", before, a.valid_loss.at("chat"),
              b.valid_loss.at("chat"));
  EXPECT_LT(b.valid_loss.at("chat"), before - 0.5);
  const double f32_drop = before - a.valid_loss.at("chat"), bf16_drop = before - b.valid_loss.at("chat");
  EXPECT_NEAR(bf16_drop, f32_drop, 0.1 * f32_drop);
  EXPECT_NE(test::read_text(dir / "f32/checkpoints/step-000012/model.safetensors"),
            test::read_text(dir / "bf16/checkpoints/step-000012/model.safetensors"));
}

class TargetTrainerResume : public ::testing::TestWithParam<bool> {};

TEST_P(TargetTrainerResume, ReproducesTheNextStepsBitForBit) {
  test::TempDir dir;
  write_corpus(dir / "corpus");
  write_config(dir.path());
  train::TargetTrainOptions straight = options_for(dir, "straight");
  straight.max_steps = 8;
  straight.bf16_autocast = GetParam();
  train::train_target(straight);

  train::TargetTrainOptions split = options_for(dir, "split");
  split.bf16_autocast = GetParam();
  split.max_steps = 4;
  train::train_target(split);  // stops after the step-4 checkpoint
  split.max_steps = 8;
  train::train_target(split);  // resumes from it

  for (const char* file : {"model.safetensors", "optimizer.safetensors", "trainer_state.json"}) {
    const std::string a = test::read_text(dir / "straight/checkpoints/step-000008" / file);
    const std::string b = test::read_text(dir / "split/checkpoints/step-000008" / file);
    EXPECT_FALSE(a.empty());
    EXPECT_TRUE(a == b) << file << " differs after resuming";
  }
}

INSTANTIATE_TEST_SUITE_P(Precision, TargetTrainerResume, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Bf16Autocast" : "F32"; });

TEST(TargetTrainer, ResumingWithOtherOptionsIsAnError) {
  test::TempDir dir;
  write_corpus(dir / "corpus");
  write_config(dir.path());
  train::TargetTrainOptions o = options_for(dir, "run");
  o.max_steps = 4;
  train::train_target(o);
  o.max_steps = 8;
  train::TargetTrainOptions other_batch = o;
  other_batch.batch_size = 8;
  test::expect_error([&] { train::train_target(other_batch); }, {"batch_size"});
  // A model of another shape: the checkpoint's would have kept training under the new --config.
  nlohmann::json deeper = nlohmann::json::parse(test::read_text(dir / "config.json"));
  deeper["num_hidden_layers"] = 3;
  test::write_text(dir / "deeper.json", deeper.dump());
  train::TargetTrainOptions other_shape = o;
  other_shape.model_config = dir / "deeper.json";
  test::expect_error([&] { train::train_target(other_shape); }, {"another shape", "deeper.json"});
  // A window longer than the model's positions is refused before any work.
  train::TargetTrainOptions too_long = o;
  too_long.seq_len = 513;
  test::expect_error([&] { train::train_target(too_long); }, {"--seq-len", "513", "max_position_embeddings"});
  // A damaged trainer state names its file.
  test::write_text(dir / "run/checkpoints/step-000004/trainer_state.json", "[]");
  test::expect_error([&] { train::train_target(o); }, {"trainer_state.json", "not a trainer state"});
}

}  // namespace
}  // namespace dspark
