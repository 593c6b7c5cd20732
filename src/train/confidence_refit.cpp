#include "train/confidence_refit.h"

#include <cmath>
#include <limits>
#include <string>

#include "common/error.h"

namespace dspark::train {

RolloutRecorder::RolloutRecorder(draft::DSparkDrafter& drafter) : drafter_(drafter) {
  if (!drafter_.config().confidence_head) throw Error("confidence refit: the drafter has no confidence head");
  drafter_.set_tracing(true);
}

std::vector<draft::DraftBlock> RolloutRecorder::propose(const std::vector<draft::DraftRequest>& requests) {
  if (requests.size() > 1) throw Error("confidence refit: rollouts run one request at a time");
  std::vector<draft::DraftBlock> blocks = drafter_.propose(requests);
  for (size_t r = 0; r < blocks.size(); ++r) {
    const int64_t n = static_cast<int64_t>(blocks[r].tokens.size());
    if (n == 0) continue;  // the engine's round for it has no confidences either (take() skips it)
    Proposal p;
    p.hidden = drafter_.last_traces()[r].hidden.narrow(0, 0, n).to(torch::kFloat32, /*non_blocking=*/false, /*copy=*/true);
    p.prev.push_back(requests[r].anchor);  // x_{-1}: the anchor
    for (int64_t k = 0; k + 1 < n; ++k) p.prev.push_back(blocks[r].tokens[k]);
    p.prev.resize(n);
    proposals_.push_back(std::move(p));
  }
  return blocks;
}

ConfidenceRollouts RolloutRecorder::take(const std::vector<engine::DraftRound>& all_rounds, int64_t gamma) {
  // A step that drafts nothing (the request's last token: gamma 0) still reports a round, with no
  // confidences and nothing verified; only rounds with a proposal pair with the recording.
  std::vector<const engine::DraftRound*> rounds;
  for (const engine::DraftRound& r : all_rounds)
    if (!r.confidence.empty()) rounds.push_back(&r);
  if (rounds.size() != proposals_.size())
    throw Error("confidence refit: " + std::to_string(proposals_.size()) + " proposals recorded but the engine reported " +
                std::to_string(rounds.size()) + " rounds");
  const int64_t n = static_cast<int64_t>(rounds.size()), d = drafter_.config().backbone.hidden_size;
  ConfidenceRollouts out{torch::zeros({n, gamma, d}), torch::zeros({n, gamma}, torch::kInt64),
                         torch::full({n, gamma}, std::numeric_limits<float>::quiet_NaN()),
                         torch::zeros({n}, torch::kInt64)};
  auto prev = out.prev.accessor<int64_t, 2>();
  auto exact = out.exact.accessor<float, 2>();
  for (int64_t i = 0; i < n; ++i) {
    const Proposal& p = proposals_[i];
    const int64_t slots = std::min<int64_t>(static_cast<int64_t>(p.prev.size()), gamma);
    const std::vector<float>& e = rounds[i]->exact_acceptance;
    if (static_cast<int64_t>(e.size()) > slots)
      throw Error("confidence refit: round " + std::to_string(i) + " verified more slots than were drafted");
    if (slots > 0) out.hidden[i].narrow(0, 0, slots).copy_(p.hidden.narrow(0, 0, slots));
    for (int64_t k = 0; k < slots; ++k) prev[i][k] = p.prev[k];
    for (size_t k = 0; k < e.size(); ++k) exact[i][static_cast<int64_t>(k)] = e[k];
    out.accepted[i] = rounds[i]->accepted;
  }
  proposals_.clear();
  return out;
}

ConfidenceRollouts concat(const std::vector<ConfidenceRollouts>& parts) {
  std::vector<torch::Tensor> hidden, prev, exact, accepted;
  for (const ConfidenceRollouts& p : parts) {
    hidden.push_back(p.hidden);
    prev.push_back(p.prev);
    exact.push_back(p.exact);
    accepted.push_back(p.accepted);
  }
  if (parts.empty()) throw Error("confidence refit: no rollouts");
  return {torch::cat(hidden), torch::cat(prev), torch::cat(exact), torch::cat(accepted)};
}

ConfidenceExamples confidence_examples(const ConfidenceRollouts& rollouts, const torch::Tensor& w1) {
  const int64_t gamma = rollouts.exact.size(1), d = rollouts.hidden.size(2);
  const torch::Tensor verified = torch::isfinite(rollouts.exact).view({-1});  // [n gamma]
  const torch::Tensor rows = verified.nonzero().view({-1});
  torch::Tensor x = rollouts.hidden.reshape({-1, d}).index_select(0, rows).to(torch::kFloat64);
  if (w1.defined()) {
    const torch::Tensor prev = rollouts.prev.reshape({-1}).index_select(0, rows);
    x = torch::cat({x, w1.index_select(0, prev).to(torch::kFloat64)}, 1);
  }
  const torch::Tensor slot = torch::arange(gamma, torch::kInt64).repeat({rollouts.exact.size(0)}).index_select(0, rows);
  const torch::Tensor target = rollouts.exact.reshape({-1}).index_select(0, rows).to(torch::kFloat64).clamp(0.0, 1.0);
  const torch::Tensor weight = torch::exp(-slot.to(torch::kFloat64) / static_cast<double>(gamma));
  return {x, target, weight, slot};
}

double weighted_soft_bce(const torch::Tensor& logits, const ConfidenceExamples& e) {
  // BCE with logits, stable: softplus(z) - y z.
  const torch::Tensor z = logits.to(torch::kFloat64);
  const torch::Tensor bce = torch::softplus(z) - e.target * z;
  return ((e.weight * bce).sum() / e.weight.sum()).item<double>();
}

namespace {

double objective(const torch::Tensor& xa, const torch::Tensor& beta, const ConfidenceExamples& e, double l2) {
  const torch::Tensor w = beta.narrow(0, 0, beta.size(0) - 1);
  return weighted_soft_bce(xa.mv(beta), e) + 0.5 * l2 * w.dot(w).item<double>();
}

}  // namespace

ConfidenceFit fit_confidence_head(const ConfidenceExamples& e, double l2, int max_iterations) {
  const int64_t n = e.x.size(0), width = e.x.size(1);
  if (n == 0) throw Error("confidence refit: no verified slots to fit");
  const torch::Tensor xa = torch::cat({e.x, torch::ones({n, 1}, torch::kFloat64)}, 1);  // [n, width + 1]
  const torch::Tensor s = e.weight / e.weight.sum();                                  // [n], sums to 1
  torch::Tensor penalty = torch::full({width + 1}, l2, torch::kFloat64);
  penalty[width] = 0.0;  // the bias is not penalised
  torch::Tensor beta = torch::zeros({width + 1}, torch::kFloat64);
  double f = objective(xa, beta, e, l2);
  ConfidenceFit fit;
  for (fit.iterations = 0; fit.iterations < max_iterations; ++fit.iterations) {
    const torch::Tensor p = torch::sigmoid(xa.mv(beta));
    const torch::Tensor grad = xa.t().mv(s * (p - e.target)) + penalty * beta;
    const torch::Tensor hessian = xa.t().mm(xa * (s * p * (1 - p)).unsqueeze(1)) + torch::diag(penalty) +
                                  1e-12 * torch::eye(width + 1, torch::kFloat64);
    const torch::Tensor step = torch::linalg_solve(hessian, grad.unsqueeze(1)).squeeze(1);
    // Damped: halve the step until the objective does not rise (Newton from 0 can overshoot).
    double t = 1.0, f_new = f;
    torch::Tensor candidate;
    for (int halvings = 0; halvings < 30; ++halvings, t *= 0.5) {
      candidate = beta - t * step;
      f_new = objective(xa, candidate, e, l2);
      if (f_new <= f) break;
    }
    if (f_new > f) break;  // no descent left at machine precision
    const double largest = (t * step).abs().max().item<double>();
    beta = candidate;
    f = f_new;
    if (largest < 1e-8) {
      ++fit.iterations;
      break;
    }
  }
  fit.weight = beta.narrow(0, 0, width).to(torch::kFloat32).view({1, width}).clone();
  fit.bias = beta.narrow(0, width, 1).to(torch::kFloat32).clone();
  fit.loss = f;
  return fit;
}

}  // namespace dspark::train
