// A progress line for long jobs (training, data generation, profiling): done/total, a bar, the
// rate, the ETA and any job-specific fields. On a terminal the line is redrawn in place; otherwise
// (logs, CI) a full line is printed at most every `log_interval_s` seconds, and always at the end.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace dspark {

class Progress {
 public:
  // `unit` names what the rate counts ("step", "tok", "req"); `start` is where a resumed job begins.
  Progress(std::string label, int64_t total, std::string unit, int64_t start = 0, double log_interval_s = 30.0);

  // Reports `done` items; `rate_count` is what the rate is measured in if it differs from items
  // (e.g. tokens processed since this Progress was made, while done counts steps; -1: items).
  // `fields` is appended verbatim.
  void update(int64_t done, const std::string& fields = "", int64_t rate_count = -1);
  void finish(const std::string& fields = "");

  // "1h02m", "3m07s", "12s"
  static std::string format_duration(double seconds);

 private:
  void draw(int64_t done, const std::string& fields, int64_t rate_count, bool final);

  std::string label_, unit_;
  int64_t total_, start_;
  double log_interval_s_;
  bool tty_;
  std::chrono::steady_clock::time_point t0_, last_print_;
  int64_t last_done_ = 0;
  int64_t last_rate_count_ = -1;
};

}  // namespace dspark
