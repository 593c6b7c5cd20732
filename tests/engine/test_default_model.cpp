// The shipped default model (models/default): it loads, answers a chat prompt, and speculative
// greedy decoding with every drafter reproduces its autoregressive greedy output on 20 prompts
// of the evaluation sets (7 math, 7 code, 6 chat; first turn, chat template, non-thinking), and
// its DSpark drafter quantized to q8_0 accepts what its bf16 checkpoint accepts.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "draft/draft_init.h"
#include "draft/load_drafter.h"
#include "engine/generate.h"
#include "model/config.h"
#include "test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace dspark {
namespace {

const std::filesystem::path kModel = std::filesystem::path(DSPARK_SOURCE_DIR) / "models/default";

std::vector<std::string> first_turns(const std::filesystem::path& file, size_t n) {
  std::ifstream in(file);
  std::vector<std::string> turns;
  for (std::string line; turns.size() < n && std::getline(in, line);)
    turns.push_back(nlohmann::json::parse(line)["turns"][0].get<std::string>());
  return turns;
}

std::vector<std::vector<int64_t>> eval_prompts() {
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(kModel);
  const tokenizer::ChatTemplate chat = tokenizer::ChatTemplate::load(kModel);
  std::vector<std::string> texts = first_turns(test::shared_dir() / "data/eval/gsm8k.jsonl", 7);
  for (auto& t : first_turns(test::shared_dir() / "data/eval/humaneval.jsonl", 7)) texts.push_back(t);
  for (auto& t : first_turns(test::shared_dir() / "data/chat/vicuna_bench/question.jsonl", 6)) texts.push_back(t);
  std::vector<std::vector<int64_t>> prompts;
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = tok.encode(chat.render({{"user", text}}, {.add_generation_prompt = true, .enable_thinking = false}));
    prompts.emplace_back(ids.begin(), ids.end());
  }
  return prompts;
}

TEST(DefaultModel, AnswersAChatPrompt) {
  const test::CommandResult r = test::run_dspark("generate --chat --prompt \"What is 2 plus 3?\" --max-tokens 24 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out);
  EXPECT_GT(out["stats"]["generated_tokens"].get<int64_t>(), 0);
  EXPECT_FALSE(out["text"].get<std::string>().empty());
}

TEST(DefaultModel, SpeculativeGreedyEqualsAutoregressiveOnTwentyPrompts) {
  torch::NoGradGuard no_grad;
  model::Transformer target = model::Transformer::load(kModel.string());  // --dtype auto
  ASSERT_EQ(target.weight_dtype(), model::WeightDType::kBF16);  // as shipped
  const model::GenerationConfig generation = model::GenerationConfig::load_or_default(kModel.string(), target.config());
  test::TempDir dir;
  std::vector<std::unique_ptr<draft::Drafter>> drafters;
  for (const std::string method : {"dspark", "dflash", "eagle3"}) {
    const std::string out = (dir / method).string();
    draft::DrafterInitOptions init;
    init.method = draft::parse_method(method);
    draft::write_random_drafter(target, draft::make_draft_config(target.config(), init), out, 5);
    drafters.push_back(draft::load_drafter(method, out, target, {.max_slots = 1, .capacity = 1024}));
  }
  drafters.push_back(draft::load_drafter("ngram", "", target, {.max_slots = 1, .capacity = 1024}));
  const auto prompts = eval_prompts();
  ASSERT_EQ(prompts.size(), 20u);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int64_t> ar = test::greedy(target, prompts[i], 24, generation.eos_token_ids);
    for (auto& drafter : drafters)
      EXPECT_EQ(test::generate(target, drafter.get(), prompts[i], {.temperature = 0}, 24, {.gamma = 7},
                               generation.eos_token_ids)
                    .ids,
                ar)
          << drafter->method() << " prompt " << i;
  }
}

// The shipped DSpark drafter loaded as q8_0 (--draft-dtype q8_0) drafts nearly what its bf16
// checkpoint drafts: 20 prompts x 48 greedy tokens at gamma 7, every draft verified; its accepted
// drafts must be at least 95% of the bf16 drafter's (a broken quantization, e.g. wrong k/v rows
// of the context projection, accepts next to nothing), and the output is the target's either way.
TEST(DefaultModel, Q8_0DrafterAcceptsAsItsBf16Checkpoint) {
  torch::NoGradGuard no_grad;
  model::Transformer target = model::Transformer::load(kModel.string());
  const model::GenerationConfig generation = model::GenerationConfig::load_or_default(kModel.string(), target.config());
  const std::filesystem::path drafter_dir =
      kModel.parent_path() / (std::filesystem::canonical(kModel).filename().string() + "-dspark");
  auto bf16 = draft::load_drafter("dspark", drafter_dir.string(), target, {.max_slots = 1, .capacity = 1024});
  auto q8 = draft::load_drafter("dspark", drafter_dir.string(), target,
                                {.max_slots = 1, .capacity = 1024, .weight_dtype = model::WeightDType::kQ8_0});
  int64_t accepted_bf16 = 0, accepted_q8 = 0;
  for (const auto& prompt : eval_prompts()) {
    const std::vector<int64_t> ar = test::greedy(target, prompt, 48, generation.eos_token_ids);
    for (auto [drafter, accepted] : {std::pair{bf16.get(), &accepted_bf16}, {q8.get(), &accepted_q8}}) {
      const engine::RequestOutcome out =
          test::generate(target, drafter, prompt, {.temperature = 0}, 48, {.gamma = 7}, generation.eos_token_ids);
      EXPECT_EQ(out.ids, ar);
      *accepted += out.stats.num_accepted_tokens;
    }
  }
  EXPECT_GT(accepted_bf16, 200);  // the trained drafter: about 2 of 7 drafts accepted per step or more
  EXPECT_GE(accepted_q8, 0.95 * static_cast<double>(accepted_bf16)) << "bf16 " << accepted_bf16 << ", q8_0 " << accepted_q8;
}

}  // namespace
}  // namespace dspark
