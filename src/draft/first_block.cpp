#include "draft/first_block.h"

#include "common/error.h"

namespace dspark::draft {

FirstBlock draft_first_block(model::Transformer& target, Drafter& drafter, const std::vector<int64_t>& prompt_ids,
                             std::optional<int64_t> anchor, int64_t gamma, const sampling::SamplingParams& params) {
  const int64_t n = static_cast<int64_t>(prompt_ids.size());
  model::KvCache cache = target.make_cache(1, n + 1);
  const int64_t slot = *cache.allocate();
  const model::ForwardOutput out =
      target.forward(cache, {prompt_ids, {{slot, n}}, {n - 1}, drafter.target_layer_ids(), false});
  const torch::Tensor last = out.logits[0].to(torch::kFloat32).cpu().contiguous();
  FirstBlock first;
  first.anchor = anchor.value_or(sampling::argmax(last.data_ptr<float>(), last.numel()));
  if (first.anchor < 0 || first.anchor >= target.config().vocab_size)
    throw Error("anchor " + std::to_string(first.anchor) + " is outside the vocabulary [0, " +
                std::to_string(target.config().vocab_size) + ")");
  drafter.begin(0, prompt_ids, out.captured_features());
  sampling::Rng rng(params.seed);
  first.block = drafter.propose({{0, first.anchor, gamma, 0.0, &params, &rng, /*return_logits=*/true}})[0];
  drafter.end(0);
  return first;
}

}  // namespace dspark::draft
