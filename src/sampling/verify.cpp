#include "sampling/verify.h"

namespace dspark::sampling {

int64_t draw_token(const torch::Tensor& logits_row, const SamplingParams& params, Rng& rng) {
  if (params.greedy()) {
    const torch::Tensor row = logits_row.to(torch::kFloat32).cpu().contiguous();
    return argmax(row.data_ptr<float>(), row.numel());
  }
  const torch::Tensor probs = sampling_probs(logits_row.unsqueeze(0), params).cpu().contiguous();
  return sample_from_probs(probs.data_ptr<float>(), probs.size(1), rng);
}

VerifyOutcome verify_drafts(const torch::Tensor& target_logits, std::span<const int64_t> drafts,
                            const torch::Tensor& draft_probs, const SamplingParams& params, Rng& rng,
                            const SampledVerifier& verifier) {
  const int64_t n = static_cast<int64_t>(drafts.size());
  if (params.greedy()) {
    std::vector<int64_t> target_argmax(n + 1);
    const torch::Tensor logits = target_logits.to(torch::kFloat32).cpu().contiguous();
    for (int64_t i = 0; i <= n; ++i) target_argmax[i] = argmax(logits[i].data_ptr<float>(), logits.size(1));
    return verify_greedy(target_argmax, drafts);
  }
  const torch::Tensor p = sampling_probs(target_logits, params).cpu().contiguous();
  const torch::Tensor q =
      n > 0 ? draft_probs.narrow(0, 0, n).to(torch::kFloat32).contiguous() : torch::empty({0}, torch::kFloat32);
  const std::span<const float> p_span(p.data_ptr<float>(), p.numel()), q_span(q.data_ptr<float>(), q.numel());
  return verifier ? verifier(p_span, q_span, drafts, p.size(1), rng)
                  : verify_sampled(p_span, q_span, drafts, p.size(1), rng);
}

std::vector<float> acceptance_probabilities(const torch::Tensor& target_logits, std::span<const int64_t> drafts,
                                            const torch::Tensor& draft_probs, const SamplingParams& params) {
  const int64_t n = static_cast<int64_t>(drafts.size());
  std::vector<float> out(static_cast<size_t>(n));
  if (n == 0) return out;
  if (params.greedy()) {
    const torch::Tensor logits = target_logits.narrow(0, 0, n).to(torch::kFloat32).cpu().contiguous();
    for (int64_t k = 0; k < n; ++k)
      out[k] = argmax(logits[k].data_ptr<float>(), logits.size(1)) == drafts[k] ? 1.0f : 0.0f;
    return out;
  }
  const torch::Tensor p = sampling_probs(target_logits.narrow(0, 0, n), params).cpu();
  const torch::Tensor q = draft_probs.narrow(0, 0, n).to(torch::kFloat32).cpu();
  const torch::Tensor overlap = torch::minimum(p, q).sum(1).contiguous();  // [n]
  for (int64_t k = 0; k < n; ++k) out[k] = overlap[k].item<float>();
  return out;
}

}  // namespace dspark::sampling
