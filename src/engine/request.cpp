#include "engine/request.h"

#include "common/error.h"

namespace dspark::engine {

sampling::SamplingParams sampling_defaults(const model::GenerationConfig& g) {
  sampling::SamplingParams p;
  p.temperature = g.do_sample ? g.temperature : 0.0;
  p.top_k = g.do_sample ? g.top_k : 0;
  p.top_p = g.do_sample ? g.top_p : 1.0;
  p.min_p = g.do_sample ? g.min_p : 0.0;
  return p;
}

int64_t context_limit(const model::ModelConfig& config, int64_t max_context) {
  const int64_t trained = config.max_position_embeddings;
  if (max_context < 0) throw Error("the context limit must be >= 0 (0: the model's " + std::to_string(trained) + ")");
  if (max_context > trained)
    throw Error("a context of " + std::to_string(max_context) + " tokens exceeds the model's max_position_embeddings (" +
                std::to_string(trained) + ")");
  return max_context > 0 ? max_context : trained;
}

void check_request(const EngineRequest& r, const RequestLimits& limits) {
  sampling::check_sampling_params(r.sampling);
  if (r.prompt_ids.empty()) throw Error("request: the prompt is empty");
  if (r.max_tokens < 0) throw Error("request: max_tokens must be >= 0, not " + std::to_string(r.max_tokens));
  for (int64_t id : r.prompt_ids)
    if (id < 0 || id >= limits.vocab_size)
      throw Error("request: token id " + std::to_string(id) + " is out of range [0, " +
                  std::to_string(limits.vocab_size) + ")");
  const int64_t n_prompt = static_cast<int64_t>(r.prompt_ids.size());
  if (n_prompt + r.max_tokens > limits.max_context)
    throw Error("request: the prompt (" + std::to_string(n_prompt) + " tokens) plus max_tokens (" +
                std::to_string(r.max_tokens) + ") is " + std::to_string(n_prompt + r.max_tokens) +
                ", beyond the context limit of " + std::to_string(limits.max_context) + " tokens");
  if (!(r.confidence_threshold >= 0 && r.confidence_threshold <= 1))
    throw Error("request: the confidence threshold must be in [0, 1]");
  if (!r.stop_strings.empty() && !limits.can_detokenize) throw Error("request: stop strings need a tokenizer");
}

}  // namespace dspark::engine
