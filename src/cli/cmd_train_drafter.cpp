// dspark train drafter: train a DSpark, DFlash or EAGLE-3 drafter for a target on regenerated data (see
// train/drafter_trainer.h).
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "train/drafter_trainer.h"

namespace dspark::cli {

void register_train_drafter(CLI::App& train) {
  auto o = std::make_shared<train::DrafterTrainOptions>();
  struct Flags {
    std::string target, method = "dspark", markov_head = "vanilla";
    bool no_resume = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = train.add_subcommand("drafter", "train a DSpark, DFlash or EAGLE-3 drafter on data from `dspark data regenerate`");
  cmd->add_option("--target", f->target, "target model directory (default: the shipped default model)");
  cmd->add_option("--method", f->method, "dspark | dflash | eagle3")->capture_default_str();
  cmd->add_option("--data", o->data_file, "regenerated.jsonl from `dspark data regenerate`")->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--out", o->out_dir, "run directory: checkpoints/, log.jsonl, model/")->required();
  cmd->add_option("--layers", o->init.n_layers, "draft layers (default: EAGLE-3 1; DSpark / DFlash 5 on targets of 24+ layers, else 2)")
      ->check(at_least(1));
  cmd->add_option("--block-size", o->init.block_size, "slots per block (gamma); EAGLE-3: training-time-test steps")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--markov-rank", o->init.markov_rank, "DSpark Markov head rank (default: min(256, hidden / 8))")
      ->check(at_least(1));
  cmd->add_option("--markov-head", f->markov_head, "DSpark Markov head: vanilla | rnn")->capture_default_str();
  cmd->add_option("--init-seed", o->init.seed, "seed of the initial weights")->capture_default_str();
  cmd->add_option("--epochs", o->epochs, "passes over the training conversations")->capture_default_str()
      ->check(above(0));
  cmd->add_option("--max-steps", o->max_steps, "stop after this many steps (schedule unchanged; 0: run to the end)")
      ->check(at_least(0));
  cmd->add_option("--batch", o->batch_size, "conversations per step")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--anchors", o->max_anchors, "blocks sampled per conversation")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--lr", o->peak_lr, "peak learning rate")->capture_default_str()
      ->check(above(0));
  cmd->add_option("--warmup-ratio", o->warmup_ratio, "share of the steps in linear warmup")->capture_default_str()
      ->check(between(0, 1));
  cmd->add_option("--clip", o->grad_clip, "gradient-norm clip")->capture_default_str()
      ->check(above(0));
  cmd->add_option("--seed", o->seed, "seed of the data order and the anchors")->capture_default_str()->check(at_least(0));
  cmd->add_option("--valid-percent", o->valid_percent, "conversations held out for validation")->capture_default_str()
      ->check(between(0, 99));
  cmd->add_option("--valid-sequences", o->valid_sequences, "held-out conversations per validation")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--save-every", o->save_every, "steps between checkpoints")->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--eval-every", o->eval_every, "steps between validations")->capture_default_str()
      ->check(at_least(1));
  cmd->add_flag("--bf16-autocast", o->bf16_autocast,
                "matrix products in bf16 (CPU autocast); weights, optimizer and losses stay f32");
  cmd->add_option("--feature-cache", o->feature_cache_dir,
                  "keep the target's features of each conversation in this directory, so that epochs after the "
                  "first skip the target's forward (the same weights as without; shareable between runs of one "
                  "target, data file and --bf16-autocast setting)");
  cmd->add_flag("--no-resume", f->no_resume, "start afresh even if --out holds checkpoints");
  cmd->callback([o, f] {
    o->target_dir = f->target.empty() ? default_model_dir() : f->target;
    o->init.method = draft::parse_method(f->method);
    o->init.markov_head = draft::parse_markov_head(f->markov_head);
    o->resume = !f->no_resume;
    const train::DrafterTrainResult r = train::train_drafter(*o);
    nlohmann::json summary{{"steps", r.steps},         {"seconds", r.seconds},
                           {"valid_loss", r.valid.loss}, {"valid_tau", r.valid.tau},
                           {"valid_accept_rate", r.valid.accept_rate}, {"model", r.final_dir.string()}};
    std::printf("%s\n", summary.dump().c_str());
  });
}

}  // namespace dspark::cli
