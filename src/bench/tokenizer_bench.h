// `dspark bench tokenizer`: encode throughput of a tokenizer.json (MB/s and tokens/s, the median of
// several runs after a warm-up run that fills the word cache), on a file or on a corpus built from
// the data directory (an equal share of every data file: chat, code, math).
#pragma once
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/median.h"

namespace dspark::bench {

struct TokenizerBenchResult {
  double load_s = 0;
  double cold_s = 0;                // the warm-up run, with an empty word cache
  std::vector<double> run_seconds;  // the timed runs
  size_t bytes = 0;
  size_t tokens = 0;

  double median_s() const { return median(run_seconds); }
  double mb_per_s() const { return static_cast<double>(bytes) / 1e6 / median_s(); }
  double tokens_per_s() const { return static_cast<double>(tokens) / median_s(); }
};


// shared/data beside the repository: $DSPARK_SHARED_DIR/data, else searched above the working
// directory and the executable. Throws dspark::Error when not found.
std::filesystem::path find_data_dir();
// About target_bytes of text from the .json / .jsonl files under dir (reproducible order).
std::string build_corpus(const std::filesystem::path& dir, size_t target_bytes);
std::string read_whole_file(const std::filesystem::path& file);
// Loads the tokenizer, encodes the corpus once cold, then `runs` timed times.
TokenizerBenchResult measure_encode(const std::string& tokenizer_path, const std::string& corpus, int runs);
nlohmann::json to_json(const TokenizerBenchResult& result, int runs);

}  // namespace dspark::bench
