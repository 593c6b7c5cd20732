// dspark model init: a random-weight checkpoint in Hugging Face layout (tests, benchmarks).
// dspark model quantize: a checkpoint written as a GGUF file (gguf_export.h).
#include <filesystem>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/error.h"
#include "draft/draft_init.h"
#include "model/gguf_export.h"
#include "model/model_init.h"
#include "tokenizer/tokenizer.h"

namespace dspark::cli {

namespace {

struct InitArgs {
  std::string config_path, out_dir, tokenizer;
  uint64_t seed = 0;
  int64_t max_shard_mb = 0;
};

void run_init(const InitArgs& args) {
  const model::ModelConfig config = model::ModelConfig::load(args.config_path);
  model::write_random_checkpoint(config, args.out_dir, {args.seed, args.max_shard_mb * 1024 * 1024});
  if (!args.tokenizer.empty()) {
    // A tokenizer makes the random model usable with --prompt; copy its files beside the weights.
    std::filesystem::path src(args.tokenizer);
    if (!std::filesystem::is_directory(src)) src = src.parent_path();
    for (const char* name : {"tokenizer.json", "tokenizer_config.json"})
      if (std::filesystem::exists(src / name))
        std::filesystem::copy_file(src / name, std::filesystem::path(args.out_dir) / name,
                                   std::filesystem::copy_options::overwrite_existing);
  }
}

struct InitDrafterArgs {
  std::string target_dir, method = "dspark", out_dir, markov_head = "vanilla";
  uint64_t seed = 0;
  int64_t layers = 0, block_size = 7, markov_rank = 0, mask_token_id = -1;
};

void run_init_drafter(const InitDrafterArgs& args) {
  torch::NoGradGuard no_grad;
  const model::Transformer target = model::Transformer::load(args.target_dir, {model::WeightDType::kBF16});
  draft::DrafterInitOptions options;
  options.method = draft::parse_method(args.method);
  options.n_layers = args.layers;
  options.block_size = args.block_size;
  options.markov_rank = args.markov_rank;
  options.markov_head = draft::parse_markov_head(args.markov_head);
  options.mask_token_id = args.mask_token_id;
  const std::filesystem::path tokenizer_file = std::filesystem::path(args.target_dir) / "tokenizer.json";
  if (options.mask_token_id < 0 && std::filesystem::exists(tokenizer_file))
    if (auto id = tokenizer::Tokenizer::load(tokenizer_file).token_to_id("<|mask|>")) options.mask_token_id = *id;
  const draft::DraftConfig config = draft::make_draft_config(target.config(), options);
  draft::write_random_drafter(target, config, args.out_dir, args.seed);
}

struct QuantizeArgs {
  std::string model_dir, type, out_path;
};

void run_quantize(const QuantizeArgs& args) {
  const std::optional<model::GgmlType> type = model::parse_ggml_type(args.type);
  if (!type) throw Error("--type: expected q8_0, q4_0, f16, bf16 or f32, got '" + args.type + "'");
  if (!std::filesystem::is_directory(args.model_dir))
    throw Error(args.model_dir + ": --model must be a Hugging Face model directory (config.json, *.safetensors); "
                "a GGUF file is not quantized again");
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(args.model_dir, ec))
    if (std::filesystem::equivalent(entry.path(), args.out_path, ec))
      throw Error("--out " + args.out_path + " is " + entry.path().filename().string() +
                  " of the checkpoint being read; write the GGUF file elsewhere");
  model::export_gguf(args.model_dir, *type, args.out_path);
}

}  // namespace

void register_model(CLI::App& app) {
  CLI::App* model_cmd = app.add_subcommand("model", "model files");
  model_cmd->require_subcommand(1);
  auto args = std::make_shared<InitArgs>();
  CLI::App* init = model_cmd->add_subcommand("init", "write a random-weight checkpoint in Hugging Face layout");
  init->add_option("--config", args->config_path, "config.json to instantiate")->required();
  init->add_option("--out", args->out_dir, "output directory")->required();
  init->add_option("--seed", args->seed, "random seed")->check(at_least(0));
  init->add_option("--max-shard-mb", args->max_shard_mb, "write sharded safetensors of at most this many MB");
  init->add_option("--tokenizer", args->tokenizer, "tokenizer.json (or its directory) to copy beside the weights");
  init->callback([args] { run_init(*args); });

  auto q = std::make_shared<QuantizeArgs>();
  CLI::App* quantize = model_cmd->add_subcommand("quantize", "write a checkpoint as a GGUF file (llama.cpp's format)");
  quantize->add_option("--model", q->model_dir, "model directory (config.json, *.safetensors, tokenizer.json)")->required();
  quantize->add_option("--type", q->type, "q8_0 | q4_0 | f16 | bf16 | f32 (type of every matrix; norms stay f32)")->required();
  quantize->add_option("--out", q->out_path, "output .gguf file")->required()
      ->check(writable_file());
  quantize->callback([q] { run_quantize(*q); });

  auto d = std::make_shared<InitDrafterArgs>();
  CLI::App* init_drafter = model_cmd->add_subcommand("init-drafter", "write a random-init drafter for a target (DeepSpec layout)");
  init_drafter->add_option("--target", d->target_dir, "target model directory")->required();
  init_drafter->add_option("--method", d->method, "dspark | dflash | eagle3")->capture_default_str();
  init_drafter->add_option("--out", d->out_dir, "output directory")->required();
  init_drafter->add_option("--seed", d->seed, "random seed")->check(at_least(0));
  init_drafter->add_option("--layers", d->layers, "draft layers (default: 1 for eagle3; 5 on targets of 24+ layers, else 2)");
  init_drafter->add_option("--block-size", d->block_size, "DSpark/DFlash block size (drafts per round)")->capture_default_str();
  init_drafter->add_option("--markov-rank", d->markov_rank, "DSpark Markov head rank (default: min(256, hidden / 8))");
  init_drafter->add_option("--markov-head", d->markov_head, "vanilla | rnn")->capture_default_str();
  init_drafter->add_option("--mask-token-id", d->mask_token_id, "mask token (default: the tokenizer's <|mask|>, else vocab - 1)");
  init_drafter->callback([d] { run_init_drafter(*d); });
}

}  // namespace dspark::cli
