// SPS(B): the measured steps per second of one engine step that sends B tokens in total to the
// target (B = sum_r (1 + l_r): every request's anchor plus its verified drafts), B = 1..max_tokens.
//
// Kept exactly as measured. Real curves are jagged (tile and kernel-choice cliffs), and the async
// scheduler's global search exists to cross those cliffs, so nothing here smooths or interpolates.
//
// Above max_tokens nothing was measured, and the table's range is the step's token budget: the
// schedulers never admit a draft that would take B past it, and sps(B) throws for such a B instead
// of clamping. Clamping would price an unmeasured, larger step as cheap as the largest measured one
// and so over-admit; extrapolating would invent a curve the table exists to avoid.
//
// On disk (JSON), keyed by model and machine so an engine can cache its start-up profile:
//   { "format": "dspark-sps-table", "version": 1,
//     "model_id": "...", "machine_id": "...", "device": "...", "dtype": "...",
//     "measured_date": "2025-06-01T12:00:00Z",
//     "steps_per_second": [SPS(1), SPS(2), ..., SPS(max_tokens)] }
#pragma once
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dspark::schedule {

// What a table was measured on. A cached table is valid only for the same setup.
struct SpsMeta {
  std::string model_id;       // the target checkpoint (name or content hash)
  std::string machine_id;     // the host (hostname or hardware fingerprint)
  std::string device;         // e.g. "cpu", "cuda:0 NVIDIA H200"
  std::string dtype;          // weight dtype in memory, e.g. "bf16"
  std::string measured_date;  // ISO 8601, informational only
  std::string build_id;       // the dspark executable that measured it (a rebuild changes the kernels)

  // Same model, machine, device, dtype and build (the date may differ).
  bool same_setup(const SpsMeta& other) const;
};

class SpsTable {
 public:
  // steps_per_second: [max_tokens], entry B-1 is SPS(B); each finite and > 0, at least one entry.
  // Throws dspark::Error naming the first bad B.
  explicit SpsTable(std::vector<double> steps_per_second, SpsMeta meta = {});

  int64_t max_tokens() const { return static_cast<int64_t>(sps_.size()); }
  bool covers(int64_t n_tokens) const { return n_tokens >= 1 && n_tokens <= max_tokens(); }
  // O(1). Throws dspark::Error for n_tokens outside 1..max_tokens (see the header comment).
  double sps(int64_t n_tokens) const;
  std::span<const double> values() const { return sps_; }  // [max_tokens]
  const SpsMeta& meta() const { return meta_; }

  nlohmann::json to_json() const;
  // source names the origin in error messages. Every key of the format above is required.
  static SpsTable from_json(const nlohmann::json& json, const std::string& source);
  static SpsTable load(const std::filesystem::path& path);
  void save(const std::filesystem::path& path) const;

 private:
  std::vector<double> sps_;  // [max_tokens] SPS(B) at index B-1
  SpsMeta meta_;
};

// A file name for the cache directory: "sps-<model>--<machine>--<device>--<dtype>.json", characters
// outside [A-Za-z0-9._-] replaced by '_'. Distinct setups may collide after replacement, so check
// meta().same_setup(...) after loading.
std::string cache_file_name(const SpsMeta& meta);

// The throughput objective Theta = tau * SPS(B): expected accepted tokens per second of a step that
// sends n_tokens (B) tokens and expects expected_tokens (tau) of them (bonus included) to survive.
double throughput(double expected_tokens, int64_t n_tokens, const SpsTable& table);

}  // namespace dspark::schedule
