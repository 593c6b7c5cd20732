// The target forward against ground truth (llama.cpp logits of the tiny fixtures) and against
// itself: ragged batches equal single runs, rollback equals a fresh run, shards equal one file.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "engine/generate.h"
#include "model/model_init.h"
#include "model/safetensors.h"
#include "model/transformer.h"
#include "forward_test_util.h"
#include "test_util.h"

namespace dspark::model {
namespace {

using test::all_logits;
using test::fixture;

// all_logits through the libtorch path, which other devices and autograd take: on the CPU, asking
// for gradients is what keeps a forward off the rows path.
torch::Tensor libtorch_path_logits(Transformer& model, const std::vector<int64_t>& ids) {
  torch::AutoGradMode grad(true);
  model.set_requires_grad(true);
  torch::Tensor logits = all_logits(model, ids).detach();
  model.set_requires_grad(false);
  return logits;
}

std::vector<int64_t> greedy(Transformer& model, const std::vector<int64_t>& prompt, int64_t n) {
  return test::greedy(model, prompt, n);
}

struct FixtureCase {
  std::string fixture_name;
  WeightDType dtype;
  Kernels kernels = Kernels::kAuto;  // kTensorOps: the libtorch path a CUDA device runs, here on the CPU
};

void PrintTo(const FixtureCase& c, std::ostream* os) {
  *os << c.fixture_name << " " << weight_dtype_name(c.dtype)
      << (c.kernels == Kernels::kTensorOps ? " tensor-ops" : "");
}

class FixtureLogits : public ::testing::TestWithParam<FixtureCase> {};

// Every case of expected.json: all positions' logits within 1e-4 max abs of llama.cpp's, and the
// 16 greedy tokens equal.
TEST_P(FixtureLogits, MatchLlamaCppReference) {
  torch::NoGradGuard no_grad;
  const auto dir = fixture(GetParam().fixture_name);
  Transformer model = Transformer::load(dir.string(), {.weight_dtype = GetParam().dtype, .kernels = GetParam().kernels});
  const auto expected = nlohmann::json::parse(test::read_text(dir / "expected" / "expected.json"));
  ASSERT_EQ(expected["cases"].size(), 4u);
  for (const auto& c : expected["cases"]) {
    const std::vector<int64_t> ids = c["ids"];
    const std::vector<float> ref = test::read_f32(dir / "expected" / c["logits_file"].get<std::string>());
    torch::Tensor logits = all_logits(model, ids).contiguous();
    ASSERT_EQ(logits.numel(), static_cast<int64_t>(ref.size())) << c["name"];
    torch::Tensor ref_t = torch::from_blob(const_cast<float*>(ref.data()), logits.sizes(), torch::kFloat32);
    const double max_diff = (logits - ref_t).abs().max().item<double>();
    EXPECT_LE(max_diff, 1e-4) << c["name"];
    EXPECT_EQ(greedy(model, ids, 16), c["greedy_next_16"].get<std::vector<int64_t>>()) << c["name"];
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureLogits,
                         ::testing::Values(FixtureCase{"tiny-qwen3-tied", WeightDType::kF32},
                                           FixtureCase{"tiny-qwen3-tied", WeightDType::kBF16},
                                           FixtureCase{"tiny-qwen3-untied", WeightDType::kF32},
                                           FixtureCase{"tiny-qwen3-tied", WeightDType::kF32, Kernels::kTensorOps},
                                           FixtureCase{"tiny-qwen3-tied", WeightDType::kBF16, Kernels::kTensorOps},
                                           FixtureCase{"tiny-qwen3-untied", WeightDType::kF32, Kernels::kTensorOps},
                                           // The tied fixture is bf16, and bf16 -> f16 is exact but for
                                           // values below f16's normal range (2^-14), rounded by at
                                           // most 2^-25: f16 natively. (The untied one is f32, which
                                           // f16 rounds enough to move logits by ~1e-2.)
                                           FixtureCase{"tiny-qwen3-tied", WeightDType::kF16},
                                           FixtureCase{"tiny-qwen3-tied", WeightDType::kF16, Kernels::kTensorOps}),
                         [](const auto& info) {
                           std::string name = info.param.fixture_name + "_" + weight_dtype_name(info.param.dtype) +
                                              (info.param.kernels == Kernels::kTensorOps ? "_tensor_ops" : "");
                           for (char& ch : name) if (ch == '-') ch = '_';
                           return name;
                         });

std::vector<int64_t> iota_ids(int64_t n, int64_t start, int64_t vocab) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back((start + 37 * i) % vocab);
  return ids;
}

// Three sequences with different prompt lengths and different numbers of new tokens in one
// forward give the logits each gives alone: <= 1e-5 on the CPU rows path; libtorch's GEMMs (the
// tensor-ops path, any other device) sum in an order that depends on the number of rows (1.05e-5
// seen on logits up to ~12), so there the bound is the fixtures' 1e-4.
void expect_ragged_batch_equals_each_sequence_alone(Kernels kernels) {
  torch::NoGradGuard no_grad;
  Transformer model = Transformer::load(fixture("tiny-qwen3-untied").string(),
                                        {.weight_dtype = WeightDType::kF32, .kernels = kernels});
  const int64_t vocab = model.config().vocab_size;
  const double tolerance = kernels == Kernels::kAuto && model.device().is_cpu() ? 1e-5 : 1e-4;
  const std::vector<int64_t> prompt_lengths{5, 17, 9, 70};
  const std::vector<int64_t> n_new{1, 4, 8, 3};

  KvCache batched = model.make_cache(4, 128);
  ForwardBatch batch;
  for (size_t s = 0; s < prompt_lengths.size(); ++s) {
    const int64_t slot = *batched.allocate();
    model.prefill(batched, slot, iota_ids(prompt_lengths[s], 3 + s, vocab));
    batch.seqs.push_back({slot, n_new[s]});
    for (int64_t id : iota_ids(n_new[s], 11 * s + 1, vocab)) {
      batch.logit_rows.push_back(static_cast<int64_t>(batch.token_ids.size()));
      batch.token_ids.push_back(id);
    }
  }
  const torch::Tensor together = model.forward(batched, batch).logits;

  int64_t row = 0;
  for (size_t s = 0; s < prompt_lengths.size(); ++s) {
    KvCache alone = model.make_cache(1, 128);
    const int64_t slot = *alone.allocate();
    model.prefill(alone, slot, iota_ids(prompt_lengths[s], 3 + s, vocab));
    ForwardBatch single;
    single.token_ids = iota_ids(n_new[s], 11 * s + 1, vocab);
    single.seqs = {{slot, n_new[s]}};
    for (int64_t i = 0; i < n_new[s]; ++i) single.logit_rows.push_back(i);
    const torch::Tensor logits = model.forward(alone, single).logits;
    EXPECT_LE((logits - together.narrow(0, row, n_new[s])).abs().max().item<double>(), tolerance) << "sequence " << s;
    EXPECT_EQ(batched.length(batch.seqs[s].slot), prompt_lengths[s] + n_new[s]);
    row += n_new[s];
  }
}

TEST(RaggedBatch, EqualsEachSequenceAlone) { expect_ragged_batch_equals_each_sequence_alone(Kernels::kAuto); }

// The same on the libtorch path a CUDA device runs (attention one sequence at a time, masked).
TEST(RaggedBatch, EqualsEachSequenceAloneOnTheTensorOpsPath) {
  expect_ragged_batch_equals_each_sequence_alone(Kernels::kTensorOps);
}

// A ragged prefill of three prompts in one forward equals prefilling each alone.
TEST(RaggedBatch, PrefillOfSeveralPromptsEqualsSingles) {
  torch::NoGradGuard no_grad;
  Transformer model = Transformer::load(fixture("tiny-qwen3-tied").string(), {WeightDType::kF32});
  const std::vector<int64_t> lengths{3, 80, 12};
  KvCache cache = model.make_cache(3, 100);
  ForwardBatch batch;
  std::vector<std::vector<int64_t>> prompts;
  for (size_t s = 0; s < lengths.size(); ++s) {
    prompts.push_back(iota_ids(lengths[s], 7 * s, model.config().vocab_size));
    batch.seqs.push_back({*cache.allocate(), lengths[s]});
    batch.token_ids.insert(batch.token_ids.end(), prompts.back().begin(), prompts.back().end());
    batch.logit_rows.push_back(static_cast<int64_t>(batch.token_ids.size()) - 1);
  }
  const torch::Tensor together = model.forward(cache, batch).logits;
  for (size_t s = 0; s < lengths.size(); ++s) {
    const torch::Tensor alone = all_logits(model, prompts[s]);
    EXPECT_LE((alone[lengths[s] - 1] - together[s]).abs().max().item<double>(), 1e-5) << "sequence " << s;
  }
}

// Draft 6 tokens, reject the last 4 (truncate), continue: equals a fresh run over the committed
// tokens (<= 1e-5). Replaying the same step after a rollback is bit-identical.
TEST(KvCache, TruncateThenContinueEqualsFreshRun) {
  torch::NoGradGuard no_grad;
  Transformer model = Transformer::load(fixture("tiny-qwen3-untied").string(), {WeightDType::kF32});
  const int64_t vocab = model.config().vocab_size;
  const std::vector<int64_t> prompt = iota_ids(10, 5, vocab);
  const std::vector<int64_t> drafts = iota_ids(6, 100, vocab);
  const std::vector<int64_t> next = iota_ids(3, 200, vocab);

  KvCache cache = model.make_cache(1, 64);
  const int64_t slot = *cache.allocate();
  model.prefill(cache, slot, prompt);
  ForwardBatch verify;
  verify.token_ids = drafts;
  verify.seqs = {{slot, 6}};
  verify.logit_rows = {0, 1, 2, 3, 4, 5};
  const torch::Tensor first = model.forward(cache, verify).logits;
  cache.truncate(slot, 10);
  const torch::Tensor replay = model.forward(cache, verify).logits;
  EXPECT_TRUE(torch::equal(first, replay)) << "replay after rollback is not bit-identical";

  cache.truncate(slot, 12);  // keep two drafts
  ForwardBatch cont;
  cont.token_ids = next;
  cont.seqs = {{slot, 3}};
  cont.logit_rows = {0, 1, 2};
  const torch::Tensor continued = model.forward(cache, cont).logits;

  std::vector<int64_t> committed = prompt;
  committed.insert(committed.end(), drafts.begin(), drafts.begin() + 2);
  committed.insert(committed.end(), next.begin(), next.end());
  const torch::Tensor fresh = all_logits(model, committed).narrow(0, 12, 3);
  EXPECT_LE((fresh - continued).abs().max().item<double>(), 1e-5);
  EXPECT_EQ(cache.length(slot), 15);
}

// Layer captures are the residual stream after that layer, in the order asked; the final hidden
// state is the last layer through the final norm, and the LM head on it gives the logits.
TEST(Forward, CapturesLayerOutputsAndFinalHidden) {
  torch::NoGradGuard no_grad;
  const auto dir = fixture("tiny-qwen3-untied");
  Transformer model = Transformer::load(dir.string(), {WeightDType::kF32});
  const ModelConfig& c = model.config();
  const int64_t last = c.n_layers - 1;
  const std::vector<int64_t> ids = iota_ids(6, 1, c.vocab_size);
  auto run = [&](std::vector<int64_t> layers) {
    KvCache cache = model.make_cache(1, 16);
    ForwardBatch batch;
    batch.token_ids = ids;
    batch.seqs = {{*cache.allocate(), 6}};
    batch.capture_layers = std::move(layers);
    batch.capture_final_hidden = true;
    batch.logit_rows = {5};
    return model.forward(cache, batch);
  };
  const ForwardOutput both = run({last, 0});
  ASSERT_EQ(both.layer_hidden.size(), 2u);
  EXPECT_TRUE(torch::equal(both.layer_hidden[0], run({last}).layer_hidden[0]));
  EXPECT_TRUE(torch::equal(both.layer_hidden[1], run({0}).layer_hidden[0]));
  EXPECT_FALSE(torch::equal(both.layer_hidden[0], both.layer_hidden[1]));

  const SafetensorsArchive archive = SafetensorsArchive::open(dir.string());
  auto f32 = [&](const std::string& name) {
    const TensorView& v = archive.get(name);
    return torch::from_blob(const_cast<void*>(v.data), v.shape, torch::kFloat32).clone();
  };
  const torch::Tensor final_hidden = rms_norm(both.layer_hidden[0], f32("model.norm.weight"), c.rms_norm_eps);
  EXPECT_LE((final_hidden - both.final_hidden).abs().max().item<double>(), 1e-6);
  const torch::Tensor logits = torch::matmul(final_hidden[5], f32("lm_head.weight").t());
  EXPECT_LE((logits - both.logits[0]).abs().max().item<double>(), 1e-5);
}

// A sharded checkpoint (several files + index) loads to exactly the same logits as one file.
TEST(Checkpoint, ShardedLoadsLikeSingleFile) {
  torch::NoGradGuard no_grad;
  test::TempDir dir;
  ModelConfig config = ModelConfig::load(fixture("tiny-qwen3-untied").string());
  write_random_checkpoint(config, (dir / "single").string(), {7, 0});
  write_random_checkpoint(config, (dir / "sharded").string(), {7, 400 * 1024});
  ASSERT_TRUE(std::filesystem::exists(dir / "sharded" / "model.safetensors.index.json"));
  ASSERT_FALSE(std::filesystem::exists(dir / "sharded" / "model.safetensors"));
  Transformer single = Transformer::load((dir / "single").string(), {WeightDType::kF32});
  Transformer sharded = Transformer::load((dir / "sharded").string(), {WeightDType::kF32});
  const std::vector<int64_t> ids = iota_ids(9, 2, config.vocab_size);
  EXPECT_TRUE(torch::equal(all_logits(single, ids), all_logits(sharded, ids)));
}

// save() with a shard limit writes Hugging Face's sharded layout, which loads back to the same
// weights as the single file save() writes without one.
TEST(Checkpoint, SaveShardsPastTheLimit) {
  torch::NoGradGuard no_grad;
  test::TempDir dir;
  Transformer model = Transformer::load(fixture("tiny-qwen3-untied").string(), {WeightDType::kBF16});
  model.save((dir / "single").string(), WeightDType::kBF16);
  model.save((dir / "sharded").string(), WeightDType::kBF16, 100 * 1024);
  ASSERT_TRUE(std::filesystem::exists(dir / "single" / "model.safetensors"));
  ASSERT_TRUE(std::filesystem::exists(dir / "sharded" / "model.safetensors.index.json"));
  ASSERT_FALSE(std::filesystem::exists(dir / "sharded" / "model.safetensors"));
  int shards = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir / "sharded"))
    shards += e.path().extension() == ".safetensors";
  EXPECT_GE(shards, 5);  // about 770 kB of bf16 weights in shards of at most 100 kB (the largest alone)
  Transformer single = Transformer::load((dir / "single").string(), {WeightDType::kF32});
  Transformer sharded = Transformer::load((dir / "sharded").string(), {WeightDType::kF32});
  const std::vector<int64_t> ids = iota_ids(9, 2, model.config().vocab_size);
  EXPECT_TRUE(torch::equal(all_logits(single, ids), all_logits(sharded, ids)));
}

// --dtype auto keeps the checkpoint's precision: the bf16 fixture stays bf16, the f32 one f32;
// saved as f32 or f16 (matrices; norms stay f32) the bf16 one loads as that, with config.json's
// torch_dtype saying so; an explicit dtype converts.
TEST(WeightDType, AutoKeepsTheCheckpointsPrecision) {
  torch::NoGradGuard no_grad;
  test::TempDir dir;
  EXPECT_EQ(Transformer::load(fixture("tiny-qwen3-untied").string()).weight_dtype(), WeightDType::kF32);
  const Transformer bf16 = Transformer::load(fixture("tiny-qwen3-tied").string());
  EXPECT_EQ(bf16.weight_dtype(), WeightDType::kBF16);
  EXPECT_EQ(bf16.embedding().scalar_type(), torch::kBFloat16);
  for (const auto& [dtype, name, type, torch_dtype] :
       {std::tuple{WeightDType::kF32, "f32", torch::kFloat32, "float32"},
        std::tuple{WeightDType::kF16, "f16", torch::kFloat16, "float16"}}) {
    SCOPED_TRACE(name);
    const std::string out = (dir / name).string();
    bf16.save(out, dtype);
    const auto config = nlohmann::json::parse(test::read_text(dir / name / "config.json"));
    EXPECT_EQ(config["torch_dtype"], torch_dtype);
    const Transformer loaded = Transformer::load(out);
    EXPECT_EQ(loaded.weight_dtype(), dtype);
    EXPECT_EQ(loaded.embedding().scalar_type(), type);
    for (const auto& [param, tensor] : loaded.named_parameters())
      EXPECT_EQ(tensor.scalar_type(), tensor.dim() == 2 ? type : torch::kFloat32) << param;
    EXPECT_EQ(Transformer::load(out, {WeightDType::kBF16}).weight_dtype(), WeightDType::kBF16);
  }
  // save(kAuto) writes the model's own precision.
  Transformer::load((dir / "f16").string()).save((dir / "again").string(), WeightDType::kAuto);
  EXPECT_EQ(Transformer::load((dir / "again").string()).weight_dtype(), WeightDType::kF16);
}

// The one rule for checkpoints mixing dtypes: their common dtype, else f32 (which holds them all).
TEST(WeightDType, CommonDtypeOfMixedMatrices) {
  using enum WeightDType;
  EXPECT_EQ(common_weight_dtype({}), kF32);
  EXPECT_EQ(common_weight_dtype({kF16, kF16}), kF16);
  EXPECT_EQ(common_weight_dtype({kBF16}), kBF16);
  EXPECT_EQ(common_weight_dtype({kF16, kBF16}), kF32);
  EXPECT_EQ(common_weight_dtype({kBF16, kF32, kBF16}), kF32);
}

// A checkpoint whose matrices are f16 except one bf16 matrix loads in f32 under auto; its 1-D
// tensors (f32 norms) never count.
TEST(WeightDType, MixedCheckpointLoadsInF32) {
  torch::NoGradGuard no_grad;
  test::TempDir dir;
  Transformer::load(fixture("tiny-qwen3-untied").string()).save((dir / "f16").string(), WeightDType::kF16);
  const SafetensorsArchive f16 = SafetensorsArchive::open((dir / "f16").string());
  EXPECT_EQ(stored_weight_dtype(f16), WeightDType::kF16);
  std::vector<torch::Tensor> keep;
  std::vector<TensorToWrite> tensors;
  for (const auto& [name, view] : f16.views()) {
    torch::Tensor t = read_tensor(f16, name, view.shape, to_scalar_type(view.dtype));
    if (name == "model.layers.1.mlp.down_proj.weight") t = t.to(torch::kBFloat16);
    keep.push_back(t);
    tensors.push_back({name, t.scalar_type() == torch::kBFloat16 ? DType::kBF16 : view.dtype, view.shape,
                       t.data_ptr(), static_cast<size_t>(t.numel() * t.element_size())});
  }
  std::filesystem::create_directories(dir / "mixed");
  std::filesystem::copy_file(dir / "f16" / "config.json", dir / "mixed" / "config.json");
  write_safetensors((dir / "mixed" / "model.safetensors").string(), tensors);
  EXPECT_EQ(Transformer::load((dir / "mixed").string()).weight_dtype(), WeightDType::kF32);
}

// A float16 checkpoint (each fixture saved in f16) runs natively under auto: the f16 kernels,
// embedding and LM head give, on every fixture prompt, the logits of the same checkpoint loaded
// in f32 up to summation order (<= 1e-5 on the rows path, 1e-4 on libtorch's as elsewhere), and
// the same 16 greedy tokens.
TEST(WeightDType, Float16CheckpointRunsLikeF32OfTheSameValues) {
  torch::NoGradGuard no_grad;
  for (const std::string name : {"tiny-qwen3-tied", "tiny-qwen3-untied"}) {
    for (Kernels kernels : {Kernels::kAuto, Kernels::kTensorOps}) {
      SCOPED_TRACE(name + (kernels == Kernels::kTensorOps ? " tensor-ops" : ""));
      test::TempDir dir;
      Transformer::load(fixture(name).string()).save(dir.str(), WeightDType::kF16);
      Transformer f16 = Transformer::load(dir.str(), {.kernels = kernels});
      ASSERT_EQ(f16.weight_dtype(), WeightDType::kF16);
      Transformer f32 = Transformer::load(dir.str(), {.weight_dtype = WeightDType::kF32, .kernels = kernels});
      const double tolerance = kernels == Kernels::kAuto ? 1e-5 : 1e-4;
      const auto expected = nlohmann::json::parse(test::read_text(fixture(name) / "expected" / "expected.json"));
      for (const auto& c : expected["cases"]) {
        const std::vector<int64_t> ids = c["ids"];
        EXPECT_LE((all_logits(f16, ids) - all_logits(f32, ids)).abs().max().item<double>(), tolerance) << c["name"];
        EXPECT_EQ(greedy(f16, ids, 16), greedy(f32, ids, 16)) << c["name"];
      }
    }
  }
}

// The Llama path (no q/k norm, attention biases, llama3 RoPE scaling, untied head): a ragged step
// equals the sequences run alone, and the fast and libtorch paths agree on a long prefill.
TEST(Forward, LlamaArchitectureRaggedEqualsSingles) {
  torch::NoGradGuard no_grad;
  test::TempDir dir;
  nlohmann::json j = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"}, {"vocab_size", 300},
                      {"hidden_size", 64}, {"intermediate_size", 96}, {"num_hidden_layers", 2},
                      {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"rms_norm_eps", 1e-5},
                      {"rope_theta", 500000.0}, {"attention_bias", true}, {"tie_word_embeddings", false},
                      {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                                        {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}}},
                      {"torch_dtype", "float32"}, {"eos_token_id", 2}};
  const ModelConfig config = ModelConfig::from_json(j, "llama-test");
  EXPECT_FALSE(config.qk_norm);
  write_random_checkpoint(config, (dir / "llama").string(), {3, 0});
  Transformer model = Transformer::load((dir / "llama").string(), {WeightDType::kF32});
  const std::vector<int64_t> a = iota_ids(90, 1, 300), b = iota_ids(7, 2, 300);
  const torch::Tensor long_alone = all_logits(model, a);  // 90 rows: two pieces

  KvCache cache = model.make_cache(2, 128);
  ForwardBatch batch;
  batch.seqs = {{*cache.allocate(), 40}, {*cache.allocate(), 7}};
  batch.token_ids.assign(a.begin(), a.begin() + 40);
  batch.token_ids.insert(batch.token_ids.end(), b.begin(), b.end());
  batch.logit_rows = {39, 46};
  const torch::Tensor together = model.forward(cache, batch).logits;  // 47 rows: one piece
  EXPECT_LE((together[0] - long_alone[39]).abs().max().item<double>(), 1e-5);
  EXPECT_LE((together[1] - all_logits(model, b)[6]).abs().max().item<double>(), 1e-5);
  EXPECT_LE((long_alone - libtorch_path_logits(model, a)).abs().max().item<double>(), 1e-5);
}

// A prompt longer than kSmallBatchRows runs as pieces through the rows path (3 pieces here, the
// second sequence straddling two of them). Each token's logits, captured layer and final hidden
// state are then the same bits as decoding the prompt one token at a time, and within 1e-4 of
// the libtorch path (what other devices run).
TEST(Forward, LongPrefillEqualsTokenByTokenDecodeBitwise) {
  torch::NoGradGuard no_grad;
  Transformer model = Transformer::load(fixture("tiny-qwen3-untied").string(), {WeightDType::kF32});
  const int64_t vocab = model.config().vocab_size;
  const std::vector<int64_t> a = iota_ids(100, 3, vocab), b = iota_ids(50, 9, vocab);
  ASSERT_GT(a.size() + b.size(), 2 * static_cast<size_t>(kSmallBatchRows));

  KvCache cache = model.make_cache(2, 128);
  ForwardBatch batch;
  batch.seqs = {{*cache.allocate(), 100}, {*cache.allocate(), 50}};
  batch.token_ids = a;
  batch.token_ids.insert(batch.token_ids.end(), b.begin(), b.end());
  for (int64_t r = 149; r >= 0; r -= 7) batch.logit_rows.push_back(r);  // any order
  batch.capture_layers = {1};
  batch.capture_final_hidden = true;
  const ForwardOutput together = model.forward(cache, batch);
  EXPECT_EQ(cache.length(0), 100);
  EXPECT_EQ(cache.length(1), 50);

  KvCache step_cache = model.make_cache(2, 128);
  std::vector<torch::Tensor> logits, layer, final_hidden;
  for (int64_t slot : {*step_cache.allocate(), *step_cache.allocate()}) {
    for (int64_t id : slot == 0 ? a : b) {
      ForwardBatch step;
      step.token_ids = {id};
      step.seqs = {{slot, 1}};
      step.logit_rows = {0};
      step.capture_layers = {1};
      step.capture_final_hidden = true;
      ForwardOutput out = model.forward(step_cache, step);
      logits.push_back(out.logits);
      layer.push_back(out.layer_hidden[0]);
      final_hidden.push_back(out.final_hidden);
    }
  }
  const torch::Tensor rows = torch::tensor(batch.logit_rows);
  EXPECT_TRUE(torch::equal(together.logits, torch::cat(logits).index_select(0, rows)));
  EXPECT_TRUE(torch::equal(together.layer_hidden[0], torch::cat(layer)));
  EXPECT_TRUE(torch::equal(together.final_hidden, torch::cat(final_hidden)));
  // Different summation orders over 100 positions: the fixtures' tolerance.
  EXPECT_LE((all_logits(model, a) - libtorch_path_logits(model, a)).abs().max().item<double>(), 1e-4);
}

TEST(Forward, RejectsOutOfRangeTokenIds) {
  torch::NoGradGuard no_grad;
  Transformer model = Transformer::load(fixture("tiny-qwen3-tied").string(), {WeightDType::kF32});
  KvCache cache = model.make_cache(1, 8);
  const int64_t slot = *cache.allocate();
  EXPECT_THROW(model.prefill(cache, slot, {1, model.config().vocab_size}), Error);
  EXPECT_EQ(cache.length(slot), 0);  // nothing committed by a failed forward
  EXPECT_THROW(model.prefill(cache, slot, std::vector<int64_t>(9, 1)), Error);  // over capacity
}

// Two chunks of one slot in a batch would both be written at the slot's next positions, the second
// over the first: refused, naming the slot, and nothing is committed.
TEST(Forward, RejectsASlotTwiceInOneBatch) {
  torch::NoGradGuard no_grad;
  Transformer model = Transformer::load(fixture("tiny-qwen3-tied").string(), {WeightDType::kF32});
  KvCache cache = model.make_cache(2, 8);
  const int64_t slot = *cache.allocate();
  ForwardBatch batch;
  batch.token_ids = {1, 2, 3};
  batch.seqs = {{slot, 2}, {slot, 1}};
  try {
    model.forward(cache, batch);
    FAIL() << "a slot twice in one batch was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("slot " + std::to_string(slot) + " appears twice"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(cache.length(slot), 0);
}

}  // namespace
}  // namespace dspark::model
