// dspark model init: a random-weight checkpoint in Hugging Face layout (tests, benchmarks).
#include <filesystem>

#include "cli/commands.h"
#include "common/error.h"
#include "model/model_init.h"

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

}  // namespace

void register_model(CLI::App& app) {
  CLI::App* model_cmd = app.add_subcommand("model", "model files");
  model_cmd->require_subcommand(1);
  auto args = std::make_shared<InitArgs>();
  CLI::App* init = model_cmd->add_subcommand("init", "write a random-weight checkpoint in Hugging Face layout");
  init->add_option("--config", args->config_path, "config.json to instantiate")->required();
  init->add_option("--out", args->out_dir, "output directory")->required();
  init->add_option("--seed", args->seed, "random seed");
  init->add_option("--max-shard-mb", args->max_shard_mb, "write sharded safetensors of at most this many MB");
  init->add_option("--tokenizer", args->tokenizer, "tokenizer.json (or its directory) to copy beside the weights");
  init->callback([args] { run_init(*args); });
}

}  // namespace dspark::cli
