#include "cli/commands.h"

namespace dspark::cli {

void register_bench(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "benchmarks (machine-readable with --json)");
  bench->require_subcommand(1);
  register_bench_forward(*bench);
  register_bench_kernels(*bench);
  register_bench_dtypes(*bench);
  register_bench_tokenizer(*bench);
  register_bench_draft(*bench);
  register_bench_accept(*bench);
  register_bench_speedup(*bench);
  register_bench_serve(*bench);
}

}  // namespace dspark::cli
