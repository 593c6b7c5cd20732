// The DSpark drafter network's pieces: the training block mask and the Markov head's two entry
// points (block / teacher-forced and step / sequential). The two modes of the whole network are
// checked against each other in tests/train/test_drafter_training.cpp, its two executions in
// test_dspark_reference.cpp.
#include <gtest/gtest.h>

#include "draft/draft_init.h"
#include "draft/drafter_weights.h"
#include "draft/dspark_network.h"
#include "draft/markov_head.h"
#include "test_util.h"

namespace dspark {
namespace {

const std::filesystem::path kTarget = test::fixture("tiny-qwen3-tied");

TEST(BlockAttentionMask, ContextBeforeTheAnchorAndTheWholeBlock) {
  const torch::Tensor m = draft::block_attention_mask({1, 3}, 4, 2);  // [4, 4 + 4]
  ASSERT_EQ(m.sizes(), (std::vector<int64_t>{4, 8}));
  const std::vector<std::vector<int>> expected = {
      {1, 0, 0, 0, 1, 1, 0, 0},  // block 0 (anchor 1), slot 0: context position 0, its own block
      {1, 0, 0, 0, 1, 1, 0, 0},
      {1, 1, 1, 0, 0, 0, 1, 1},  // block 1 (anchor 3): context 0..2
      {1, 1, 1, 0, 0, 0, 1, 1}};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) EXPECT_EQ(m[i][j].item<bool>(), expected[i][j] == 1) << i << "," << j;
}

// Teacher forcing with the previous tokens a chain would have drawn gives, slot for slot, the bias
// the sequential entry point adds while drafting (3 blocks of 4 slots, fixed seeds).
TEST(MarkovHead, BlockEqualsStepBySteps) {
  torch::NoGradGuard no_grad;
  model::Transformer target = model::Transformer::load(kTarget.string(), {model::WeightDType::kF32});
  test::TempDir dir;
  for (draft::MarkovHead kind : {draft::MarkovHead::kVanilla, draft::MarkovHead::kRnn}) {
    const bool rnn = kind == draft::MarkovHead::kRnn;
    SCOPED_TRACE(rnn ? "rnn" : "vanilla");
    draft::DrafterInitOptions init{.method = draft::DraftMethod::kDSpark, .seed = 4, .block_size = 4, .markov_head = kind};
    const draft::DraftConfig config = draft::make_draft_config(target.config(), init);
    auto tensors = draft::random_drafter_tensors(target, config, 4);
    for (auto& [name, t] : tensors)  // larger matrices, so that the RNN state matters
      if (t.dim() == 2 && name != "embed_tokens.weight" && name != "lm_head.weight") t = t * 5.0;
    const std::string path = dir.file(rnn ? "rnn" : "vanilla");
    draft::write_drafter(config, tensors, path);
    const draft::MarkovHeadModule head(
        config, draft::DrafterWeights(path, target, model::WeightDType::kF32, kernels::Bf16Math::kExact));
    ASSERT_TRUE(head.enabled());

    const int64_t n = 3, B = 4, d = config.backbone.hidden_size, vocab = config.backbone.vocab_size;
    torch::manual_seed(11);
    const torch::Tensor prev = torch::randint(vocab, {n, B}, torch::kLong);  // [n, B]
    const torch::Tensor hidden = torch::randn({n, B, d});                   // [n, B, d]
    const torch::Tensor block = head.block(head.w1_rows(prev.view({-1})).view({n, B, -1}), hidden);  // [n, B, V]
    ASSERT_EQ(block.sizes(), (std::vector<int64_t>{n, B, vocab}));

    torch::Tensor state = head.initial_state(n, hidden.options());
    for (int64_t k = 0; k < B; ++k) {
      torch::Tensor logits = torch::zeros({n, vocab});
      const torch::Tensor prev_k = prev.select(1, k).contiguous();
      head.step(logits, std::vector<int64_t>(prev_k.data_ptr<int64_t>(), prev_k.data_ptr<int64_t>() + n),
                hidden.select(1, k), state);
      EXPECT_LT((logits - block.select(1, k)).abs().max().item<double>(), 1e-4) << "slot " << k;
    }
    // The RNN head's later slots depend on the earlier ones: slot 1 alone (a fresh state) differs.
    const torch::Tensor alone = head.block(head.w1_rows(prev.select(1, 1)).unsqueeze(1), hidden.narrow(1, 1, 1));
    const double carried = (alone.select(1, 0) - block.select(1, 1)).abs().max().item<double>();
    if (rnn) {
      EXPECT_GT(carried, 1e-3);
    } else {
      EXPECT_LT(carried, 1e-5);
    }
  }
}

}  // namespace
}  // namespace dspark
