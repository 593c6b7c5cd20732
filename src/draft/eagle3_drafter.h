// EAGLE-3 as a drafter: the layer of eagle3_layer.h run from the draft KV cache, chain drafting
// one token per step (deepspec-spec 2.11). Verified rows pair g_t = fc(target features at t) with
// the token at t + 1; drafted rows pair the layer's own previous output with the token just drawn.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "draft/draft_config.h"
#include "draft/eagle3_layer.h"
#include "draft/model_drafter.h"
#include "model/transformer.h"

namespace dspark::draft {

class Eagle3Drafter : public ModelDrafter {
 public:
  static std::unique_ptr<Eagle3Drafter> load(const std::string& dir, const model::Transformer& target,
                                             const DrafterLoadOptions& options);

  std::string method() const override { return "eagle3"; }
  std::vector<DraftBlock> propose(const std::vector<DraftRequest>& requests) override;

 private:
  Eagle3Drafter(DraftConfig config, const model::Transformer& target, const DrafterLoadOptions& options,
                const DrafterWeights& weights);

  struct Rows {                          // one forward's new rows, request after request
    std::vector<int64_t> slots, n_rows;  // per request
    torch::Tensor g;                     // [n, hidden] fc(features) or the previous output
    std::vector<int64_t> tokens;         // [n] the token paired with each row (at position + 1)
  };
  // Runs the layer on new rows appended to each slot's cache (causal), commits them to the
  // cache, and returns the layer outputs [n, hidden] (pre-norm).
  torch::Tensor layer_forward(const Rows& rows);

  Eagle3Layer layer_;
};

}  // namespace dspark::draft
