// Drafter training: anchor sampling, the label and attention masks, the loss against hand-computed
// values, agreement of the training forward with the inference drafter, and a short run that
// lowers the validation loss and resumes bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "draft/draft_init.h"
#include "draft/dspark_drafter.h"
#include "draft/eagle3_drafter.h"
#include "engine/generate.h"
#include "sampling/sampling.h"
#include "expect_error.h"
#include "test_util.h"
#include "train/anchors.h"
#include "train/drafter_trainer.h"
#include "train/dspark_loss.h"
#include "train/dspark_train_model.h"
#include "train/eagle3_loss.h"
#include "train/eagle3_train_model.h"

namespace dspark {
namespace {

namespace fs = std::filesystem;
const fs::path kTarget = test::fixture("tiny-qwen3-tied");

TEST(Anchors, CandidatesAreAnswerTokensFollowedByAnswerTokens) {
  const std::vector<uint8_t> mask = {0, 0, 1, 1, 1, 0, 1, 1, 0};
  sampling::Rng rng(1);
  EXPECT_EQ(train::sample_anchors(mask, 100, rng), (std::vector<int64_t>{2, 3, 6}));
  for (int trial = 0; trial < 20; ++trial) {
    const std::vector<int64_t> two = train::sample_anchors(mask, 2, rng);
    ASSERT_EQ(two.size(), 2u);
    EXPECT_LT(two[0], two[1]);
    for (int64_t a : two) EXPECT_TRUE(a == 2 || a == 3 || a == 6);
  }
}

// n = 30000 single draws from 3 candidates; chi-square with 2 degrees of freedom against uniform
// must stay below 18.4 (p = 1e-4). Seeded, so the outcome is fixed; a sampler favouring one
// candidate by 5% gives a statistic near 80.
TEST(Anchors, DrawIsUniform) {
  const std::vector<uint8_t> mask = {1, 1, 1, 1};
  sampling::Rng rng(7);
  std::array<double, 3> counts{};
  const int n = 30000;
  for (int i = 0; i < n; ++i) counts[train::sample_anchors(mask, 1, rng)[0]] += 1;
  double chi2 = 0;
  for (double c : counts) chi2 += (c - n / 3.0) * (c - n / 3.0) / (n / 3.0);
  EXPECT_LT(chi2, 18.4);
}

TEST(Anchors, LabelMaskStopsAtTheFirstLabelOutsideAnAnswer) {
  const std::vector<uint8_t> mask = {1, 1, 1, 0, 1, 1};
  const std::vector<float> m = train::block_label_mask(std::vector<int64_t>{0, 4}, mask, 3);
  // Block at 0: labels at 1, 2 valid, 3 not (and nothing after). Block at 4: label 5 valid, 6 past the end.
  EXPECT_EQ(m, (std::vector<float>{1, 1, 0, 1, 0, 0}));
}

// One block of two slots over a vocabulary of two, every term computed by hand.
TEST(DSparkLoss, MatchesHandComputedTerms) {
  const torch::Tensor z = torch::tensor({0.0f, 1.0f, 2.0f, 0.0f}).view({1, 2, 2});
  const torch::Tensor t = torch::tensor({0.0f, 0.0f, 0.0f, 1.0f}).view({1, 2, 2});
  const torch::Tensor labels = torch::tensor({1L, 0L}).view({1, 2});
  const torch::Tensor valid = torch::ones({1, 2});
  const torch::Tensor conf = torch::tensor({0.5f, -1.0f}).view({1, 2});
  const double w_total = 3.0;
  const train::DSparkLoss l = train::dspark_loss(z, t, labels, valid, conf, {}, w_total);

  auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
  const double w1 = std::exp(-1.0 / 4.0);
  // slot 0: p_d = softmax(0, 1), p_t = (0.5, 0.5); slot 1: p_d = softmax(2, 0), p_t = softmax(0, 1)
  const double pd0 = sig(-1.0), pd1 = sig(2.0), pt1 = sig(-1.0);
  const double ce = (-std::log(1 - pd0) + w1 * -std::log(pd1)) / w_total;
  const double l1_0 = 2 * std::abs(pd0 - 0.5), l1_1 = 2 * std::abs(pd1 - pt1);
  const double l1 = (l1_0 + w1 * l1_1) / w_total;
  const double c0 = 1 - l1_0 / 2, c1 = 1 - l1_1 / 2;
  auto bce = [&](double x, double y) { return -(y * std::log(sig(x)) + (1 - y) * std::log(1 - sig(x))); };
  const double conf_loss = (bce(0.5, c0) + w1 * bce(-1.0, c1)) / w_total;
  EXPECT_NEAR(l.ce, ce, 1e-6);
  EXPECT_NEAR(l.l1, l1, 1e-6);
  EXPECT_NEAR(l.conf, conf_loss, 1e-6);
  EXPECT_NEAR(l.total.item<double>(), 0.1 * ce + 0.9 * l1 + 1.0 * conf_loss, 1e-6);
  EXPECT_NEAR(l.c_star[0][1].item<double>(), c1, 1e-6);
}

TEST(DSparkLoss, InvalidLabelsContributeNothing) {
  at::Generator gen = at::detail::createCPUGenerator(1);
  const torch::Tensor z = torch::randn({2, 3, 5}, gen), t = torch::randn({2, 3, 5}, gen);
  const torch::Tensor labels = torch::zeros({2, 3}, torch::kLong);
  torch::Tensor valid = torch::ones({2, 3});
  valid[1][2] = 0;
  torch::Tensor z2 = z.clone();
  z2[1][2][0] += 5;  // only the masked slot changes
  const double before = train::dspark_loss(z, t, labels, valid, {}, {}, 1.0).total.item<double>();
  EXPECT_NEAR(train::dspark_loss(z2, t, labels, valid, {}, {}, 1.0).total.item<double>(), before, 1e-6);
  z2[1][1][0] += 5;  // a valid slot: the loss must move
  EXPECT_GT(std::abs(train::dspark_loss(z2, t, labels, valid, {}, {}, 1.0).total.item<double>() - before), 1e-3);
}

// Two steps over a vocabulary of two: soft cross-entropy against p_t, step weights 0.8^s, divided
// by the row total; c* = 1 - TV.
TEST(Eagle3Loss, MatchesHandComputedTerms) {
  const torch::Tensor z = torch::tensor({0.0f, 1.0f, 2.0f, 0.0f}).view({1, 2, 2});
  const torch::Tensor t = torch::tensor({0.0f, 0.0f, 0.0f, 1.0f}).view({1, 2, 2});
  const torch::Tensor valid = torch::ones({1, 2});
  const train::Eagle3Loss l = train::eagle3_loss(z, t, valid, 0.8, 2.0);
  auto sig = [](double x) { return 1 / (1 + std::exp(-x)); };
  // step 0: p_d = (sig(-1), sig(1)), p_t = (0.5, 0.5); step 1: p_d = (sig(2), sig(-2)), p_t = (sig(-1), sig(1))
  const double ce0 = -(0.5 * std::log(sig(-1.0)) + 0.5 * std::log(sig(1.0)));
  const double ce1 = -(sig(-1.0) * std::log(sig(2.0)) + sig(1.0) * std::log(sig(-2.0)));
  EXPECT_NEAR(l.total.item<double>(), (ce0 + 0.8 * ce1) / 2.0, 1e-6);
  EXPECT_NEAR(l.soft_ce, (ce0 + 0.8 * ce1) / 2.0, 1e-6);
  EXPECT_NEAR(l.c_star[0][0].item<double>(), 1 - std::abs(sig(-1.0) - 0.5), 1e-6);
  EXPECT_NEAR(l.c_star[0][1].item<double>(), 1 - std::abs(sig(2.0) - sig(-1.0)), 1e-6);
  const torch::Tensor half = torch::tensor({1.0f, 0.0f}).view({1, 2});  // step 1 masked
  EXPECT_NEAR(train::eagle3_loss(z, t, half, 0.8, 2.0).total.item<double>(), ce0 / 2.0, 1e-6);
}

// Random drafter tensors as stored (bf16 values), the trained matrices scaled up so that a
// block's slots (a chain's steps) differ from one another.
train::NamedTensors trained_looking_tensors(const model::Transformer& target, const draft::DraftConfig& config,
                                            uint64_t seed) {
  auto tensors = draft::random_drafter_tensors(target, config, seed);
  for (auto& [name, t] : tensors) {
    const bool frozen = name == "embed_tokens.weight" || name == "lm_head.weight";
    t = (t * (t.dim() == 2 && !frozen ? 5.0 : 1.0)).to(torch::kBFloat16).to(torch::kFloat32);
  }
  return tensors;
}

// The drafter `tensors` make, written in DeepSpec's layout to `path` and loaded for drafting (f32
// weights, exact products on the stored bf16 LM head, one slot), as the training models are
// compared against it.
template <class DrafterT>
std::unique_ptr<DrafterT> write_and_load(const draft::DraftConfig& config, const train::NamedTensors& tensors,
                                         const std::string& path, const model::Transformer& target) {
  draft::write_drafter(config, tensors, path);
  return DrafterT::load(path, target,
                        {.max_slots = 1, .capacity = 64, .weight_dtype = model::WeightDType::kF32,
                         .bf16_math = kernels::Bf16Math::kExact});
}

// A greedy proposal of 4 drafts after the prompt ids[0, anchor) from the anchor ids[anchor], and
// what a teacher-forced training forward reads to reproduce it.
struct OwnDrafts {
  draft::DraftBlock block;  // the proposal, with its logits
  torch::Tensor seq;        // [S] prompt, anchor, drafts 1..3 (the last draft is never read)
  torch::Tensor features;   // [S, m d] the prompt's target features; zeros past it, which are
                            // never attended to
};
OwnDrafts draft_own_block(draft::Drafter& drafter, const model::Transformer& target, const std::vector<int64_t>& ids,
                          int64_t anchor) {
  const std::vector<int64_t> prompt(ids.begin(), ids.begin() + anchor);
  torch::Tensor features =
      torch::cat(target.forward_sequences(torch::tensor(prompt).unsqueeze(0), drafter.target_layer_ids()).layer_hidden, -1)[0];
  drafter.begin(0, prompt, features);
  sampling::SamplingParams greedy{.temperature = 0};
  sampling::Rng rng(1);
  OwnDrafts out{drafter.propose({{0, ids[anchor], 4, 0.0, &greedy, &rng, true}})[0], {}, {}};
  drafter.end(0);
  std::vector<int64_t> seq = prompt;
  seq.push_back(ids[anchor]);
  if (!out.block.tokens.empty()) seq.insert(seq.end(), out.block.tokens.begin(), out.block.tokens.end() - 1);
  const int64_t S = static_cast<int64_t>(seq.size());
  out.seq = torch::tensor(seq);
  out.features = torch::cat({features, torch::zeros({S - anchor, features.size(1)})});
  return out;
}

// The unrolled training-time test and the inference drafter's chain compute the same logits at
// every step when the chain is fed the tokens the training forward reads (here: the drafter's own
// greedy drafts, so they coincide).
TEST(Eagle3TrainModel, AgreesWithTheInferenceDrafterAtEveryStep) {
  torch::NoGradGuard no_grad;
  model::Transformer target = model::Transformer::load(kTarget.string(), {model::WeightDType::kF32});
  test::TempDir dir;
  draft::DrafterInitOptions init{.method = draft::DraftMethod::kEagle3, .seed = 9, .block_size = 4};
  const draft::DraftConfig config = draft::make_draft_config(target.config(), init);
  ASSERT_EQ(config.ttt_length, 4);
  const auto tensors = trained_looking_tensors(target, config, 9);
  const train::Eagle3TrainModel trainable(config, target, tensors);
  auto drafter = write_and_load<draft::Eagle3Drafter>(config, tensors, dir.file("eagle3"), target);
  std::vector<int64_t> ids;
  for (int i = 0; i < 16; ++i) ids.push_back((i * 37 + 11) % 400);
  for (int64_t anchor : {3L, 9L}) {
    const OwnDrafts own = draft_own_block(*drafter, target, ids, anchor);
    ASSERT_EQ(own.block.tokens.size(), 4u);
    const auto train_out = trainable.forward(own.features, own.seq, {1, anchor});  // another row alongside
    const double diff = (train_out.logits[1] - own.block.logits).abs().max().item<double>();
    EXPECT_LT(diff, 1e-4) << "anchor " << anchor;
    // The steps are not copies of one another (the test would pass trivially otherwise).
    EXPECT_GT((own.block.logits[0] - own.block.logits[3]).abs().max().item<double>(), 1e-2);
  }
}

// The training forward (all blocks of a sequence at once, block mask) and the inference drafter
// (one block from the draft cache) compute the same slot logits: for DFlash every slot, for
// DSpark slot 0 (whose Markov previous token is the anchor in both) and its confidence.
TEST(DSparkTrainModel, AgreesWithTheInferenceDrafter) {
  torch::NoGradGuard no_grad;
  model::Transformer target = model::Transformer::load(kTarget.string(), {model::WeightDType::kF32});
  test::TempDir dir;
  for (const char* method : {"dflash", "dspark"}) {
    SCOPED_TRACE(method);
    draft::DrafterInitOptions init{.method = draft::parse_method(method), .seed = 5, .block_size = 4};
    const draft::DraftConfig config = draft::make_draft_config(target.config(), init);
    auto tensors = draft::random_drafter_tensors(target, config, 5);
    for (auto& [name, t] : tensors) t = t.to(torch::kBFloat16).to(torch::kFloat32);  // as stored
    const train::DSparkTrainModel trainable(config, target, tensors);
    auto drafter = write_and_load<draft::DSparkDrafter>(config, tensors, dir.file(method), target);
    std::vector<int64_t> ids;
    for (int i = 0; i < 20; ++i) ids.push_back((i * 37 + 11) % 400);
    const torch::Tensor id_tensor = torch::tensor(ids, torch::kLong);
    const model::ForwardOutput out = target.forward_sequences(id_tensor.unsqueeze(0), config.target_layer_ids);
    const torch::Tensor features = torch::cat(out.layer_hidden, -1)[0];
    for (int64_t anchor : {0L, 7L, 15L}) {
      const auto train_out = trainable.forward(features, id_tensor, {3, anchor});  // another block alongside
      const std::vector<int64_t> prompt(ids.begin(), ids.begin() + anchor);
      drafter->begin(0, prompt, features.narrow(0, 0, anchor));
      sampling::SamplingParams greedy{.temperature = 0};
      sampling::Rng rng(1);
      const auto blocks = drafter->propose({{0, ids[anchor], 4, 0.0, &greedy, &rng, true}});
      drafter->end(0);
      const int64_t n_slots = config.markov_rank > 0 ? 1 : 4;
      const double diff = (train_out.logits[1].narrow(0, 0, n_slots) - blocks[0].logits.narrow(0, 0, n_slots)).abs().max().item<double>();
      EXPECT_LT(diff, 1e-4) << "anchor " << anchor;
      if (config.confidence_head) {
        EXPECT_NEAR(1 / (1 + std::exp(-train_out.confidence_logits[1][0].item<double>())), blocks[0].confidence[0], 1e-5);
      }
    }
  }
}

// Teacher-forced on the drafter's own greedy drafts, the training form reproduces every slot of
// the drafted block, Markov bias and confidence included, for both Markov heads (the RNN head's
// recurrence is unrolled by MarkovHeadModule::block and carried by ::step).
TEST(DSparkTrainModel, TeacherForcedOnItsOwnDraftsMatchesEverySlot) {
  torch::NoGradGuard no_grad;
  model::Transformer target = model::Transformer::load(kTarget.string(), {model::WeightDType::kF32});
  test::TempDir dir;
  for (draft::MarkovHead kind : {draft::MarkovHead::kVanilla, draft::MarkovHead::kRnn}) {
    const std::string name = kind == draft::MarkovHead::kRnn ? "rnn" : "vanilla";
    SCOPED_TRACE(name);
    draft::DrafterInitOptions init{.method = draft::DraftMethod::kDSpark, .seed = 6, .block_size = 4, .markov_head = kind};
    const draft::DraftConfig config = draft::make_draft_config(target.config(), init);
    const auto tensors = trained_looking_tensors(target, config, 6);
    const train::DSparkTrainModel trainable(config, target, tensors);
    auto drafter = write_and_load<draft::DSparkDrafter>(config, tensors, dir.file(name), target);
    std::vector<int64_t> ids;
    for (int i = 0; i < 12; ++i) ids.push_back((i * 37 + 11) % 400);
    const int64_t anchor = 9;
    const OwnDrafts own = draft_own_block(*drafter, target, ids, anchor);
    ASSERT_EQ(own.block.tokens.size(), 4u);
    const auto train_out = trainable.forward(own.features, own.seq, {2, anchor});  // another block alongside
    EXPECT_LT((train_out.logits[1] - own.block.logits).abs().max().item<double>(), 1e-4);
    for (int64_t k = 0; k < 4; ++k)
      EXPECT_NEAR(1 / (1 + std::exp(-train_out.confidence_logits[1][k].item<double>())), own.block.confidence[k], 1e-5);
    // The Markov bias of the later slots depends on the drafted tokens (not a trivial pass).
    EXPECT_GT((own.block.logits[0] - own.block.logits[3]).abs().max().item<double>(), 1e-2);
  }
}

// Conversations whose answers the target itself samples (T = 1), as `dspark data regenerate`
// makes them: a drafter trained on them learns the target's distribution, so its acceptance rises.
void write_data(const fs::path& file, int n) {
  model::Transformer target = model::Transformer::load(kTarget.string(), {model::WeightDType::kF32});
  std::ofstream out(file);
  for (int i = 0; i < n; ++i) {
    std::vector<int64_t> prompt;
    for (int j = 0; j < 6; ++j) prompt.push_back(100 + (i * 7 + j) % 50);
    const std::vector<int64_t> answer =
        test::generate(target, nullptr, prompt, {.temperature = 1.0, .seed = static_cast<uint64_t>(i)}, 40).ids;
    std::vector<int64_t> ids = prompt;
    ids.insert(ids.end(), answer.begin(), answer.end());
    std::vector<uint8_t> mask(prompt.size(), 0);
    mask.resize(ids.size(), 1);
    out << nlohmann::json{{"id", "c/" + std::to_string(i)}, {"domain", "chat"}, {"input_ids", ids}, {"loss_mask", mask}}.dump()
        << "\n";
  }
}

train::DrafterTrainOptions options_for(const test::TempDir& dir, const std::string& run) {
  train::DrafterTrainOptions o;
  o.target_dir = kTarget;
  o.data_file = dir / "data.jsonl";
  o.out_dir = dir / run;
  o.init = {.method = draft::DraftMethod::kDSpark, .seed = 3, .block_size = 4};
  o.batch_size = 4;
  o.max_anchors = 8;
  o.epochs = 3;
  o.peak_lr = 3e-3;
  o.valid_percent = 20;
  o.valid_sequences = 8;
  o.save_every = 4;
  o.eval_every = 0;
  return o;
}

// The protocol of the short-run tests: one step (into o.out_dir), then the whole run afresh.
std::pair<train::DrafterTrainResult, train::DrafterTrainResult> first_step_and_full_run(train::DrafterTrainOptions o,
                                                                                        const test::TempDir& dir) {
  o.max_steps = 1;
  train::DrafterTrainResult first = train::train_drafter(o);
  o.max_steps = 0;
  o.out_dir = dir / "run2";
  return {std::move(first), train::train_drafter(o)};
}

TEST(DrafterTrainer, ShortRunLowersTheLossAndRaisesAcceptance) {
  test::TempDir dir;
  write_data(dir / "data.jsonl", 40);
  train::DrafterTrainOptions o = options_for(dir, "run");
  const auto [first, full] = first_step_and_full_run(o, dir);
  ASSERT_GT(full.steps, 12);
  EXPECT_LT(full.valid.loss, 0.8 * first.valid.loss);
  EXPECT_GT(full.valid.tau, first.valid.tau + 0.05);
  // The later slots, which start near zero (the random backbone sees only mask tokens there),
  // gain most: measured 0.001 -> 0.146 on this fixture.
  ASSERT_EQ(full.valid.accept_rate.size(), 4u);
  for (size_t k = 1; k < 4; ++k) EXPECT_GT(full.valid.accept_rate[k], first.valid.accept_rate[k] + 0.05) << k;
  ASSERT_TRUE(fs::exists(full.final_dir / "model.safetensors"));
  // The exported drafter loads as an inference drafter.
  model::Transformer target = model::Transformer::load(kTarget.string(), {model::WeightDType::kF32});
  EXPECT_NO_THROW(draft::DSparkDrafter::load(full.final_dir.string(), target, {}));
  // Rerunning the finished run trains nothing and keeps its summary (it was rewritten with the
  // validation figures of a rerun that validated nothing).
  const std::string summary = test::read_text(full.final_dir / "training_summary.json");
  o.out_dir = dir / "run2";
  EXPECT_EQ(train::train_drafter(o).steps, full.steps);
  EXPECT_EQ(test::read_text(full.final_dir / "training_summary.json"), summary);
}

// The RNN Markov head trains under the same protocol: the loss falls, the later slots gain, and
// the export (with its joint projection) loads as an inference drafter.
TEST(DrafterTrainer, RnnMarkovHeadShortRunLowersTheLoss) {
  test::TempDir dir;
  write_data(dir / "data.jsonl", 40);
  train::DrafterTrainOptions o = options_for(dir, "run");
  o.init.markov_head = draft::MarkovHead::kRnn;
  const auto [first, full] = first_step_and_full_run(o, dir);
  EXPECT_LT(full.valid.loss, 0.8 * first.valid.loss);
  EXPECT_GT(full.valid.tau, first.valid.tau + 0.05);
  const draft::DraftConfig config = draft::DraftConfig::load((full.final_dir / "config.json").string());
  EXPECT_EQ(config.markov_head, draft::MarkovHead::kRnn);
  model::Transformer target = model::Transformer::load(kTarget.string(), {model::WeightDType::kF32});
  EXPECT_NO_THROW(draft::DSparkDrafter::load(full.final_dir.string(), target, {}));
}

// bf16 autocast (target features and drafter products in bf16, losses in f32) trains under the
// same protocol, to a validation loss within 5% of the f32 run's.
TEST(DrafterTrainer, Bf16AutocastShortRunTracksF32) {
  test::TempDir dir;
  write_data(dir / "data.jsonl", 40);
  train::DrafterTrainOptions f32 = options_for(dir, "f32");
  train::DrafterTrainOptions bf16 = options_for(dir, "bf16");
  bf16.bf16_autocast = true;
  const train::DrafterTrainResult a = train::train_drafter(f32);
  const train::DrafterTrainResult b = train::train_drafter(bf16);
  std::printf("validation loss: f32 %.4f, bf16 autocast %.4f; tau %.3f, %.3f\n", a.valid.loss, b.valid.loss,
              a.valid.tau, b.valid.tau);
  EXPECT_NEAR(b.valid.loss, a.valid.loss, 0.05 * a.valid.loss);
  EXPECT_NEAR(b.valid.tau, a.valid.tau, 0.05 * a.valid.tau);
  EXPECT_NE(a.valid.loss, b.valid.loss);  // the products did run in bf16
}

// The same protocol for EAGLE-3's training-time test: the loss falls and every step's acceptance
// rises; the export loads as an inference drafter.
TEST(DrafterTrainer, Eagle3ShortRunLowersTheLossAndRaisesAcceptance) {
  test::TempDir dir;
  write_data(dir / "data.jsonl", 40);
  train::DrafterTrainOptions o = options_for(dir, "run");
  o.init.method = draft::DraftMethod::kEagle3;
  const auto [first, full] = first_step_and_full_run(o, dir);
  EXPECT_LT(full.valid.loss, 0.8 * first.valid.loss);
  EXPECT_GT(full.valid.tau, first.valid.tau + 0.05);
  ASSERT_EQ(full.valid.accept_rate.size(), 4u);
  for (size_t k = 0; k < 4; ++k) EXPECT_GT(full.valid.accept_rate[k], first.valid.accept_rate[k] + 0.02) << k;
  model::Transformer target = model::Transformer::load(kTarget.string(), {model::WeightDType::kF32});
  EXPECT_NO_THROW(draft::Eagle3Drafter::load(full.final_dir.string(), target, {}));
}

TEST(DrafterTrainer, ResumeReproducesTheNextStepsBitForBit) {
  test::TempDir dir;
  write_data(dir / "data.jsonl", 40);
  train::DrafterTrainOptions straight = options_for(dir, "straight");
  straight.max_steps = 8;
  train::train_drafter(straight);
  train::DrafterTrainOptions split = options_for(dir, "split");
  split.max_steps = 4;
  train::train_drafter(split);
  split.max_steps = 8;
  train::train_drafter(split);
  for (const char* file : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_EQ(test::read_text(dir / "straight/checkpoints/step-000008" / file),
              test::read_text(dir / "split/checkpoints/step-000008" / file))
        << file;
  // Resumed past its --max-steps, a run trains nothing and says where it stands (it reported the
  // smaller --max-steps as its step, and validation figures of 0 for the validation it never ran).
  split.max_steps = 4;
  const train::DrafterTrainResult past = train::train_drafter(split);
  EXPECT_EQ(past.steps, 8);
  EXPECT_TRUE(std::isnan(past.valid.loss));
  EXPECT_TRUE(std::isnan(past.valid.tau));
  // Asked for another drafter (here another Markov rank), the resumed run refuses instead of
  // training the checkpoint's drafter on.
  split.max_steps = 12;
  split.init.markov_rank = 4;
  test::expect_error([&] { train::train_drafter(split); }, {"made with", "markov_rank"});
  // A token id outside the target's vocabulary is named with its conversation, before any step
  // (libtorch's embedding lookup once failed on it with a page of backtrace).
  std::ofstream(dir / "data.jsonl", std::ios::app)
      << nlohmann::json{{"id", "bad/0"}, {"domain", "chat"}, {"input_ids", {1, 2, 999999}}, {"loss_mask", {0, 1, 1}}}.dump()
      << "\n";
  test::expect_error([&] { train::train_drafter(options_for(dir, "bad")); }, {"data.jsonl", "bad/0", "999999"});
}

// Two epochs with the feature cache (the second reads the target's features back) write the
// same checkpoint bytes as without it, and so does a run that finds the cache already full; a
// run reading a cache whose bytes were overwritten trains to other weights, so the cache is read.
void expect_feature_cache_trains_the_same_bytes(bool bf16_autocast) {
  test::TempDir dir;
  write_data(dir / "data.jsonl", 40);
  const auto run = [&](const std::string& name, bool cached) {
    train::DrafterTrainOptions o = options_for(dir, name);
    o.epochs = 2;
    o.bf16_autocast = bf16_autocast;
    if (cached) o.feature_cache_dir = dir / "features";
    const train::DrafterTrainResult r = train::train_drafter(o);
    char step[32];
    std::snprintf(step, sizeof step, "step-%06ld", static_cast<long>(r.steps));
    return test::read_text(dir / name / "checkpoints" / step / "model.safetensors");
  };
  const std::string online = run("online", false);
  EXPECT_EQ(run("filling", true), online);
  EXPECT_EQ(run("reading", true), online);
  const fs::path bin = dir / "features/features.bin";
  const auto size = fs::file_size(bin);
  fs::resize_file(bin, 0);
  fs::resize_file(bin, size);  // zeros
  EXPECT_NE(run("zeroed", true), online);
}

TEST(DrafterTrainer, FeatureCacheTrainsTheSameBytes) { expect_feature_cache_trains_the_same_bytes(false); }
TEST(DrafterTrainer, FeatureCacheTrainsTheSameBytesUnderBf16Autocast) { expect_feature_cache_trains_the_same_bytes(true); }

}  // namespace
}  // namespace dspark
