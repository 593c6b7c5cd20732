// Target pretraining: the trained-token mask, that a few steps lower the loss, and that resuming
// from a checkpoint reproduces the uninterrupted run bit for bit.
#include <gtest/gtest.h>

#include <fstream>

#include "common/error.h"
#include "model/config.h"
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
}

TEST(TargetTrainer, ResumeReproducesTheNextStepsBitForBit) {
  test::TempDir dir;
  write_corpus(dir / "corpus");
  write_config(dir.path());
  train::TargetTrainOptions straight = options_for(dir, "straight");
  straight.max_steps = 8;
  train::train_target(straight);

  train::TargetTrainOptions split = options_for(dir, "split");
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

TEST(TargetTrainer, ResumingWithOtherOptionsIsAnError) {
  test::TempDir dir;
  write_corpus(dir / "corpus");
  write_config(dir.path());
  train::TargetTrainOptions o = options_for(dir, "run");
  o.max_steps = 4;
  train::train_target(o);
  o.batch_size = 8;
  o.max_steps = 8;
  try {
    train::train_target(o);
    FAIL() << "resumed with another batch size";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch_size"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dspark
