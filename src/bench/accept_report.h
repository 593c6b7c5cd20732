// The report of `dspark bench accept`: one cell per (drafter, prompt file, confidence threshold),
// macro averages over prompt files, the Markdown tables (with the confidence head's ECE and
// ROC-AUC per file where the drafter has one), the JSON document and the plots (the paper's
// Figure 2, conditional acceptance per position, and Figure 5, the threshold sweep).
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/accept_bench.h"

namespace dspark::bench {

struct AcceptCell {
  std::string drafter, file;
  double threshold = 0;  // DSpark's confidence threshold (0: off)
  engine::RequestStats stats;
  std::optional<ConfidenceMetrics> confidence;  // drafters with a confidence head, threshold 0
};

struct AcceptReport {
  std::vector<AcceptCell> cells;
  std::vector<std::string> drafters, files;  // in the order given
  std::vector<double> thresholds;            // 0 first
  AcceptOptions options;
  int64_t limit = 0;                         // prompts per file (0: all)

  // The mean over prompt files of a per-cell quantity (the macro average).
  double macro(const std::string& drafter, double threshold, double (*value)(const AcceptCell&)) const;
  bool has_cells(const std::string& drafter, double threshold) const;  // ran at that threshold
  double macro_conditional(const std::string& drafter, int64_t position) const;  // threshold 0
  std::string markdown() const;
  // The threshold sweep's table (empty with threshold 0 alone); part of markdown().
  std::string sweep_markdown() const;
  nlohmann::json to_json(const std::string& target_dir) const;
  // accept_per_position.svg, and threshold_sweep.svg when several thresholds were run.
  void write_plots(const std::filesystem::path& dir) const;
};

}  // namespace dspark::bench
