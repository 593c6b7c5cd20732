// The sampling transform (temperature, top-k, top-p, min-p) and the categorical draw.
// The transform returns the exact probability vector a token is drawn from, because the verifier
// must apply the same transform to the target (p) and the drafter (q) distributions.
#pragma once
#include <cstdint>

#include "sampling/rng.h"

namespace at { class Tensor; }

namespace dspark::sampling {

// Temperatures below this sample greedily, as in vLLM: dividing logits by a far smaller one
// overflows float (1e-38 makes every logit infinite), and above it the distribution is already
// one-hot to float precision unless logits tie within about 1e-4.
inline constexpr double kGreedyBelowTemperature = 1e-5;

struct SamplingParams {
  double temperature = 1.0;  // below kGreedyBelowTemperature (0, say): greedy (argmax, a one-hot
                             // distribution); negative is refused
  int64_t top_k = 0;         // keep the k most likely tokens; 0 = off
  double top_p = 1.0;        // keep the smallest prefix of sorted tokens whose mass reaches top_p; 1 = off
  double min_p = 0.0;        // drop tokens with p < min_p * max p; 0 = off
  uint64_t seed = 0;         // seed of the request's Rng

  bool greedy() const { return temperature < kGreedyBelowTemperature; }
};

// Validates user-supplied parameters; throws dspark::Error naming the bad value.
void check_sampling_params(const SamplingParams& params);

// logits: [n, vocab] (any float dtype, any device). Returns f32 probabilities [n, vocab], each row
// the exact distribution that sample_from_probs draws from. Order: temperature, top-k, top-p,
// min-p, renormalise (as in Hugging Face and vLLM). Greedy gives one-hot rows at the argmax (first
// index on ties).
// On the CPU every row goes through sampling_probs_row, so a drafter that calls the row version
// directly draws from exactly the transform the verifier applies to the target.
at::Tensor sampling_probs(const at::Tensor& logits, const SamplingParams& params);

// The same transform on one CPU row, without libtorch: the drafters' serial loops call it once per
// slot, where per-op dispatch would cost more than the arithmetic.
void sampling_probs_row(const float* logits,  // [n_vocab]
                        int64_t n_vocab, const SamplingParams& params,
                        float* probs);        // [n_vocab] out (may alias logits)

// The transform in libtorch ops: what sampling_probs runs on other devices. Exposed so tests can
// hold it to the CPU row version.
at::Tensor sampling_probs_tensor_ops(const at::Tensor& logits, const SamplingParams& params);

// probs: [vocab] on the CPU, f32, summing to ~1. Inverse-CDF draw with one uniform from rng.
// Zero-probability tokens are never returned.
int64_t sample_from_probs(const float* probs, int64_t n_vocab, Rng& rng);

// Greedy helper over one row of logits / probs: the first index of the largest value, NaNs
// skipped. Throws Error when no value is above -inf (a row of NaNs from a broken model).
int64_t argmax(const float* values, int64_t n);

}  // namespace dspark::sampling
