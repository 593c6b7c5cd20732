// Losslessness of speculative rejection sampling, checked two ways:
//  - exactly: a test-local enumeration of the header's procedure (every draft sample, every
//    accept / reject branch, weighted by its probability) must give the target's autoregressive
//    distribution of the first 3 output tokens to 1e-12, for prefix-dependent toy targets and
//    drafts; a broken acceptance rule must not;
//  - statistically: the real verify_sampled with a real Rng, chi-square tested against exact
//    values; a broken verifier must fail the same test.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <iostream>
#include <map>
#include <vector>

#include "sampling/rejection.h"
#include "sampling/rng.h"
#include "sampling/sampling.h"

namespace dspark::sampling {
namespace {

using Dist = std::vector<double>;  // [vocab]
using Seq = std::vector<int>;
using SeqDist = std::map<Seq, double>;

Seq concat(Seq a, const Seq& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

uint64_t hash_seq(const Seq& s, uint64_t salt) {
  uint64_t h = salt;
  for (int t : s) h = (h ^ static_cast<uint64_t>(t + 1)) * 0x100000001B3ull;
  return h ^ (s.size() << 56);
}

// A fixed random distribution; about a quarter of the tokens get probability zero (never all).
Dist random_dist(uint64_t seed, int vocab) {
  Rng rng(seed);
  Dist d(vocab);
  double total = 0;
  for (double& v : d) total += v = rng.uniform() < 0.25 ? 0.0 : 0.05 + rng.uniform();
  if (total == 0) total = d[seed % vocab] = 1.0;
  for (double& v : d) v /= total;
  return d;
}

// The toy target: p(. | context) differs for every context, as a language model's does.
Dist toy_target(const Seq& context, int vocab) { return random_dist(hash_seq(context, 0x7A57), vocab); }

// q_k given the committed context and the drafts x_0..x_{k-1} (k = drafted.size()).
using DraftFn = std::function<Dist(const Seq& context, const Seq& drafted)>;

DraftFn independent_draft(int vocab) {  // q_k depends on the slot only
  return [vocab](const Seq&, const Seq& drafted) { return random_dist(0xD0 + drafted.size(), vocab); };
}

DraftFn markov_draft(int vocab) {  // q_k depends on x_{k-1} (the anchor for k = 0)
  return [vocab](const Seq& context, const Seq& drafted) {
    const int prev = !drafted.empty() ? drafted.back() : !context.empty() ? context.back() : vocab;
    return random_dist(0x3A0 + prev, vocab);
  };
}

DraftFn target_as_draft(int vocab) {  // q = p: everything is accepted
  return [vocab](const Seq& context, const Seq& drafted) { return toy_target(concat(context, drafted), vocab); };
}

// Acceptance probability of a drafted x with p = p_k(x), q = q_k(x) > 0 (x was drawn from q_k).
using AcceptRule = double (*)(double p, double q);
double correct_accept(double p, double q) { return std::min(1.0, p / q); }
double broken_accept(double p, double q) { return p > 0 ? std::min(1.0, q / p) : 1.0; }  // p, q swapped

struct Toy {
  int vocab;
  int gamma;
  DraftFn draft;
  AcceptRule accept;
};

// norm(max(0, p - q)), or p when that has no mass.
Dist residual_or_target(const Dist& p, const Dist& q) {
  Dist r(p.size());
  double mass = 0;
  for (size_t i = 0; i < p.size(); ++i) mass += r[i] = std::max(0.0, p[i] - q[i]);
  if (mass <= 0) return p;
  for (double& v : r) v /= mass;
  return r;
}

// Verification of one drafted block, adding each emitted sequence, cut at `want` tokens (later
// tokens cannot change the first `want`, and their branches sum to one), with its probability.
void verify_branches(const Toy& toy, const Seq& context, const Seq& drafted, double weight, size_t want,
                     SeqDist& out) {
  Seq emitted;
  for (size_t k = 0; k < drafted.size() && emitted.size() < want && weight > 0; ++k) {
    const Dist p = toy_target(concat(context, emitted), toy.vocab);
    const Dist q = toy.draft(context, Seq(drafted.begin(), drafted.begin() + k));
    const double a = toy.accept(p[drafted[k]], q[drafted[k]]);
    const Dist r = residual_or_target(p, q);
    for (int y = 0; y < toy.vocab; ++y)
      if (r[y] > 0) out[concat(emitted, {y})] += weight * (1 - a) * r[y];
    weight *= a;
    emitted.push_back(drafted[k]);
  }
  if (weight <= 0) return;
  if (emitted.size() == want) {
    out[emitted] += weight;
    return;
  }
  const Dist p = toy_target(concat(context, emitted), toy.vocab);  // all accepted: the bonus from p_n
  for (int y = 0; y < toy.vocab; ++y)
    if (p[y] > 0) out[concat(emitted, {y})] += weight * p[y];
}

// Every drafted block x_0..x_{gamma-1}, each x_k drawn from q_k, then its verification.
void enumerate_drafts(const Toy& toy, const Seq& context, Seq& drafted, double weight, size_t want, SeqDist& out) {
  if (static_cast<int>(drafted.size()) == toy.gamma) return verify_branches(toy, context, drafted, weight, want, out);
  const Dist q = toy.draft(context, drafted);
  for (int x = 0; x < toy.vocab; ++x) {
    if (q[x] <= 0) continue;
    drafted.push_back(x);
    enumerate_drafts(toy, context, drafted, weight * q[x], want, out);
    drafted.pop_back();
  }
}

// Distribution of the first `length` output tokens: rounds from the extended context until enough
// tokens have been emitted.
void output_distribution(const Toy& toy, const Seq& context, double weight, size_t length, SeqDist& out) {
  if (context.size() >= length) {
    out[context] += weight;
    return;
  }
  SeqDist round;
  Seq drafted;
  enumerate_drafts(toy, context, drafted, 1.0, length - context.size(), round);
  for (const auto& [emitted, w] : round) output_distribution(toy, concat(context, emitted), weight * w, length, out);
}

// p(y_0) p(y_1 | y_0) ... over every sequence of `length` tokens.
void autoregressive(int vocab, const Seq& context, double weight, size_t length, SeqDist& out) {
  if (context.size() == length) {
    out[context] += weight;
    return;
  }
  const Dist p = toy_target(context, vocab);
  for (int y = 0; y < vocab; ++y)
    if (p[y] > 0) autoregressive(vocab, concat(context, {y}), weight * p[y], length, out);
}

double max_abs_diff(const SeqDist& a, const SeqDist& b) {
  double worst = 0;
  for (const auto& [s, v] : a) worst = std::max(worst, std::abs(v - (b.count(s) ? b.at(s) : 0.0)));
  for (const auto& [s, v] : b) worst = std::max(worst, std::abs(v - (a.count(s) ? a.at(s) : 0.0)));
  return worst;
}

double total_mass(const SeqDist& d) {
  double t = 0;
  for (const auto& [s, v] : d) t += v;
  return t;
}

struct Case {
  int vocab, gamma;
};
const Case kCases[] = {{3, 1}, {3, 3}, {4, 2}, {5, 3}, {6, 2}, {6, 3}};
constexpr size_t kOutputTokens = 3;

SeqDist procedure_distribution(const Toy& toy) {
  SeqDist out;
  output_distribution(toy, {}, 1.0, kOutputTokens, out);
  return out;
}

SeqDist target_distribution(int vocab) {
  SeqDist out;
  autoregressive(vocab, {}, 1.0, kOutputTokens, out);
  return out;
}

TEST(RejectionExact, EveryDraftGivesTheTargetDistribution) {
  double worst = 0;
  for (const Case& c : kCases) {
    const SeqDist want = target_distribution(c.vocab);
    for (const auto& [name, draft] : {std::pair{"independent", independent_draft(c.vocab)},
                                      std::pair{"markov", markov_draft(c.vocab)},
                                      std::pair{"target", target_as_draft(c.vocab)}}) {
      SCOPED_TRACE(testing::Message() << "vocab " << c.vocab << ", gamma " << c.gamma << ", draft " << name);
      const SeqDist got = procedure_distribution({c.vocab, c.gamma, draft, correct_accept});
      EXPECT_NEAR(total_mass(got), 1.0, 1e-12);
      EXPECT_LT(max_abs_diff(got, want), 1e-12);
      worst = std::max(worst, max_abs_diff(got, want));
    }
  }
  std::cout << "  largest |procedure - target| over all cases: " << worst << "\n";
}

// The control: the same enumeration with min(1, q/p) must be caught, so the test above can fail.
TEST(RejectionExact, BrokenAcceptanceRuleIsCaught) {
  double smallest = 1;
  for (const Case& c : kCases) {
    const SeqDist want = target_distribution(c.vocab);
    for (const auto& [name, draft] : {std::pair{"independent", independent_draft(c.vocab)},
                                      std::pair{"markov", markov_draft(c.vocab)}}) {
      SCOPED_TRACE(testing::Message() << "vocab " << c.vocab << ", gamma " << c.gamma << ", draft " << name);
      const SeqDist got = procedure_distribution({c.vocab, c.gamma, draft, broken_accept});
      EXPECT_NEAR(total_mass(got), 1.0, 1e-12);  // still a distribution, just the wrong one
      EXPECT_GT(max_abs_diff(got, want), 1e-3);
      smallest = std::min(smallest, max_abs_diff(got, want));
    }
  }
  std::cout << "  smallest |broken - target| over all cases: " << smallest << "\n";
}

// ---------------------------------------------------------------------------------------------
// Monte Carlo through verify_sampled.

// Upper tail P(X >= x) of a chi-square with df degrees of freedom, in closed form: Q(s, y) for
// s = df/2, y = x/2, stepping Q(s+1, y) = Q(s, y) + y^s e^-y / s! up from Q(1/2, y) = erfc(sqrt y)
// or Q(1, y) = e^-y.
double chi_square_sf(double x, int df) {
  const double y = x / 2;
  double s = df % 2 ? 0.5 : 1.0;
  double q = df % 2 ? std::erfc(std::sqrt(y)) : std::exp(-y);
  double term = y > 0 ? std::exp(s * std::log(y) - y - std::lgamma(s + 1)) : 0.0;
  for (; s + 1 <= df / 2.0 + 1e-9; s += 1) {
    q += term;
    term *= y / (s + 1);
  }
  return q;
}

// The x with chi_square_sf(x, df) = alpha, by bisection (df 3: 21.108, df 8: 31.828 at 1e-4).
double chi_square_critical(int df, double alpha) {
  double lo = 0, hi = 1000;
  for (int i = 0; i < 200; ++i) (chi_square_sf((lo + hi) / 2, df) > alpha ? lo : hi) = (lo + hi) / 2;
  return lo;
}

constexpr double kAlpha = 1e-4;  // reject losslessness at p < 1e-4

struct ChiSquare {
  double stat = 0;           // over the cells of nonzero expected count
  int df = -1;               // those cells - 1
  int64_t impossible = 0;    // samples in cells of zero probability
  double p_value() const { return impossible ? 0.0 : chi_square_sf(stat, df); }
  double critical() const { return chi_square_critical(df, kAlpha); }
  bool rejects() const { return p_value() < kAlpha; }
};

ChiSquare chi_square_test(const std::vector<int64_t>& counts, const Dist& probs) {
  int64_t n = 0;
  for (int64_t c : counts) n += c;
  ChiSquare r;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] <= 0) {
      r.impossible += counts[i];
      continue;
    }
    const double expected = probs[i] * n;
    r.stat += (counts[i] - expected) * (counts[i] - expected) / expected;
    ++r.df;
  }
  return r;
}

void PrintTo(const ChiSquare& r, std::ostream* os) {
  *os << "chi2 " << r.stat << ", df " << r.df << ", p " << r.p_value() << ", critical " << r.critical()
      << ", impossible " << r.impossible;
}

constexpr int kVocab = 5;
constexpr int kGamma = 2;
constexpr int64_t kRounds = 200000;
// p_0..p_2 and q_0..q_1, row-major; each p row has a token of probability 0 that q can propose.
const std::vector<float> kTarget = {0.35f, 0.25f, 0.20f, 0.20f, 0.00f,
                                    0.05f, 0.45f, 0.00f, 0.30f, 0.20f,
                                    0.20f, 0.20f, 0.20f, 0.00f, 0.40f};
const std::vector<float> kDraft = {0.10f, 0.30f, 0.25f, 0.10f, 0.25f,
                                   0.30f, 0.30f, 0.20f, 0.10f, 0.10f};

Dist row(const std::vector<float>& table, int k) {
  return Dist(table.begin() + k * kVocab, table.begin() + (k + 1) * kVocab);
}

// The procedure's exact (n_accepted, next_token) law, cell a * vocab + y: with beta_k the chance
// slot k is accepted (sum of min(p_k, q_k)), P(a, y) = beta_0..beta_{a-1} (1 - beta_a) r_a(y) for
// a < gamma (r_a the normalised residual) and beta_0..beta_{gamma-1} p_gamma(y) for a = gamma.
Dist exact_outcome_law() {
  Dist law((kGamma + 1) * kVocab);
  double reach = 1;
  for (int a = 0; a < kGamma; ++a) {
    const Dist p = row(kTarget, a), q = row(kDraft, a), r = residual_or_target(p, q);
    double beta = 0;
    for (int y = 0; y < kVocab; ++y) beta += std::min(p[y], q[y]);
    for (int y = 0; y < kVocab; ++y) law[a * kVocab + y] = reach * (1 - beta) * r[y];
    reach *= beta;
  }
  for (int y = 0; y < kVocab; ++y) law[kGamma * kVocab + y] = reach * row(kTarget, kGamma)[y];
  return law;
}

using Verifier = VerifyOutcome (*)(std::span<const float>, std::span<const float>, std::span<const int64_t>,
                                   int64_t, Rng&);

// verify_sampled with the acceptance test's p and q swapped: the control that must fail.
VerifyOutcome broken_verify(std::span<const float> target_probs, std::span<const float> draft_probs,
                            std::span<const int64_t> draft_tokens, int64_t vocab, Rng& rng) {
  for (size_t k = 0; k < draft_tokens.size(); ++k) {
    const float* p = target_probs.data() + k * vocab;
    const float* q = draft_probs.data() + k * vocab;
    const double px = p[draft_tokens[k]], qx = q[draft_tokens[k]];
    if (!(rng.uniform() * px < qx)) {
      Dist r = residual_or_target(Dist(p, p + vocab), Dist(q, q + vocab));
      std::vector<float> rf(r.begin(), r.end());
      return {static_cast<int64_t>(k), sample_from_probs(rf.data(), vocab, rng)};
    }
  }
  const int64_t n = static_cast<int64_t>(draft_tokens.size());
  return {n, sample_from_probs(target_probs.data() + n * vocab, vocab, rng)};
}

struct Counts {
  std::vector<int64_t> first = std::vector<int64_t>(kVocab);                // first emitted token
  std::vector<int64_t> second = std::vector<int64_t>(kVocab);               // second, when a >= 1
  std::vector<int64_t> outcome = std::vector<int64_t>((kGamma + 1) * kVocab);  // (n_accepted, next)
};

// kRounds rounds: draft x_k ~ q_k with the request's Rng, then verify with the same Rng.
Counts run_rounds(Verifier verify, uint64_t seed) {
  Rng rng(seed);
  Counts counts;
  std::vector<int64_t> drafts(kGamma);
  for (int64_t i = 0; i < kRounds; ++i) {
    for (int k = 0; k < kGamma; ++k) drafts[k] = sample_from_probs(kDraft.data() + k * kVocab, kVocab, rng);
    const VerifyOutcome o = verify(kTarget, kDraft, drafts, kVocab, rng);
    std::vector<int64_t> emitted(drafts.begin(), drafts.begin() + o.n_accepted);
    emitted.push_back(o.next_token);
    ++counts.first[emitted[0]];
    if (emitted.size() > 1) ++counts.second[emitted[1]];
    ++counts.outcome[o.n_accepted * kVocab + o.next_token];
  }
  return counts;
}

struct Tests {
  ChiSquare first, second, outcome;
};

// The first emitted token must follow p_0; the second, when the round emits one, p_1 (given slot 0
// was accepted, slot 1 is a fresh exact draw from p_1); (n_accepted, next) the exact law above.
Tests chi_square_tests(const Counts& c) {
  return {chi_square_test(c.first, row(kTarget, 0)), chi_square_test(c.second, row(kTarget, 1)),
          chi_square_test(c.outcome, exact_outcome_law())};
}

constexpr uint64_t kSeed = 20240611;

TEST(RejectionMonteCarlo, VerifySampledMatchesTheTarget) {
  const auto t0 = std::chrono::steady_clock::now();
  const Tests t = chi_square_tests(run_rounds(verify_sampled, kSeed));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cout << "  " << kRounds << " rounds in " << seconds << " s\n";
  for (const auto& [name, r] : {std::pair{"first token", t.first}, std::pair{"second token", t.second},
                                std::pair{"(n_accepted, next)", t.outcome}}) {
    std::cout << "  " << name << ": " << testing::PrintToString(r) << "\n";
    EXPECT_EQ(r.impossible, 0) << name;
    EXPECT_FALSE(r.rejects()) << name << ": " << testing::PrintToString(r);
  }
  EXPECT_EQ(t.first.df, 3);
  EXPECT_EQ(t.outcome.df, 8);  // 9 cells of nonzero probability
}

TEST(RejectionMonteCarlo, BrokenVerifierFailsTheSameTest) {
  const Tests t = chi_square_tests(run_rounds(broken_verify, kSeed));
  std::cout << "  broken first token: " << testing::PrintToString(t.first) << "\n";
  std::cout << "  broken (n_accepted, next): " << testing::PrintToString(t.outcome) << "\n";
  EXPECT_TRUE(t.first.rejects());
  EXPECT_TRUE(t.outcome.rejects());
  // Not only through tokens of probability zero: the possible cells alone are far off too.
  EXPECT_GT(t.first.stat, t.first.critical());
  EXPECT_GT(t.outcome.stat, t.outcome.critical());
}

TEST(RejectionMonteCarlo, ChiSquareTailMatchesTables) {
  // Published 1e-4 upper critical values.
  EXPECT_NEAR(chi_square_critical(1, 1e-4), 15.137, 1e-3);
  EXPECT_NEAR(chi_square_critical(3, 1e-4), 21.108, 1e-3);
  EXPECT_NEAR(chi_square_critical(8, 1e-4), 31.828, 1e-3);
  EXPECT_NEAR(chi_square_sf(3.841, 1), 0.05, 1e-4);
  EXPECT_NEAR(chi_square_sf(9.488, 4), 0.05, 1e-4);
}

// ---------------------------------------------------------------------------------------------
// Edge cases of verify_sampled.

TEST(RejectionEdge, TokenWithEqualProbabilitiesIsAlwaysAccepted) {
  const std::vector<float> p = {0.5f, 0.3f, 0.2f, 0.0f, 0.2f, 0.8f}, q = {0.1f, 0.3f, 0.6f};
  const std::vector<int64_t> drafts = {1};  // p(1) = q(1), though the rows differ elsewhere
  for (uint64_t seed = 0; seed < 5000; ++seed) {
    Rng rng(seed);
    EXPECT_EQ(verify_sampled(p, q, drafts, 3, rng).n_accepted, 1);
  }
}

TEST(RejectionEdge, TokenOfZeroTargetProbabilityIsAlwaysRejected) {
  const std::vector<float> p = {0.0f, 0.6f, 0.4f, 0.3f, 0.3f, 0.4f}, q = {0.9f, 0.05f, 0.05f};
  const std::vector<int64_t> drafts = {0};
  for (uint64_t seed = 0; seed < 5000; ++seed) {
    Rng rng(seed);
    const VerifyOutcome o = verify_sampled(p, q, drafts, 3, rng);
    EXPECT_EQ(o.n_accepted, 0);
    EXPECT_NE(o.next_token, 0);
  }
}

// A token the drafter gave probability zero cannot have come from q; it is rejected, not trusted.
TEST(RejectionEdge, TokenOfZeroDraftProbabilityIsRejected) {
  const std::vector<float> p = {0.5f, 0.5f, 0.0f, 0.5f, 0.5f, 0.0f}, q = {0.0f, 1.0f, 0.0f};
  const std::vector<int64_t> drafts = {0};
  for (uint64_t seed = 0; seed < 1000; ++seed) {
    Rng rng(seed);
    EXPECT_EQ(verify_sampled(p, q, drafts, 3, rng).n_accepted, 0);
  }
}

TEST(RejectionEdge, EmittedTokensNeverHaveZeroTargetProbability) {
  constexpr int vocab = 6, n = 3;
  for (uint64_t seed = 0; seed < 3000; ++seed) {
    std::vector<float> p, q;
    for (int k = 0; k <= n; ++k)
      for (double v : random_dist(seed * 7 + k, vocab)) p.push_back(static_cast<float>(v));
    for (int k = 0; k < n; ++k)
      for (double v : random_dist(seed * 7 + k + 100000, vocab)) q.push_back(static_cast<float>(v));
    Rng rng(seed);
    std::vector<int64_t> drafts;
    for (int k = 0; k < n; ++k) drafts.push_back(sample_from_probs(q.data() + k * vocab, vocab, rng));
    const VerifyOutcome o = verify_sampled(p, q, drafts, vocab, rng);
    for (int64_t k = 0; k < o.n_accepted; ++k) EXPECT_GT(p[k * vocab + drafts[k]], 0.0f);
    EXPECT_GT(p[o.n_accepted * vocab + o.next_token], 0.0f) << "seed " << seed;
  }
}

// Rounding can leave p <= q everywhere (rows summing to slightly different totals); the residual
// is then empty, and the token comes from p instead.
TEST(RejectionEdge, EmptyResidualFallsBackToTheTarget) {
  const std::vector<float> p = {0.0f, 0.4f, 0.6f, 1.0f, 0.0f, 0.0f}, q = {0.0f, 0.9f, 0.6f};
  const std::vector<int64_t> drafts = {1};  // accepted with probability 0.4 / 0.9
  int64_t rejected = 0, twos = 0;
  for (uint64_t seed = 0; seed < 20000; ++seed) {
    Rng rng(seed);
    const VerifyOutcome o = verify_sampled(p, q, drafts, 3, rng);
    if (o.n_accepted == 1) continue;
    ++rejected;
    ASSERT_NE(o.next_token, 0);
    twos += o.next_token == 2;
  }
  EXPECT_NEAR(static_cast<double>(rejected) / 20000, 0.5 / 0.9, 0.02);
  EXPECT_NEAR(static_cast<double>(twos) / rejected, 0.6, 0.02);  // p(2), not the empty residual
}

TEST(RejectionEdge, NoDraftsDrawsTheBonusFromTheTarget) {
  const std::vector<float> p = {0.0f, 0.0f, 1.0f, 0.0f};
  Rng rng(3);
  const VerifyOutcome o = verify_sampled(p, {}, {}, 4, rng);
  EXPECT_EQ(o.n_accepted, 0);
  EXPECT_EQ(o.next_token, 2);
  EXPECT_EQ(rng.counter(), 1u);
}

// One uniform per examined slot and one for the emitted token, so a request's stream advances by
// what it verified, whatever else runs in the batch.
TEST(RejectionEdge, ConsumesOneUniformPerExaminedSlotPlusOne) {
  const std::vector<int64_t> drafts = {0, 1};
  const std::vector<float> q = {0.5f, 0.5f, 0.0f, 1.0f};  // vocab 2: q_0, q_1
  struct Case {
    std::vector<float> p;  // p_0..p_2
    int64_t n_accepted;
    uint64_t uniforms;
  };
  const Case cases[] = {
      {{0.5f, 0.5f, 0.0f, 1.0f, 0.5f, 0.5f}, 2, 3},  // both accepted (p = q at the tokens), bonus
      {{0.5f, 0.5f, 1.0f, 0.0f, 0.5f, 0.5f}, 1, 3},  // slot 1 rejected (p = 0), residual
      {{0.0f, 1.0f, 1.0f, 0.0f, 0.5f, 0.5f}, 0, 2},  // slot 0 rejected, slot 1 never examined
  };
  for (const Case& c : cases) {
    Rng rng(1);
    EXPECT_EQ(verify_sampled(c.p, q, drafts, 2, rng).n_accepted, c.n_accepted);
    EXPECT_EQ(rng.counter(), c.uniforms);
  }
}

// ---------------------------------------------------------------------------------------------

TEST(VerifyGreedy, AllAcceptedEmitsTheLastArgmax) {
  const VerifyOutcome o = verify_greedy(std::vector<int64_t>{3, 1, 4, 2}, std::vector<int64_t>{3, 1, 4});
  EXPECT_EQ(o.n_accepted, 3);
  EXPECT_EQ(o.next_token, 2);
}

TEST(VerifyGreedy, MismatchStopsAtTheSlot) {
  const std::vector<int64_t> argmax = {3, 1, 4, 2};
  for (int64_t k = 0; k < 3; ++k) {
    std::vector<int64_t> drafts = {3, 1, 4};
    drafts[k] = 0;
    const VerifyOutcome o = verify_greedy(argmax, drafts);
    EXPECT_EQ(o.n_accepted, k);
    EXPECT_EQ(o.next_token, argmax[k]);
  }
}

TEST(VerifyGreedy, NoDraftsEmitsTheArgmax) {
  const VerifyOutcome o = verify_greedy(std::vector<int64_t>{5}, {});
  EXPECT_EQ(o.n_accepted, 0);
  EXPECT_EQ(o.next_token, 5);
}

}  // namespace
}  // namespace dspark::sampling
