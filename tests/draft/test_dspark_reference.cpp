// DSpark's engine path (ragged backbone, draft KV cache, context committed over several calls)
// against a straightforward reference written here from deepspec-spec 2.3-2.9: float64, one
// block from scratch, every context row recomputed, per-slot loops. One block's h, base logits U,
// corrected logits Z, the greedy chain and the confidences must agree within 1e-5.
#include <gtest/gtest.h>

#include <cmath>

#include "draft/dspark_drafter.h"
#include "model/safetensors.h"
#include "test_util.h"

namespace dspark {
namespace {

using torch::Tensor;
const std::filesystem::path kDrafter = test::fixture("deepspec-tiny/dspark");
const std::filesystem::path kTarget = test::fixture("tiny-qwen3-untied");

struct Reference {
  model::SafetensorsArchive archive = model::SafetensorsArchive::open(kDrafter.string());
  draft::DraftConfig config = draft::DraftConfig::load(kDrafter.string());

  Tensor w(const std::string& name) const {
    const model::TensorView& v = archive.get(name);
    return torch::from_blob(const_cast<void*>(v.data), v.shape, torch::kBFloat16).to(torch::kFloat64);
  }
  Tensor rms(const Tensor& x, const Tensor& weight) const {
    return x / torch::sqrt(x.pow(2).mean(-1, true) + config.backbone.rms_norm_eps) * weight;
  }
  // Rotate-half RoPE at integer positions, rows [n, heads, hd].
  Tensor rope(const Tensor& x, int64_t first_position) const {
    const int64_t n = x.size(0), hd = x.size(2), half = hd / 2;
    Tensor out = x.clone();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < half; ++j) {
        const double angle = (first_position + i) * std::pow(config.backbone.rope_theta, -2.0 * j / hd);
        Tensor a = x.select(0, i).select(-1, j), b = x.select(0, i).select(-1, j + half);
        out.select(0, i).select(-1, j).copy_(a * std::cos(angle) - b * std::sin(angle));
        out.select(0, i).select(-1, j + half).copy_(b * std::cos(angle) + a * std::sin(angle));
      }
    return out;
  }

  // features [start, m*d] (all context, positions 0..start-1), anchor at `start`.
  struct Block {
    Tensor h, u, z;
    std::vector<int64_t> tokens;
    std::vector<double> confidence;
  };
  Block draft(const Tensor& features, int64_t anchor) const {
    const model::ModelConfig& c = config.backbone;
    const int64_t start = features.size(0), B = config.block_size, H = c.n_heads, KV = c.n_kv_heads, hd = c.head_dim;
    const Tensor context = rms(torch::matmul(features.to(torch::kFloat64), w("fc.weight").t()), w("hidden_norm.weight"));
    std::vector<int64_t> ids(B, config.mask_token_id);
    ids[0] = anchor;
    Tensor x = w("embed_tokens.weight").index_select(0, torch::tensor(ids));
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const std::string p = "layers." + std::to_string(l) + ".";
      const Tensor a = rms(x, w(p + "input_layernorm.weight"));
      Tensor q = torch::matmul(a, w(p + "self_attn.q_proj.weight").t()).view({B, H, hd});
      q = rope(rms(q, w(p + "self_attn.q_norm.weight")), start);
      const Tensor rows = torch::cat({context, a});  // [start + B, d]: context first
      Tensor k = torch::matmul(rows, w(p + "self_attn.k_proj.weight").t()).view({start + B, KV, hd});
      k = rope(rms(k, w(p + "self_attn.k_norm.weight")), 0);
      const Tensor v = torch::matmul(rows, w(p + "self_attn.v_proj.weight").t()).view({start + B, KV, hd});
      Tensor attn = torch::zeros({B, H * hd}, torch::kFloat64);
      for (int64_t i = 0; i < B; ++i)
        for (int64_t h = 0; h < H; ++h) {
          const int64_t g = h * KV / H;  // repeat-interleave grouping
          const Tensor scores = torch::mv(k.select(1, g), q[i][h]) / std::sqrt(double(hd));
          attn[i].narrow(0, h * hd, hd).copy_(torch::mv(v.select(1, g).t(), torch::softmax(scores, 0)));
        }
      x = x + torch::matmul(attn, w(p + "self_attn.o_proj.weight").t());
      const Tensor m = rms(x, w(p + "post_attention_layernorm.weight"));
      const Tensor gate = torch::matmul(m, w(p + "mlp.gate_proj.weight").t());
      const Tensor up = torch::matmul(m, w(p + "mlp.up_proj.weight").t());
      x = x + torch::matmul(gate * torch::sigmoid(gate) * up, w(p + "mlp.down_proj.weight").t());
    }
    Block out;
    out.h = rms(x, w("norm.weight"));
    out.u = torch::matmul(out.h, w("lm_head.weight").t());
    std::vector<Tensor> z_rows;
    int64_t prev = anchor;
    const Tensor conf_w = w("confidence_head.proj.weight").view({-1});
    const double conf_b = w("confidence_head.proj.bias").item<double>();
    for (int64_t k = 0; k < B; ++k) {
      const Tensor w1 = w("markov_head.markov_w1.weight")[prev];
      const Tensor z = out.u[k] + torch::mv(w("markov_head.markov_w2.weight"), w1);
      out.confidence.push_back(1.0 / (1.0 + std::exp(-(torch::dot(conf_w, torch::cat({out.h[k], w1})).item<double>() + conf_b))));
      prev = z.argmax().item<int64_t>();
      out.tokens.push_back(prev);
      z_rows.push_back(z);
    }
    out.z = torch::stack(z_rows);
    return out;
  }
};

double max_diff(const Tensor& a, const Tensor& b) { return (a.to(torch::kFloat64) - b).abs().max().item<double>(); }

TEST(DSparkReference, BlockAfterSeveralCommitsMatchesAFromScratchReference) {
  torch::NoGradGuard no_grad;
  model::Transformer target = model::Transformer::load(kTarget.string(), {model::WeightDType::kF32});
  const Reference ref;
  // Both executions of the network: the CPU rows kernels and libtorch ops (other devices).
  for (bool tensor_ops : {false, true}) {
    SCOPED_TRACE(tensor_ops ? "libtorch ops" : "rows kernels");
    auto drafter = draft::DSparkDrafter::load(kDrafter.string(), target,
                                              {.max_slots = 2, .capacity = 64, .force_tensor_ops = tensor_ops,
                                               .bf16_math = kernels::Bf16Math::kExact});
    drafter->set_tracing(true);

    // Target features of a 20-token sequence; the drafter sees them in pieces as rounds would.
    std::vector<int64_t> ids(20);
    for (int64_t i = 0; i < 20; ++i) ids[i] = (i * 37 + 11) % 450;
    model::KvCache cache = target.make_cache(1, 32);
    const int64_t target_slot = *cache.allocate();
    model::ForwardOutput out = target.forward(cache, {ids, {{target_slot, 20}}, {}, drafter->target_layer_ids(), false});
    const Tensor features = torch::cat(out.layer_hidden, 1);  // [20, 2d]

    sampling::SamplingParams greedy{.temperature = 0};
    sampling::Rng rng(0);
    // Slot 1 is a second request in the same calls: batching must not change slot 0's block.
    drafter->begin(1, {ids.begin(), ids.begin() + 5}, features.narrow(0, 0, 5));
    drafter->begin(0, {ids.begin(), ids.begin() + 8}, features.narrow(0, 0, 8));
    int64_t start = 8;
    for (int64_t round = 0; round < 3; ++round) {
      const int64_t anchor = ids[start];
      const auto blocks = drafter->propose({{0, anchor, 5, 0.0, &greedy, &rng, true}, {1, 7, 5, 0.0, &greedy, &rng, true}});
      const auto& trace = drafter->last_traces()[0];
      const Reference::Block expected = ref.draft(features.narrow(0, 0, start), anchor);
      SCOPED_TRACE("round " + std::to_string(round));
      EXPECT_LT(max_diff(trace.hidden, expected.h), 1e-5);
      EXPECT_LT(max_diff(trace.base_logits, expected.u), 1e-5);
      EXPECT_LT(max_diff(blocks[0].logits, expected.z), 1e-5);
      EXPECT_EQ(blocks[0].tokens, expected.tokens);
      for (size_t k = 0; k < expected.confidence.size(); ++k) EXPECT_NEAR(blocks[0].confidence[k], expected.confidence[k], 1e-5);
      // Commit 1 + round tokens (anchor + accepted drafts) of the true sequence.
      const int64_t n_commit = 1 + round;
      drafter->commit(0, {ids.begin() + start, ids.begin() + start + n_commit}, features.narrow(0, start, n_commit));
      drafter->commit(1, {7}, features.narrow(0, 5, 1));
      start += n_commit;
    }
  }
}

}  // namespace
}  // namespace dspark
