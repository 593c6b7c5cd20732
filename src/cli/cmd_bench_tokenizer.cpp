// dspark bench tokenizer: encode throughput (bench/tokenizer_bench.h).
#include <cstdio>
#include <memory>

#include "bench/tokenizer_bench.h"
#include "cli/commands.h"
#include "common/error.h"

namespace dspark::cli {
namespace {

struct BenchTokenizerArgs {
  std::string tokenizer_path;
  std::string file;      // corpus file; empty: build one from the data directory
  std::string data_dir;  // shared/data; empty: search for it
  double corpus_mb = 4.0;
  int runs = 5;
  bool json_output = false;
};

void run(const BenchTokenizerArgs& a) {
  if (a.runs < 1) throw Error("--runs must be at least 1");
  const std::string corpus =
      !a.file.empty() ? bench::read_whole_file(a.file)
                      : bench::build_corpus(a.data_dir.empty() ? bench::find_data_dir() : std::filesystem::path(a.data_dir),
                                            static_cast<size_t>(a.corpus_mb * 1e6));
  if (corpus.empty()) throw Error("the benchmark corpus is empty");
  const bench::TokenizerBenchResult r = bench::measure_encode(a.tokenizer_path, corpus, a.runs);
  // The summary line; with --json it goes to stderr, so stdout stays one JSON object.
  std::fprintf(a.json_output ? stderr : stdout,
               "tokenizer encode: %.2f MB/s, %.0f tokens/s (median of %d runs over %.2f MB, %zu tokens; "
               "first run %.2f MB/s; load %.3f s)\n",
               r.mb_per_s(), r.tokens_per_s(), a.runs, static_cast<double>(r.bytes) / 1e6, r.tokens,
               static_cast<double>(r.bytes) / 1e6 / r.cold_s, r.load_s);
  if (a.json_output) std::printf("%s\n", bench::to_json(r, a.runs).dump().c_str());
  std::fflush(stdout);
}

}  // namespace

void register_bench_tokenizer(CLI::App& bench) {
  auto a = std::make_shared<BenchTokenizerArgs>();
  CLI::App* cmd = bench.add_subcommand("tokenizer", "encode throughput in MB/s (median after a warm-up)");
  cmd->add_option("--tokenizer", a->tokenizer_path, "tokenizer.json or the directory holding it")->required();
  cmd->add_option("--file", a->file, "corpus file (default: a corpus built from shared/data)")->check(CLI::ExistingFile);
  cmd->add_option("--data", a->data_dir, "data directory to build the corpus from (default: shared/data)");
  cmd->add_option("--mb", a->corpus_mb, "size of the built corpus in MB (default 4)");
  cmd->add_option("--runs", a->runs, "timed runs after the warm-up (default 5)");
  cmd->add_flag("--json", a->json_output, "print one JSON object on stdout");
  cmd->callback([a] { run(*a); });
}

}  // namespace dspark::cli
