// The report of `dspark bench serve`: the points as Markdown or JSON, and the plots (the paper's
// Figure 7, aggregate throughput against tokens/s per user, and Figure 8, the verification budget
// against concurrency).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/serve_bench.h"

namespace dspark::bench {

nlohmann::json to_json(const ServePoint& point);
std::string serve_markdown(const std::vector<ServePoint>& points);
// serve_throughput.svg and serve_budget.svg in dir.
void write_serve_plots(const std::filesystem::path& dir, const std::vector<ServePoint>& points);

}  // namespace dspark::bench
