// `dspark bench draft`: the time of one drafting call against gamma for random-init DSpark,
// DFlash and EAGLE-3 drafters of a target's shape, in a steady state (a long context already in
// the draft cache, one or two freshly committed rows per call, as after a verify round).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/transformer.h"

namespace dspark::bench {

struct DraftPoint {
  std::string method;
  int64_t gamma = 0;
  double median_ms = 0;
  std::vector<double> runs_ms;
};

struct DraftBenchOptions {
  std::vector<std::string> methods{"dspark", "dflash", "eagle3"};
  std::vector<int64_t> gammas{1, 2, 4, 7, 8, 12, 16};
  int64_t context = 256;  // committed positions before the timed calls
  int64_t warmup = 2;
  int64_t runs = 9;
  std::string work_dir;   // where the random drafters are written
};

std::vector<DraftPoint> run_draft_bench(const model::Transformer& target, const DraftBenchOptions& options,
                                        const std::function<void(const std::string&)>& progress = {});

}  // namespace dspark::bench
