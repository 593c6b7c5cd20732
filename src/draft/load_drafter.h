// Opening a drafter by method: the model drafters from a DeepSpec-layout directory, n-gram from
// nothing.
#pragma once
#include <memory>
#include <string>

#include "draft/drafter.h"
#include "draft/dspark_drafter.h"
#include "model/transformer.h"

namespace dspark::draft {

// method: "dspark", "dflash", "eagle3", "ngram", or "" to take it from dir's config.json.
// DSpark and DFlash checkpoints share an architecture; asking for one and getting the other is an
// error (a DFlash checkpoint has no Markov or confidence head).
std::unique_ptr<Drafter> load_drafter(const std::string& method, const std::string& dir,
                                      const model::Transformer& target, const DrafterLoadOptions& options);

}  // namespace dspark::draft
