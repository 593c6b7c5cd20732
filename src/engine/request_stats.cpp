#include "engine/request_stats.h"

#include <algorithm>

namespace dspark::engine {

namespace {

double ratio(double num, double den) { return den > 0 ? num / den : 0.0; }

// a += b, elementwise, growing a to b's length.
void add_counts(std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  if (a.size() < b.size()) a.resize(b.size(), 0);
  for (size_t k = 0; k < b.size(); ++k) a[k] += b[k];
}

}  // namespace

void RequestStats::record_step(int64_t verified, int64_t accepted, int64_t committed) {
  ++num_steps;
  num_committed_tokens += committed;
  if (verified == 0) return;
  ++num_drafts;
  num_draft_tokens += verified;
  num_accepted_tokens += accepted;
  if (static_cast<int64_t>(num_draft_tokens_per_pos.size()) < verified) {
    num_draft_tokens_per_pos.resize(verified, 0);
    num_accepted_tokens_per_pos.resize(verified, 0);
  }
  for (int64_t k = 0; k < verified; ++k) {
    ++num_draft_tokens_per_pos[k];
    if (k < accepted) ++num_accepted_tokens_per_pos[k];
  }
}

void RequestStats::merge(const RequestStats& o) {
  prompt_tokens += o.prompt_tokens;
  generated_tokens += o.generated_tokens;
  queued_seconds += o.queued_seconds;
  first_token_seconds += o.first_token_seconds;
  seconds += o.seconds;
  num_steps += o.num_steps;
  num_committed_tokens += o.num_committed_tokens;
  num_drafts += o.num_drafts;
  num_draft_tokens += o.num_draft_tokens;
  num_accepted_tokens += o.num_accepted_tokens;
  add_counts(num_draft_tokens_per_pos, o.num_draft_tokens_per_pos);
  add_counts(num_accepted_tokens_per_pos, o.num_accepted_tokens_per_pos);
}

double RequestStats::acceptance_length() const { return ratio(num_committed_tokens, num_steps); }
double RequestStats::mean_acceptance_length() const { return 1.0 + ratio(num_accepted_tokens, num_drafts); }
double RequestStats::acceptance_rate() const { return ratio(num_accepted_tokens, num_draft_tokens); }
double RequestStats::drafts_per_step() const { return ratio(num_draft_tokens, num_steps); }

std::vector<double> RequestStats::accepted_per_draft() const {
  std::vector<double> rate;
  for (int64_t accepted : num_accepted_tokens_per_pos) rate.push_back(ratio(accepted, num_drafts));
  return rate;
}

std::vector<double> RequestStats::accept_rate_per_pos() const {
  std::vector<double> rate;
  for (size_t k = 0; k < num_draft_tokens_per_pos.size(); ++k)
    rate.push_back(ratio(num_accepted_tokens_per_pos[k], num_draft_tokens_per_pos[k]));
  return rate;
}

std::vector<double> RequestStats::conditional_accept_rate() const {
  // Steps that reached position k (every earlier one accepted) and verified it.
  std::vector<double> rate;
  for (size_t k = 0; k < num_draft_tokens_per_pos.size(); ++k) {
    const int64_t reached = k == 0 ? num_draft_tokens_per_pos[0]
                                   : std::min(num_accepted_tokens_per_pos[k - 1], num_draft_tokens_per_pos[k]);
    rate.push_back(ratio(num_accepted_tokens_per_pos[k], reached));
  }
  return rate;
}

double RequestStats::decode_tokens_per_second() const {
  return generated_tokens > 1 ? ratio(generated_tokens - 1, seconds - first_token_seconds) : 0.0;
}

}  // namespace dspark::engine
