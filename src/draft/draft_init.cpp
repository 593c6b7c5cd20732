#include "draft/draft_init.h"

#include <filesystem>

#include "common/error.h"
#include "common/json_file.h"
#include "model/safetensors.h"
#include "tokenizer/tokenizer.h"

namespace dspark::draft {

DraftConfig make_draft_config(const model::ModelConfig& target, const DrafterInitOptions& o) {
  DraftConfig c;
  c.method = o.method;
  c.backbone = target;
  c.num_target_layers = target.n_layers;
  c.target_layer_ids = o.target_layer_ids.empty() ? default_target_layer_ids(target.n_layers) : o.target_layer_ids;
  const bool eagle3 = o.method == DraftMethod::kEagle3;
  c.backbone.n_layers = o.n_layers > 0 ? o.n_layers : eagle3 ? 1 : target.n_layers >= 24 ? 5 : 2;
  c.backbone.tie_word_embeddings = false;
  c.block_size = o.block_size;
  c.ttt_length = o.block_size;  // EAGLE-3 drafts (and is trained over) as many steps as a block has slots
  c.mask_token_id = o.mask_token_id >= 0 ? o.mask_token_id : target.vocab_size - 1;
  if (o.method == DraftMethod::kDSpark) {
    c.markov_rank = o.markov_rank > 0 ? o.markov_rank : std::min<int64_t>(256, target.hidden_size / 8);
    c.markov_head = o.markov_head;
    c.confidence_head = true;
    c.confidence_with_markov = true;
  }
  // Round-trip through JSON so the same checks apply as to a loaded checkpoint.
  return DraftConfig::from_json(c.to_json(), "drafter config");
}

std::vector<std::pair<std::string, torch::Tensor>> random_drafter_tensors(const model::Transformer& target,
                                                                         const DraftConfig& c, uint64_t seed) {
  const model::ModelConfig& b = c.backbone;
  const int64_t d = b.hidden_size, V = b.vocab_size, hd = b.head_dim, m = static_cast<int64_t>(c.target_layer_ids.size());
  const int64_t q_dim = b.n_heads * hd, kv_dim = b.n_kv_heads * hd, I = b.intermediate_size, r = c.markov_rank;
  const bool eagle3 = c.method == DraftMethod::kEagle3;
  const int64_t attn_in = eagle3 ? 2 * d : d;
  const double stddev = b.raw.value("initializer_range", 0.02);
  at::Generator gen = at::detail::createCPUGenerator(seed);

  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  auto random = [&](const std::string& name, std::vector<int64_t> shape) {
    tensors.emplace_back(name, torch::randn(shape, gen) * stddev);
  };
  auto ones = [&](const std::string& name, int64_t n) { tensors.emplace_back(name, torch::ones({n})); };
  tensors.emplace_back("embed_tokens.weight", target.embedding().to(torch::kCPU));
  random("fc.weight", {d, m * d});
  if (!eagle3) ones("hidden_norm.weight", d);
  for (int64_t l = 0; l < b.n_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    if (eagle3) ones(p + "hidden_norm.weight", d);
    ones(p + "input_layernorm.weight", d);
    random(p + "self_attn.q_proj.weight", {q_dim, attn_in});
    random(p + "self_attn.k_proj.weight", {kv_dim, attn_in});
    random(p + "self_attn.v_proj.weight", {kv_dim, attn_in});
    random(p + "self_attn.o_proj.weight", {d, q_dim});
    if (b.qk_norm) {
      ones(p + "self_attn.q_norm.weight", hd);
      ones(p + "self_attn.k_norm.weight", hd);
    }
    ones(p + "post_attention_layernorm.weight", d);
    random(p + "mlp.gate_proj.weight", {I, d});
    random(p + "mlp.up_proj.weight", {I, d});
    random(p + "mlp.down_proj.weight", {d, I});
  }
  ones("norm.weight", d);
  tensors.emplace_back("lm_head.weight", target.lm_head_weight().to(torch::kCPU));
  if (r > 0) {
    random("markov_head.markov_w1.weight", {V, r});
    random("markov_head.markov_w2.weight", {V, r});
    if (c.markov_head == MarkovHead::kRnn) {
      random("markov_head.joint_proj.weight", {3 * r, 2 * r + d});
      tensors.emplace_back("markov_head.joint_proj.bias", torch::zeros({3 * r}));
    }
  }
  if (c.confidence_head) {
    random("confidence_head.proj.weight", {1, c.confidence_with_markov ? d + r : d});
    tensors.emplace_back("confidence_head.proj.bias", torch::zeros({1}));
  }

  return tensors;
}

void write_drafter(const DraftConfig& c, const std::vector<std::pair<std::string, torch::Tensor>>& named,
                   const std::string& out_dir) {
  std::filesystem::create_directories(out_dir);
  std::vector<torch::Tensor> tensors;
  std::vector<model::TensorToWrite> to_write;
  for (const auto& [name, value] : named) {
    const torch::Tensor& t = tensors.emplace_back(value.detach().to(torch::kCPU, torch::kBFloat16).contiguous());
    to_write.push_back({name, model::DType::kBF16, std::vector<int64_t>(t.sizes().begin(), t.sizes().end()),
                        t.data_ptr(), static_cast<size_t>(t.numel() * 2)});
  }
  model::write_safetensors((std::filesystem::path(out_dir) / "model.safetensors").string(), to_write);
  nlohmann::json json = c.to_json();
  json["torch_dtype"] = "bfloat16";
  write_json_file(std::filesystem::path(out_dir) / "config.json", json);
}

void write_random_drafter(const model::Transformer& target, const DraftConfig& c, const std::string& out_dir,
                          uint64_t seed) {
  write_drafter(c, random_drafter_tensors(target, c, seed), out_dir);
}

}  // namespace dspark::draft
