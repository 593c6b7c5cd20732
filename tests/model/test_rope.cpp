#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "model/rope.h"

namespace dspark::model {
namespace {

ModelConfig llama3_config() {
  ModelConfig c;
  c.head_dim = 128;
  c.rope_theta = 500000.0;
  c.rope_scaling = {"llama3", 8.0, 1.0, 4.0, 8192};
  return c;
}

// Meta's llama3 scaling: wavelengths under 8192/4 = 2048 keep their frequency, those over
// 8192/1 are slowed by the factor 8, and the band between is interpolated.
TEST(Rope, Llama3ScalingKeepsHighAndSlowsLowFrequencies) {
  const ModelConfig scaled = llama3_config();
  ModelConfig plain = scaled;
  plain.rope_scaling = {};
  const torch::Tensor a = Rope(scaled).inv_freq(), b = Rope(plain).inv_freq();
  int n_kept = 0, n_divided = 0, n_between = 0;
  for (int64_t i = 0; i < 64; ++i) {
    const double f = b[i].item<double>(), g = a[i].item<double>(), wavelen = 2 * M_PI / f;
    if (wavelen < 2048) {
      EXPECT_DOUBLE_EQ(g, f) << i;
      ++n_kept;
    } else if (wavelen > 8192) {
      EXPECT_NEAR(g, f / 8, 1e-15) << i;
      ++n_divided;
    } else {
      EXPECT_LT(g, f) << i;
      EXPECT_GT(g, f / 8) << i;
      ++n_between;
    }
  }
  EXPECT_GT(n_kept, 0);
  EXPECT_GT(n_divided, 0);
  EXPECT_GT(n_between, 0);
}

// Rotation by position p then by q equals rotation by p + q only if the frequencies are used
// consistently; and position 0 is the identity.
TEST(Rope, PositionZeroIsIdentityAndNormIsKept) {
  ModelConfig c;
  c.head_dim = 16;
  c.rope_theta = 10000.0;
  const Rope rope(c);
  const torch::Tensor x = torch::randn({3, 2, 16});
  const torch::Tensor same = rope.apply(x, torch::zeros({3}, torch::kLong));
  EXPECT_LE((same - x).abs().max().item<double>(), 1e-7);
  const torch::Tensor rotated = rope.apply(x, torch::tensor({5, 100, 3000}, torch::kLong));
  EXPECT_LE((rotated.norm(2, -1) - x.norm(2, -1)).abs().max().item<double>(), 1e-5);
  EXPECT_GT((rotated - x).abs().max().item<double>(), 1e-2);
}

// The rows tables are cos_sin's, laid out [n, head_dim]: within one f32 rounding (both take the
// angle in f64; libtorch's and libm's f64 cos / sin may differ in the last bit before it), at
// positions up to 100k and with llama3 scaling, where a wrong frequency or half would be off by O(1).
TEST(Rope, CosSinRowsAreTheCosSinTables) {
  const ModelConfig c = llama3_config();
  const Rope rope(c);
  const std::vector<int64_t> positions = {0, 1, 7, 255, 4096, 99999};
  const auto [cos, sin] = rope.cos_sin(torch::tensor(positions, torch::kLong));
  const auto [cos_rows, sin_rows] = rope.cos_sin_rows(positions);
  ASSERT_EQ(cos_rows.sizes(), (std::vector<int64_t>{6, c.head_dim}));
  EXPECT_LE((cos_rows - cos.view({6, c.head_dim})).abs().max().item<float>(), 1e-7f);
  EXPECT_LE((sin_rows - sin.view({6, c.head_dim})).abs().max().item<float>(), 1e-7f);
}

}  // namespace
}  // namespace dspark::model
