// Each `dspark` subcommand lives in its own cmd_<name>.cpp and registers itself on the app.
// Commands stay thin: parse flags, call the library, print. Errors are thrown as dspark::Error and
// reported by main() as one line on stderr with a non-zero exit.
#pragma once
#include <CLI/CLI.hpp>

namespace dspark::cli {

void register_tokenize(CLI::App& app);        // dspark tokenize
void register_logits(CLI::App& app);          // dspark logits
void register_generate(CLI::App& app);        // dspark generate
void register_model(CLI::App& app);           // dspark model init
void register_bench(CLI::App& app);           // dspark bench forward|tokenizer
void register_train(CLI::App& app);           // dspark train tokenizer|...
void register_data(CLI::App& app);            // dspark data corpus|...
void register_eval(CLI::App& app);            // dspark eval loss
void register_draft(CLI::App& app);           // dspark draft
void register_calibrate(CLI::App& app);       // dspark calibrate
void register_profile(CLI::App& app);         // dspark profile
void register_serve(CLI::App& app);           // dspark serve

// bench subcommands, registered on the `bench` app by register_bench
void register_bench_forward(CLI::App& bench);
void register_bench_kernels(CLI::App& bench);
void register_bench_dtypes(CLI::App& bench);
void register_bench_tokenizer(CLI::App& bench);
void register_bench_draft(CLI::App& bench);
void register_bench_accept(CLI::App& bench);
void register_bench_speedup(CLI::App& bench);
void register_bench_serve(CLI::App& bench);

// train subcommands, registered on the `train` app by register_train
void register_train_tokenizer(CLI::App& train);
void register_train_target(CLI::App& train);
void register_train_drafter(CLI::App& train);
void register_train_confidence(CLI::App& train);

// data subcommands beyond `corpus`, registered on the `data` app by register_data
void register_data_regenerate(CLI::App& data);

}  // namespace dspark::cli
