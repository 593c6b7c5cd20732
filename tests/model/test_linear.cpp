// model::Linear: the streaming kernel past its row count (in pieces), and the bf16 math a layer
// asks for reaching the kernel.
#include <gtest/gtest.h>
#include <torch/torch.h>

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

}  // namespace
}  // namespace dspark::model
