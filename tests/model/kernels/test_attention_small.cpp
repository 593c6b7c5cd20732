// attention_small against a double-precision reference, for every ISA variant this CPU supports,
// over head sizes (SIMD and generic paths), GQA ratios and ragged batches of sequences.
//
// The output is a convex combination of value rows, so its error is measured against the largest
// |v| (1 here). f32 differs from the reference through the q.k sums (~1e-7 relative on scores of
// magnitude ~10, hence ~1e-6 on probabilities) and the exp approximation (~1e-7); 1e-5 leaves
// margin. A causal mask off by one key, a wrong kv head or a dropped key moves the output by about
// one probability (>= ~1e-3 with at most ~400 keys and peaked scores), far above it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "model/kernels/attention_small.h"
#include "model/kernels/bf16.h"
#include "model/kernels/cpu_isa.h"
#include "model/kernels/kernel_test_util.h"

namespace dspark::kernels {
namespace {

using testing::DispatchGuard;
using testing::random_floats;

constexpr double kTolerance = 1e-5;

struct SeqSpec {
  int64_t n_past, token_begin, n_new;
  bool causal = true;
};

struct Case {
  int64_t n_heads, n_kv_heads, head_dim, capacity, n_tokens;
  std::vector<SeqSpec> seqs;
  float q_range;          // q entries uniform in [-q_range, q_range]: larger = peakier softmax
  bool integers = false;  // integer q, k in {-1, 0, 1}: dot products exact in f32
};

struct Data {
  std::vector<float> q;               // [n_tokens, n_heads, head_dim]
  std::vector<std::vector<float>> k;  // per seq [n_kv_heads, capacity, head_dim]
  std::vector<std::vector<float>> v;
  // The same keys and values in a bf16 cache (make_bf16_cache); k and v then hold their values.
  std::vector<std::vector<uint16_t>> k16, v16;
};

float round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

// Rounds the keys and values to bf16, keeping both their values (k, v) and the bits as a bf16
// cache holds them (k16 key-blocked, v16 row-major: model/kv_cache.h). capacity: a multiple of 16.
Data make_bf16_cache(Data d, int64_t capacity, int64_t head_dim) {
  for (size_t s = 0; s < d.k.size(); ++s) {
    std::vector<float>& k = d.k[s];
    std::vector<uint16_t> blocked(k.size());
    for (size_t i = 0; i < k.size(); ++i) {
      const int64_t head = static_cast<int64_t>(i) / (capacity * head_dim);
      const int64_t position = static_cast<int64_t>(i) / head_dim % capacity, e = static_cast<int64_t>(i) % head_dim;
      blocked[(head * capacity + position / 16 * 16) * head_dim + (e / 2) * 32 + (position % 16) * 2 + e % 2] =
          f32_to_bf16(k[i]);
      k[i] = round_bf16(k[i]);
    }
    d.k16.push_back(std::move(blocked));
    d.v16.emplace_back();
    for (float& x : d.v[s]) {
      d.v16.back().push_back(f32_to_bf16(x));
      x = round_bf16(x);
    }
  }
  return d;
}

// How the variant under test computes over a bf16 cache: with vdpbf16ps, q and the probabilities
// are rounded to bf16 too (attention_small.h), and the reference rounds them alike.
struct Rounding {
  bool q = false, p = false;
};

Rounding rounding_of(Isa isa, int64_t head_dim, KvDtype kv) {
  const bool dot = kv == KvDtype::kBF16 && isa >= Isa::kAvx512Bf16 && head_dim % 32 == 0;
  return {dot, dot};
}

Data make_data(const Case& c, uint32_t seed) {
  Data d;
  d.q = random_floats(c.n_tokens * c.n_heads * c.head_dim, -c.q_range, c.q_range, seed);
  for (size_t s = 0; s < c.seqs.size(); ++s) {
    const size_t size = c.n_kv_heads * c.capacity * c.head_dim;
    d.k.push_back(random_floats(size, -1.0f, 1.0f, seed + 10 + 2 * s));
    d.v.push_back(random_floats(size, -1.0f, 1.0f, seed + 11 + 2 * s));
  }
  if (c.integers) {
    for (float& x : d.q) x = std::round(x);
    for (auto& k : d.k) {
      for (float& x : k) x = std::round(x);
    }
  }
  return d;
}

float scale_of(const Case& c) { return 1.0f / std::sqrt(static_cast<float>(c.head_dim)); }

// NaN where no sequence writes, so untouched rows can be told apart.
std::vector<double> reference(const Case& c, const Data& d, Rounding rounding = {}) {
  const int64_t hd = c.head_dim, group = c.n_heads / c.n_kv_heads;
  std::vector<double> out(c.n_tokens * c.n_heads * hd, std::nan(""));
  for (size_t s = 0; s < c.seqs.size(); ++s) {
    const SeqSpec& seq = c.seqs[s];
    for (int64_t i = 0; i < seq.n_new; ++i) {
      const int64_t token = seq.token_begin + i;
      const int64_t visible = seq.causal ? seq.n_past + i + 1 : seq.n_past + seq.n_new;
      for (int64_t h = 0; h < c.n_heads; ++h) {
        const float* q = d.q.data() + (token * c.n_heads + h) * hd;
        const float* k = d.k[s].data() + (h / group) * c.capacity * hd;
        const float* v = d.v[s].data() + (h / group) * c.capacity * hd;
        std::vector<double> p(visible);
        double max = -1e300, sum = 0;
        for (int64_t j = 0; j < visible; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < hd; ++e) dot += double{rounding.q ? round_bf16(q[e]) : q[e]} * k[j * hd + e];
          p[j] = dot * scale_of(c);
          max = std::max(max, p[j]);
        }
        for (double& x : p) {
          x = std::exp(x - max);
          if (rounding.p) x = round_bf16(static_cast<float>(x));
          sum += x;
        }
        for (int64_t e = 0; e < hd; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < visible; ++j) acc += p[j] * v[j * hd + e];
          out[(token * c.n_heads + h) * hd + e] = acc / sum;
        }
      }
    }
  }
  return out;
}

// q defaults to d.q in its packed layout; a test may pass the same rows at a wider stride.
// Reads the bf16 cache (k16, v16) when the data has one.
std::vector<float> run(const Case& c, const Data& d, const float* q = nullptr, int64_t q_row_stride = 0) {
  const bool bf16 = !d.k16.empty();
  std::vector<AttentionSeq> seqs;
  for (size_t s = 0; s < c.seqs.size(); ++s) {
    const void* k = bf16 ? static_cast<const void*>(d.k16[s].data()) : d.k[s].data();
    const void* v = bf16 ? static_cast<const void*>(d.v16[s].data()) : d.v[s].data();
    seqs.push_back({k, v, c.seqs[s].n_past, c.seqs[s].token_begin, c.seqs[s].n_new, c.seqs[s].causal});
  }
  std::vector<float> out(d.q.size(), std::nanf(""));
  attention_small(q != nullptr ? q : d.q.data(), q != nullptr ? q_row_stride : c.n_heads * c.head_dim,
                  seqs.data(), static_cast<int64_t>(seqs.size()), c.n_heads, c.n_kv_heads, c.head_dim,
                  c.capacity, scale_of(c), out.data(), bf16 ? KvDtype::kBF16 : KvDtype::kF32);
  return out;
}

void expect_matches(const std::vector<float>& got, const std::vector<double>& want, double tolerance = kTolerance) {
  double worst = 0;
  size_t bad_untouched = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i])) {
      bad_untouched += !std::isnan(got[i]);
      continue;
    }
    const double err = std::fabs(got[i] - want[i]);
    worst = std::max(worst, std::isnan(err) ? 1e30 : err);
  }
  EXPECT_LT(worst, tolerance);
  EXPECT_EQ(bad_untouched, 0u) << "wrote rows that belong to no sequence";
}

// Ragged batch: sequences of different lengths, a decode (n_new 1), a verify (n_new 8), a prefill
// chunk from position 0, key counts on and off multiples of 16 and of the 64-key value blocks, and
// token 3 left to no sequence.
std::vector<SeqSpec> ragged() {
  return {{0, 0, 3}, {37, 4, 1}, {300, 5, 8}, {15, 13, 1}, {61, 14, 16}};
}

// Over a bf16 cache every variant is held to the same tolerance against a reference on the cache's
// (rounded) values, rounding q and the probabilities where the variant does: what remains is f32
// against double, and the odd probability whose f32 value sits on a bf16 rounding boundary.
void check_all_isas(const Case& c, uint32_t seed, KvDtype kv = KvDtype::kF32) {
  DispatchGuard guard;
  const Data d =
      kv == KvDtype::kBF16 ? make_bf16_cache(make_data(c, seed), c.capacity, c.head_dim) : make_data(c, seed);
  for (Isa isa : available_isas()) {
    set_isa(isa);
    SCOPED_TRACE(std::string("isa=") + isa_name(isa) + " heads=" + std::to_string(c.n_heads) + "/" +
                 std::to_string(c.n_kv_heads) + " head_dim=" + std::to_string(c.head_dim) +
                 (kv == KvDtype::kBF16 ? " bf16 cache" : ""));
    expect_matches(run(c, d), reference(c, d, rounding_of(isa, c.head_dim, kv)));
  }
}

TEST(AttentionSmall, RaggedBatchesAcrossHeadSizesAndGqaRatios) {
  uint32_t seed = 1;
  for (int64_t head_dim : {16, 64, 128, 80, 8, 24}) {
    for (auto [n_heads, n_kv_heads] : {std::pair{4, 4}, {4, 2}, {8, 2}}) {
      check_all_isas({n_heads, n_kv_heads, head_dim, 400, 30, ragged(), 3.0f}, seed += 100);
    }
  }
}

// A drafter's block: its 7 slots see each other both ways. Mixed with causal sequences in one call,
// so a flag leaking from one sequence to another shows.
TEST(AttentionSmall, NonCausalBlocksBesideCausalSequences) {
  const std::vector<SeqSpec> seqs = {{256, 0, 7, false}, {37, 7, 8, true}, {0, 15, 7, false}, {100, 22, 1, false}};
  for (int64_t head_dim : {64, 24}) check_all_isas({4, 2, head_dim, 400, 23, seqs, 3.0f}, 31 + head_dim);
}

TEST(AttentionSmall, SingleDecodeTokenLongCache) {
  check_all_isas({16, 8, 128, 1100, 1, {{1024, 0, 1}}, 3.0f}, 7);
}

TEST(AttentionSmall, VerifyEightTokens) {
  check_all_isas({16, 8, 128, 1100, 8, {{1000, 0, 8}}, 3.0f}, 8);
}

// Scores in the hundreds overflow exp without the max subtraction. Integer data keeps them exact
// in f32 (scale 1/8 is a power of two), so only the softmax itself is under test.
TEST(AttentionSmall, LargeScoresStayFinite) {
  check_all_isas({4, 2, 64, 200, 4, {{100, 0, 4}}, 400.0f, /*integers=*/true}, 9);
}

// On every ISA, each token of `batched` gets bitwise the output it gets decoded alone: one
// sequence, one new token at position n_past + i, over the same cache (f32 or bf16).
void expect_each_token_equals_it_decoded_alone(const Case& batched, const Data& d) {
  DispatchGuard guard;
  for (Isa isa : available_isas()) {
    set_isa(isa);
    SCOPED_TRACE(isa_name(isa));
    const std::vector<float> together = run(batched, d);
    const int64_t token_size = batched.n_heads * batched.head_dim;
    for (size_t s = 0; s < batched.seqs.size(); ++s) {
      const SeqSpec seq = batched.seqs[s];
      for (int64_t i = 0; i < seq.n_new; ++i) {
        Case alone = batched;
        alone.n_tokens = 1;
        alone.seqs = {{seq.n_past + i, 0, 1}};
        Data d_alone;
        const float* q = d.q.data() + (seq.token_begin + i) * token_size;
        d_alone.q.assign(q, q + token_size);
        d_alone.k = {d.k[s]};
        d_alone.v = {d.v[s]};
        if (!d.k16.empty()) {
          d_alone.k16 = {d.k16[s]};
          d_alone.v16 = {d.v16[s]};
        }
        const std::vector<float> single = run(alone, d_alone);
        const float* row = together.data() + (seq.token_begin + i) * token_size;
        for (int64_t e = 0; e < token_size; ++e) {
          ASSERT_EQ(single[e], row[e]) << "seq " << s << " token " << i << " element " << e;
        }
      }
    }
  }
}

// Verifying 8 tokens must give each token bitwise the output it gets when decoded alone, and a
// sequence must not be affected by others in the batch: speculative decoding compares them.
TEST(AttentionSmall, TokenOutputIndependentOfBatching) {
  const Case batched{16, 8, 128, 400, 13, {{290, 0, 8}, {37, 8, 5}}, 3.0f};
  expect_each_token_equals_it_decoded_alone(batched, make_data(batched, 21));
}

// The decoder layer hands attention its q rows in place inside the fused q/k/v rows: q read at a
// row stride wider than n_heads * head_dim must give the bits of the packed layout, and nothing
// between the rows (NaN here, which would spread into any output that read it) may be touched.
TEST(AttentionSmall, QRowsReadAtAWiderStride) {
  DispatchGuard guard;
  const Case c{16, 8, 128, 400, 13, {{290, 0, 8}, {37, 8, 5}}, 3.0f};
  const Data d = make_data(c, 23);
  const int64_t q_size = c.n_heads * c.head_dim, stride = q_size + 2 * c.n_kv_heads * c.head_dim;
  std::vector<float> wide(c.n_tokens * stride, std::nanf(""));
  for (int64_t t = 0; t < c.n_tokens; ++t) {
    std::copy_n(d.q.data() + t * q_size, q_size, wide.data() + t * stride);
  }
  for (Isa isa : available_isas()) {
    set_isa(isa);
    SCOPED_TRACE(isa_name(isa));
    const std::vector<float> packed = run(c, d);
    const std::vector<float> strided = run(c, d, wide.data(), stride);
    for (size_t e = 0; e < packed.size(); ++e) ASSERT_EQ(strided[e], packed[e]) << "element " << e;
  }
}

TEST(AttentionSmall, Bf16CacheRaggedBatchesAcrossHeadSizesAndGqaRatios) {
  uint32_t seed = 1001;
  for (int64_t head_dim : {128, 64, 32, 16, 80, 24}) {
    for (auto [n_heads, n_kv_heads] : {std::pair{4, 4}, {8, 2}}) {
      check_all_isas({n_heads, n_kv_heads, head_dim, 400, 30, ragged(), 3.0f}, seed += 100, KvDtype::kBF16);
    }
  }
}

TEST(AttentionSmall, Bf16CacheNonCausalBlocksAndLongContexts) {
  const std::vector<SeqSpec> blocks = {{256, 0, 7, false}, {37, 7, 8, true}, {0, 15, 7, false}, {101, 22, 1, false}};
  check_all_isas({4, 2, 128, 400, 23, blocks, 3.0f}, 77, KvDtype::kBF16);
  check_all_isas({16, 8, 128, 1104, 1, {{1024, 0, 1}}, 3.0f}, 78, KvDtype::kBF16);
  check_all_isas({16, 8, 128, 1104, 8, {{1001, 0, 8}}, 3.0f}, 79, KvDtype::kBF16);
}

// The bf16 cache's outputs, like the f32 cache's, may not depend on what else shares the call: a
// verified token gets bitwise what it gets decoded alone.
TEST(AttentionSmall, Bf16CacheTokenOutputIndependentOfBatching) {
  const Case batched{16, 8, 128, 400, 13, {{290, 0, 8}, {37, 8, 5}}, 3.0f};
  expect_each_token_equals_it_decoded_alone(batched,
                                            make_bf16_cache(make_data(batched, 22), batched.capacity, batched.head_dim));
}

TEST(AttentionSmall, NoSequencesTouchesNothing) {
  const float q[16] = {};
  std::vector<float> out(16, 5.0f);
  attention_small(q, 16, nullptr, 0, 1, 1, 16, 4, 1.0f, out.data());
  for (float v : out) EXPECT_EQ(v, 5.0f);
}

}  // namespace
}  // namespace dspark::kernels
