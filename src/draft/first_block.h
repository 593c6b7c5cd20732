// The first block a drafter proposes after a prompt, the way the engine would draft it: the target
// prefills the prompt capturing the drafter's feature layers, the drafter begins on them, and one
// drafting call follows the anchor. What `dspark draft` prints and the conformance checks read.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "draft/drafter.h"
#include "model/transformer.h"

namespace dspark::draft {

struct FirstBlock {
  int64_t anchor = 0;  // the token the block follows
  DraftBlock block;    // with logits (DraftRequest::return_logits)
};

// anchor: the token after the prompt; default: the target's greedy next token. Uses slot 0 of the
// drafter (which must be free) and ends it afterwards. Throws dspark::Error on an anchor outside
// the vocabulary.
FirstBlock draft_first_block(model::Transformer& target, Drafter& drafter, const std::vector<int64_t>& prompt_ids,
                             std::optional<int64_t> anchor, int64_t gamma, const sampling::SamplingParams& params);

}  // namespace dspark::draft
