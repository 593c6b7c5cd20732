// dspark data regenerate: the target writes the answers of the training conversations, which its
// drafters then learn from (train/regenerate.h).
#include <cstdio>
#include <memory>
#include <string>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/error.h"
#include "train/regenerate.h"

namespace dspark::cli {
namespace {

struct RegenerateArgs {
  std::string target_dir, corpus_dir, out_file, dtype = "auto";
  train::RegenerateOptions options;
};

void run_regenerate(RegenerateArgs& args) {
  if (args.target_dir.empty()) args.target_dir = default_model_dir();
  const std::optional<tokenizer::Tokenizer> tok = load_tokenizer_if_present(args.target_dir);
  if (!tok) throw Error(args.target_dir + ": no tokenizer.json (regenerate renders chat prompts)");
  args.options.corpus_file = std::filesystem::path(args.corpus_dir) / "train.jsonl";
  args.options.out_file = args.out_file;
  model::Transformer target = model::Transformer::load(args.target_dir, {parse_weight_dtype(args.dtype)});
  const train::RegenerateSummary s = train::regenerate(target, *tok, args.options);
  std::printf("regenerate: %lld conversations written (%lld already there, %lld dropped), %lld tokens in %.0f s (%.0f tok/s) -> %s\n",
              static_cast<long long>(s.conversations), static_cast<long long>(s.skipped),
              static_cast<long long>(s.dropped), static_cast<long long>(s.generated_tokens), s.seconds,
              s.seconds > 0 ? static_cast<double>(s.generated_tokens) / s.seconds : 0.0, args.out_file.c_str());
}

}  // namespace

void register_data_regenerate(CLI::App& data) {
  auto args = std::make_shared<RegenerateArgs>();
  train::RegenerateOptions& o = args->options;
  CLI::App* cmd = data.add_subcommand(
      "regenerate", "the target writes the answers of the training conversations (drafter training data)");
  cmd->add_option("--target", args->target_dir, "target model directory (default: the shipped default model)");
  cmd->add_option("--corpus", args->corpus_dir, "corpus directory of `dspark data corpus` (its train.jsonl is used)")->required();
  cmd->add_option("--out", args->out_file, "output JSONL, appended; conversations already in it are skipped")->required()
      ->check(writable_file());
  cmd->add_option("--temperature", o.sampling.temperature, "sampling temperature (DeepSpec's Qwen3 recipe: 0.7)");
  cmd->add_option("--top-p", o.sampling.top_p, "top-p (0.8)");
  cmd->add_option("--top-k", o.sampling.top_k, "top-k (20)");
  cmd->add_option("--seed", o.sampling.seed, "conversation i samples with seed + i (0)")->check(at_least(0));
  cmd->add_option("--max-new-tokens", o.max_new_tokens, "tokens per answer; a cut answer ends the conversation (512)")
      ->check(at_least(1));
  cmd->add_option("--max-length", o.max_length, "tokens per conversation (1024)")
      ->check(at_least(2));
  cmd->add_option("--batch", o.batch, "conversations decoded together (16)")
      ->check(at_least(1));
  cmd->add_option("--limit", o.limit, "only the first N conversations of train.jsonl (0: all)")
      ->check(at_least(0));
  add_dtype_option(cmd, args->dtype, "target weights");
  cmd->callback([args] { run_regenerate(*args); });
}

}  // namespace dspark::cli
