// The KV cache's element type (--kv-cache-dtype): a bf16 cache holds half the bytes, keeps what
// speculative decoding relies on (a verified token's logits are the bits it gets decoded alone),
// and moves the logits by no more than its rounding does.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "forward_test_util.h"
#include "model/kernels/cpu_isa.h"
#include "model/kernels/kernel_test_util.h"
#include "model/transformer.h"
#include "test_util.h"

namespace dspark::model {
namespace {

using test::fixture;

Transformer load_tiny(KvCacheDType kv, Kernels kernels = Kernels::kAuto) {
  return Transformer::load(fixture("tiny-qwen3-untied").string(),
                           {.weight_dtype = WeightDType::kF32, .kv_cache_dtype = kv, .kernels = kernels});
}

// Logits of `n` tokens verified in one forward after a prefill of `prompt`.
torch::Tensor verify_logits(Transformer& model, const std::vector<int64_t>& prompt, const std::vector<int64_t>& drafts) {
  KvCache cache = model.make_cache(1, 128);
  const int64_t slot = *cache.allocate();
  model.prefill(cache, slot, prompt);
  ForwardBatch verify;
  verify.token_ids = drafts;
  verify.seqs = {{slot, static_cast<int64_t>(drafts.size())}};
  for (size_t i = 0; i < drafts.size(); ++i) verify.logit_rows.push_back(static_cast<int64_t>(i));
  return model.forward(cache, verify).logits;
}

// n ids spread over the vocabulary from `start`.
std::vector<int64_t> spread_ids(int64_t n, int64_t start, int64_t vocab) {
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < n; ++i) ids.push_back((start + 37 * i) % vocab);
  return ids;
}

const int64_t kVocab = 256;  // the tiny fixtures' vocabulary is larger; these ids stay inside it
const std::vector<int64_t> kPrompt = spread_ids(41, 3, kVocab);
const std::vector<int64_t> kDrafts = spread_ids(8, 101, kVocab);

TEST(KvCacheDType, Bf16CacheHoldsHalfTheBytesInBf16Tensors) {
  Transformer model = load_tiny(KvCacheDType::kBF16);
  KvCache cache = model.make_cache(2, 64);
  EXPECT_EQ(cache.dtype(), KvCacheDType::kBF16);
  EXPECT_EQ(cache.keys(0).scalar_type(), torch::kBFloat16);
  EXPECT_EQ(cache.values(0).scalar_type(), torch::kBFloat16);
  KvCache f32 = load_tiny(KvCacheDType::kF32).make_cache(2, 64);
  EXPECT_EQ(2 * cache.keys(0).nbytes(), f32.keys(0).nbytes());
}

// The two ways keys and values get into a bf16 cache, the rows path's write_kv_rows and tensor
// code's KvCache::write, store the same bits (keys in their key blocks), and read_keys /
// read_values give back the values rounded to bf16 in [kv, position, head_dim] order. Positions
// 5..36 straddle two key-block boundaries.
TEST(KvCacheDType, Bf16WritesOfBothPathsAgreeAndReadBack) {
  const KvCacheShape shape{1, 2, 40, 3, 64};  // 1 layer, 2 slots, capacity 40 (-> 48), 3 kv heads, head_dim 64
  KvCache by_rows(shape, torch::kCPU, KvCacheDType::kBF16), by_tensors(shape, torch::kCPU, KvCacheDType::kBF16);
  EXPECT_EQ(by_rows.capacity(), 48);
  const int64_t n = 32, first = 5, slot = 1;
  const torch::Tensor k = torch::randn({n, shape.n_kv_heads, shape.head_dim}, torch::TensorOptions().dtype(torch::kFloat32));
  const torch::Tensor v = torch::randn({n, shape.n_kv_heads, shape.head_dim});
  write_kv_rows(by_rows, 0, slot, first, n, k.data_ptr<float>(), v.data_ptr<float>(), shape.n_kv_heads * shape.head_dim);
  by_tensors.write(0, torch::full({n}, slot, torch::kLong), torch::arange(first, first + n), k, v);
  EXPECT_TRUE(torch::equal(by_rows.keys(0), by_tensors.keys(0)));
  EXPECT_TRUE(torch::equal(by_rows.values(0), by_tensors.values(0)));
  const torch::Tensor keys = by_rows.read_keys(0, slot, first + n).narrow(1, first, n);  // [kv, n, hd]
  const torch::Tensor values = by_rows.read_values(0, slot, first + n).narrow(1, first, n);
  EXPECT_TRUE(torch::equal(keys, k.to(torch::kBFloat16).permute({1, 0, 2})));
  EXPECT_TRUE(torch::equal(values, v.to(torch::kBFloat16).permute({1, 0, 2})));
}

// Decoding the 8 drafts one at a time gives each bitwise the logits the 8-token verify step gave
// it: what greedy speculative decoding's equality with autoregressive decoding rests on.
TEST(KvCacheDType, Bf16CacheVerifyEqualsTokenByTokenDecodeBitwise) {
  torch::NoGradGuard no_grad;
  kernels::testing::DispatchGuard guard;
  for (kernels::Isa isa : kernels::available_isas()) {
    kernels::set_isa(isa);
    SCOPED_TRACE(kernels::isa_name(isa));
    Transformer model = load_tiny(KvCacheDType::kBF16);
    const torch::Tensor verified = verify_logits(model, kPrompt, kDrafts);
    KvCache cache = model.make_cache(1, 128);
    const int64_t slot = *cache.allocate();
    model.prefill(cache, slot, kPrompt);
    for (size_t i = 0; i < kDrafts.size(); ++i) {
      const torch::Tensor decoded = model.decode(cache, {slot}, {kDrafts[i]});
      EXPECT_TRUE(torch::equal(decoded[0], verified[static_cast<int64_t>(i)])) << "draft " << i;
    }
  }
}

// Against the f32 cache: bf16 keeps 8 mantissa bits, so the logits (magnitude ~1-10 here) move by
// about 1e-2 at most; a wrong key, a misplaced position or an unrounded mix of halves moves them
// by far more. The tensor-ops path (what CUDA runs) reads the same bf16 cache in f32 arithmetic:
// within the same bound of the rows path, which rounds q and the probabilities to bf16 as well
// where AVX512_BF16 is present.
TEST(KvCacheDType, Bf16CacheLogitsWithinItsRoundingOfTheF32Cache) {
  torch::NoGradGuard no_grad;
  Transformer f32 = load_tiny(KvCacheDType::kF32);
  Transformer bf16 = load_tiny(KvCacheDType::kBF16);
  Transformer bf16_tensor_ops = load_tiny(KvCacheDType::kBF16, Kernels::kTensorOps);
  const torch::Tensor exact = verify_logits(f32, kPrompt, kDrafts);
  const torch::Tensor rounded = verify_logits(bf16, kPrompt, kDrafts);
  const torch::Tensor tensor_ops = verify_logits(bf16_tensor_ops, kPrompt, kDrafts);
  const double scale = exact.abs().max().item<double>();
  EXPECT_GT(scale, 0.5);
  EXPECT_LE((rounded - exact).abs().max().item<double>(), 2e-2 * scale);
  EXPECT_LE((tensor_ops - rounded).abs().max().item<double>(), 2e-2 * scale);
  EXPECT_FALSE(torch::equal(rounded, exact)) << "the bf16 cache did not round anything";
}

}  // namespace
}  // namespace dspark::model
