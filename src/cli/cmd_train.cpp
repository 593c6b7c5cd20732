#include "cli/commands.h"

namespace dspark::cli {

void register_train(CLI::App& app) {
  CLI::App* train = app.add_subcommand("train", "training: tokenizer, target, drafters, a drafter's confidence head");
  train->require_subcommand(1);
  register_train_tokenizer(*train);
  register_train_target(*train);
  register_train_drafter(*train);
  register_train_confidence(*train);
}

}  // namespace dspark::cli
