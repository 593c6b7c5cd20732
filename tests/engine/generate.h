// The tests' way to generate: one request through the engine (a batch of one). Without a drafter
// it decodes autoregressively; with one it verifies every draft (the `fixed` schedule), gamma
// per step.
#pragma once
#include <vector>

#include "draft/drafter.h"
#include "engine/engine.h"
#include "model/transformer.h"

namespace dspark::test {

struct GenerateOptions {
  int64_t gamma = 0;                 // drafts per step (with a drafter)
  double confidence_threshold = 0;   // DSpark's proposal cut
  bool record_rounds = false;
  sampling::SampledVerifier verifier;
};

inline engine::RequestOutcome generate(model::Transformer& target, draft::Drafter* drafter,
                                       const std::vector<int64_t>& prompt, const sampling::SamplingParams& params,
                                       int64_t max_tokens, const GenerateOptions& o = {},
                                       const std::vector<int64_t>& stop_ids = {}) {
  engine::Engine engine(target, drafter,
                        {.max_concurrency = 1, .max_context = static_cast<int64_t>(prompt.size()) + max_tokens,
                         .gamma = o.gamma,
                         .schedule = drafter ? schedule::ScheduleKind::kFixed : schedule::ScheduleKind::kNone,
                         .record_rounds = o.record_rounds, .verifier = o.verifier});
  engine::EngineRequest request{prompt, params, max_tokens, stop_ids};
  request.confidence_threshold = o.confidence_threshold;
  engine.submit(std::move(request));
  return engine.run().front();
}

// The greedy autoregressive continuation of `prompt`.
inline std::vector<int64_t> greedy(model::Transformer& target, const std::vector<int64_t>& prompt, int64_t max_tokens,
                                   const std::vector<int64_t>& stop_ids = {}) {
  return generate(target, nullptr, prompt, {.temperature = 0}, max_tokens, {}, stop_ids).ids;
}

}  // namespace dspark::test
