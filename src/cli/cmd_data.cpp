// dspark data corpus: build the training corpus (train.jsonl, valid.jsonl, stats.json) from the
// train-only files of shared/data and the machine's Python standard library.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "common/error.h"
#include "train/corpus.h"

namespace dspark::cli {
namespace {

namespace fs = std::filesystem;

struct CorpusArgs {
  std::string out_dir;
  std::string data_dir;  // empty: find shared/data
  uint64_t seed = 1234;
  double valid_fraction = 0.02;
  size_t min_valid = 8;
  std::optional<size_t> python_stdlib_bytes;
  std::string python_stdlib_dir;
  size_t python_max_file_bytes = 200'000;
  double math_instruction_fraction = 0.5;
};

// --data, else $DSPARK_SHARED_DIR/data, else ../shared/data beside the source tree, else a
// shared/data found above the working directory or the executable.
fs::path resolve_data_dir(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* shared = std::getenv("DSPARK_SHARED_DIR")) {
    const fs::path dir = fs::path(shared) / "data";
    if (!fs::is_directory(dir)) throw Error(dir.string() + ": no data directory under $DSPARK_SHARED_DIR");
    return dir;
  }
  std::error_code ignored;
#ifdef DSPARK_DEFAULT_MODEL_DIR
  {
    const fs::path repo = fs::path(DSPARK_DEFAULT_MODEL_DIR).parent_path().parent_path();
    const fs::path dir = repo.parent_path() / "shared" / "data";
    if (fs::is_directory(dir, ignored)) return dir;
  }
#endif
  for (fs::path start : {fs::current_path(), fs::read_symlink("/proc/self/exe", ignored).parent_path()}) {
    for (fs::path dir = start; !dir.empty(); dir = dir.parent_path()) {
      if (fs::is_directory(dir / "shared" / "data", ignored)) return dir / "shared" / "data";
      if (dir == dir.root_path()) break;
    }
  }
  throw Error("shared/data not found beside the source tree or above the working directory; pass --data");
}

void print_summary(const train::Corpus& corpus, const fs::path& out_dir) {
  std::printf("%-20s %-5s %9s %9s %10s %10s %6s %6s %6s\n", "source", "dom", "train", "valid", "train MB",
              "valid MB", "dups", "skip", "excl");
  for (const train::SourceStats& s : corpus.sources) {
    std::printf("%-20s %-5s %9zu %9zu %10.2f %10.2f %6zu %6zu %6zu\n", s.name.c_str(),
                std::string(train::domain_name(s.domain)).c_str(), s.train.records, s.valid.records,
                static_cast<double>(s.train.bytes) / 1e6, static_cast<double>(s.valid.bytes) / 1e6, s.duplicates,
                s.skipped, s.excluded);
  }
  const auto train_stats = corpus.domain_stats(false);
  const auto valid_stats = corpus.domain_stats(true);
  for (const auto& [domain, t] : train_stats) {
    const train::SplitStats& v = valid_stats.at(domain);
    std::printf("%-20s %-5s %9zu %9zu %10.2f %10.2f\n", ("domain " + domain).c_str(), domain.c_str(), t.records,
                v.records, static_cast<double>(t.bytes) / 1e6, static_cast<double>(v.bytes) / 1e6);
  }
  std::printf("python stdlib: %s (cap %.2f MB)\n",
              corpus.python_stdlib_dir.empty() ? "none" : corpus.python_stdlib_dir.c_str(),
              static_cast<double>(corpus.python_stdlib_cap) / 1e6);
  std::printf("wrote %s/{train.jsonl,valid.jsonl,stats.json} (seed %llu)\n", out_dir.c_str(),
              static_cast<unsigned long long>(corpus.seed));
}

void run_corpus(const CorpusArgs& args) {
  train::CorpusOptions options;
  options.data_dir = resolve_data_dir(args.data_dir);
  options.seed = args.seed;
  options.valid_fraction = args.valid_fraction;
  options.min_valid_per_source = args.min_valid;
  options.python_stdlib_bytes = args.python_stdlib_bytes;
  if (!args.python_stdlib_dir.empty()) options.python_stdlib_dir = fs::path(args.python_stdlib_dir);
  options.python_max_file_bytes = args.python_max_file_bytes;
  options.math_instruction_fraction = args.math_instruction_fraction;
  std::fprintf(stderr, "data corpus: reading %s\n", options.data_dir.c_str());
  const train::Corpus corpus = train::build_corpus(options);
  train::write_corpus(corpus, args.out_dir);
  print_summary(corpus, args.out_dir);
  std::fflush(stdout);
}

}  // namespace

void register_data(CLI::App& app) {
  CLI::App* data = app.add_subcommand("data", "training data: corpus, regenerate");
  data->require_subcommand(1);
  auto args = std::make_shared<CorpusArgs>();
  CLI::App* cmd = data->add_subcommand(
      "corpus", "build train.jsonl / valid.jsonl / stats.json from the train-only files of shared/data");
  cmd->add_option("--out", args->out_dir, "output directory")->required();
  cmd->add_option("--data", args->data_dir,
                  "data directory (default: $DSPARK_SHARED_DIR/data, else ../shared/data beside the repository)");
  cmd->add_option("--seed", args->seed, "shuffle and split seed (default 1234)")->check(at_least(0));
  cmd->add_option("--valid-fraction", args->valid_fraction, "validation fraction per source (default 0.02)")
      ->check(CLI::Range(0.0, 0.49));
  cmd->add_option("--min-valid", args->min_valid, "at least this many validation records per source (default 8)");
  cmd->add_option("--python-stdlib-bytes", args->python_stdlib_bytes,
                  "bytes of Python standard library source (default: as many as the code-instruction data; 0: none)");
  cmd->add_option("--python-stdlib", args->python_stdlib_dir,
                  "Python standard library directory (default: ask python3, else /usr/lib/python3.*)");
  cmd->add_option("--python-max-file-bytes", args->python_max_file_bytes,
                  "skip standard library files larger than this (default 200000)");
  cmd->add_option("--math-instruction-fraction", args->math_instruction_fraction,
                  "share of math prompts that get the \"reason step by step ... \\boxed{}\" line (default 0.5)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->callback([args] { run_corpus(*args); });
  register_data_regenerate(*data);
}

}  // namespace dspark::cli
