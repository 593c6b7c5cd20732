#include "common/progress.h"

#include <unistd.h>

#include <cstdio>

namespace dspark {

Progress::Progress(std::string label, int64_t total, std::string unit, int64_t start, double log_interval_s)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(total),
      start_(start),
      log_interval_s_(log_interval_s),
      tty_(isatty(fileno(stderr)) != 0),
      t0_(std::chrono::steady_clock::now()),
      last_print_(t0_),
      last_done_(start) {}

std::string Progress::format_duration(double seconds) {
  if (!(seconds >= 0) || seconds > 1e7) return "?";
  const int64_t s = static_cast<int64_t>(seconds + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", static_cast<long>(s / 3600), static_cast<long>(s % 3600 / 60));
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", static_cast<long>(s / 60), static_cast<long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lds", static_cast<long>(s));
  return buf;
}

void Progress::update(int64_t done, const std::string& fields, int64_t rate_count) {
  const auto now = std::chrono::steady_clock::now();
  const double since_print = std::chrono::duration<double>(now - last_print_).count();
  if (tty_ ? since_print < 0.2 : since_print < log_interval_s_) {
    last_done_ = done;
    last_rate_count_ = rate_count;
    return;
  }
  draw(done, fields, rate_count, false);
}

void Progress::finish(const std::string& fields) { draw(last_done_, fields, last_rate_count_, true); }

void Progress::draw(int64_t done, const std::string& fields, int64_t rate_count, bool final) {
  const auto now = std::chrono::steady_clock::now();
  last_print_ = now;
  last_done_ = done;
  last_rate_count_ = rate_count;
  const double elapsed = std::chrono::duration<double>(now - t0_).count();
  const double items_rate = elapsed > 0 ? static_cast<double>(done - start_) / elapsed : 0;
  const double shown_rate =
      rate_count >= 0 && elapsed > 0 ? static_cast<double>(rate_count) / elapsed : items_rate;
  const double eta = items_rate > 0 ? static_cast<double>(total_ - done) / items_rate : -1;
  constexpr int kWidth = 24;
  const int filled = total_ > 0 ? static_cast<int>(kWidth * std::min<double>(1.0, double(done) / double(total_))) : 0;
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "%s%s [%s] %ld/%ld %.1f %s/s elapsed %s ETA %s%s%s%s", tty_ ? "\r\033[K" : "", label_.c_str(),
               bar.c_str(), static_cast<long>(done), static_cast<long>(total_), shown_rate, unit_.c_str(),
               format_duration(elapsed).c_str(), final ? "0s" : format_duration(eta).c_str(),
               fields.empty() ? "" : "  ", fields.c_str(), (!tty_ || final) ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace dspark
