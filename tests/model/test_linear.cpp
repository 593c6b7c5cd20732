// model::Linear: the streaming kernel past its row count (in pieces), the bf16 math a layer asks
// for reaching the kernel, and forward_rows giving forward()'s bits.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "model/kernels/cpu_isa.h"
#include "model/linear.h"

namespace dspark::model {
namespace {

// x: [rows, 96] f32, a bf16 weight [70, 96] and a bias, fixed seed.
struct Case {
  torch::Tensor x, weight, bias;
  explicit Case(int64_t rows) {
    torch::manual_seed(5);
    x = torch::randn({rows, 96});
    weight = torch::randn({70, 96}).to(torch::kBFloat16);
    bias = torch::randn({70});
  }
};

// 150 rows of a bf16 weight are three pieces of the streaming kernel (64, 64, 22): each row equals
// the same row computed alone bit for bit (the kernel's rows never depend on their neighbours),
// and the whole equals libtorch's f32 matmul of the same weights to f32 rounding.
TEST(Linear, Bf16WeightsPastTheKernelsRowsRunInPiecesLikeOneRowAtATime) {
  torch::NoGradGuard no_grad;
  const Case c(150);
  const Linear linear{c.weight, c.bias};
  const torch::Tensor y = linear.forward(c.x);
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{150, 70}));
  for (int64_t row : {0L, 63L, 64L, 127L, 128L, 149L})
    EXPECT_TRUE(torch::equal(y[row], linear.forward(c.x.narrow(0, row, 1))[0])) << "row " << row;
  const torch::Tensor reference = torch::linear(c.x.to(torch::kFloat64), c.weight.to(torch::kFloat64), c.bias.to(torch::kFloat64));
  EXPECT_LT((y.to(torch::kFloat64) - reference).abs().max().item<double>(), 1e-4);
}

// kDotBf16 rounds the activations to bf16 where the CPU has bf16 dot products: the result is then
// the exact matmul of the rounded x, and not the exact matmul of x (the layer's choice reached the
// kernel); elsewhere it falls back to exact products.
TEST(Linear, DotBf16MathRoundsTheActivationsWhereTheCpuHasIt) {
  torch::NoGradGuard no_grad;
  const Case c(8);
  Linear linear{c.weight, {}};
  linear.bf16_math = kernels::Bf16Math::kDotBf16;
  const torch::Tensor y = linear.forward(c.x).to(torch::kFloat64);
  const torch::Tensor w = c.weight.to(torch::kFloat64);
  const double to_exact = (y - torch::linear(c.x.to(torch::kFloat64), w)).abs().max().item<double>();
  const double to_rounded =
      (y - torch::linear(c.x.to(torch::kBFloat16).to(torch::kFloat64), w)).abs().max().item<double>();
  if (kernels::current_isa() >= kernels::Isa::kAvx512Bf16) {
    EXPECT_LT(to_rounded, 1e-4);
    EXPECT_GT(to_exact, 1e-3);  // bf16 rounding of 96 activations of size ~1 moves a sum by ~1e-2
  } else {
    EXPECT_LT(to_exact, 1e-4);
  }
}

// forward_rows (the decoder layers' rows path, raw pointers) is forward() without tensors: bitwise
// the same rows for every weight form a layer can hold (f32, bf16, f16, q8_0, q4_0; with a bias
// and with the drafters' bf16 math) and every row count up to the kernel's 64, and it writes
// exactly its m x n_out outputs (NaN sentinels after them stay).
TEST(Linear, ForwardRowsEqualsForwardBitwise) {
  torch::NoGradGuard no_grad;
  const Case c(64);
  std::vector<std::pair<std::string, Linear>> layers;
  layers.push_back({"bf16 + bias", Linear{c.weight, c.bias}});
  layers.push_back({"f32", Linear{c.weight.to(torch::kFloat32), {}}});
  layers.push_back({"f16 + bias", Linear{c.weight.to(torch::kFloat16), c.bias}});
  Linear dot{c.weight, {}};
  dot.bf16_math = kernels::Bf16Math::kDotBf16;
  layers.push_back({"bf16, dot-bf16 math", dot});
  for (kernels::QuantType type : {kernels::QuantType::kQ8_0, kernels::QuantType::kQ4_0}) {
    Linear q{c.weight.to(torch::kFloat32), c.bias};
    q.quantize(type, "test");
    layers.push_back({type == kernels::QuantType::kQ8_0 ? "q8_0 + bias" : "q4_0 + bias", q});
  }
  for (const auto& [name, linear] : layers) {
    for (int64_t m : {1L, 3L, 8L, 64L}) {
      SCOPED_TRACE(name + ", " + std::to_string(m) + " rows");
      const torch::Tensor x = c.x.narrow(0, 0, m).contiguous();
      const torch::Tensor want = linear.forward(x);
      std::vector<float> got(m * linear.n_out() + 16, std::nanf(""));
      linear.forward_rows(x.data_ptr<float>(), m, got.data());
      const torch::Tensor rows = torch::from_blob(got.data(), {m, linear.n_out()});
      EXPECT_TRUE(torch::equal(rows, want));
      for (size_t i = m * linear.n_out(); i < got.size(); ++i) EXPECT_TRUE(std::isnan(got[i])) << "wrote past the rows";
    }
  }
}

}  // namespace
}  // namespace dspark::model
