// dspark train target: pretrain the target model on a corpus (see train/target_trainer.h), and
// dspark eval loss: the per-domain validation loss of any model directory on a corpus.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "train/target_trainer.h"

namespace dspark::cli {

void register_train_target(CLI::App& train) {
  auto o = std::make_shared<train::TargetTrainOptions>();
  auto no_resume = std::make_shared<bool>(false);
  CLI::App* cmd = train.add_subcommand("target", "pretrain a target model (Qwen3/Llama architecture) on a corpus");
  cmd->add_option("--config", o->model_config, "config.json of the architecture")->required();
  cmd->add_option("--corpus", o->corpus_dir, "corpus directory (from `dspark data corpus`)")->required();
  cmd->add_option("--tokenizer", o->tokenizer_dir, "tokenizer directory (from `dspark train tokenizer`)")->required();
  cmd->add_option("--out", o->out_dir, "run directory: checkpoints/, log.jsonl, model/")->required();
  cmd->add_option("--seq-len", o->seq_len, "tokens per training window")->capture_default_str()
      ->check(at_least(2));
  cmd->add_option("--batch", o->batch_size, "windows per step")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--epochs", o->epochs, "passes over the train split")->capture_default_str()
      ->check(above(0));
  cmd->add_option("--max-steps", o->max_steps, "stop after this many steps (schedule unchanged; 0: run to the end)")
      ->check(at_least(0));
  cmd->add_option("--lr", o->peak_lr, "peak learning rate")->capture_default_str()
      ->check(above(0));
  cmd->add_option("--min-lr", o->min_lr, "learning rate at the end of the cosine")->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--warmup", o->warmup_steps, "linear warmup steps")->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--weight-decay", o->weight_decay, "AdamW weight decay (matrices only)")->capture_default_str()
      ->check(at_least(0));
  cmd->add_option("--clip", o->grad_clip, "gradient-norm clip")->capture_default_str()
      ->check(above(0));
  cmd->add_option("--seed", o->seed, "seed of the initial weights and the data order")->capture_default_str()->check(at_least(0));
  cmd->add_option("--grow-from", o->grow_from,
                  "start from this trained smaller model, grown into --config's shape (same function)");
  cmd->add_option("--save-every", o->save_every, "steps between checkpoints")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--eval-every", o->eval_every, "steps between validations")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--eval-windows", o->eval_windows, "validation windows per domain")->capture_default_str()
      ->check(at_least(1));
  cmd->add_flag("--bf16-autocast", o->bf16_autocast,
                "matrix products in bf16 (CPU autocast); weights, optimizer and loss stay f32");
  cmd->add_flag("--no-resume", *no_resume, "start afresh even if --out holds checkpoints");
  cmd->callback([o, no_resume] {
    o->resume = !*no_resume;
    const train::TargetTrainResult r = train::train_target(*o);
    nlohmann::json summary{{"steps", r.steps}, {"last_loss", r.last_loss}, {"valid_loss", r.valid_loss},
                           {"seconds", r.seconds}, {"model", r.final_model_dir.string()}};
    std::printf("%s\n", summary.dump().c_str());
  });
}

void register_eval(CLI::App& app) {
  CLI::App* eval = app.add_subcommand("eval", "evaluation: validation loss");
  eval->require_subcommand(1);
  struct Args {
    std::string model, corpus, dtype = "f32";
    int64_t seq_len = 512, windows = 0;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = eval->add_subcommand("loss", "mean next-token loss per domain on a corpus's validation split");
  cmd->add_option("--model", a->model, "model directory (with tokenizer.json) or GGUF file")->required();
  cmd->add_option("--corpus", a->corpus, "corpus directory (from `dspark data corpus`)")->required();
  cmd->add_option("--seq-len", a->seq_len, "tokens per window")->capture_default_str()
      ->check(at_least(2));
  cmd->add_option("--windows", a->windows, "windows per domain (0: all)")->capture_default_str()
      ->check(at_least(0));
  // f32 by default, as the trainer validates; another dtype measures what it costs in quality
  // (a quantized model runs its own kernels here, activations quantized as in decoding).
  add_dtype_option(cmd, a->dtype);
  cmd->callback([a] {
    const auto losses = train::evaluate_target(a->model, a->corpus, a->model, a->seq_len, a->windows,
                                               parse_weight_dtype(a->dtype));
    for (const auto& [domain, loss] : losses) std::printf("%-5s %.4f\n", domain.c_str(), loss);
    std::printf("%s\n", nlohmann::json(losses).dump().c_str());
  });
}

}  // namespace dspark::cli
