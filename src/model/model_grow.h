// Growing a trained model into a larger one that computes the same function (Net2Net-style
// widening plus identity-initialised layers), so that training the larger model starts from the
// smaller one's loss instead of from scratch.
//
// With k = big hidden / small hidden, the big residual stream holds k copies of the small one,
// x' = [x, ..., x]: RMSNorm of x' is k copies of RMSNorm of x (the mean of squares is unchanged),
// so every norm weight is copied k times; a matrix that reads the stream takes the small weights
// divided by k on each copy; a matrix that writes it repeats the small rows. The small model's
// heads, KV heads and MLP neurons come first; the extra ones start random with their output
// columns (o_proj, down_proj) zero. Small layer i becomes big layer floor(i * L / l); the other
// layers start random with o_proj and down_proj zero, so they add nothing to the residual. The tied
// LM head reads the stream through the final norm, whose weight is divided by k. The random parts
// read the copies with different weights, so training tells the copies apart.
#pragma once
#include <string>

#include "model/config.h"
#include "model/model_init.h"

namespace dspark::model {

// Initial weights of `big` grown from the checkpoint in small_dir (config.json + safetensors).
// The random parts are random_weights(big, seed)'s. Throws dspark::Error naming what does not fit:
// both must share architecture, vocabulary, head size, heads per KV head, RoPE, norm epsilon, q/k
// norms and embedding tying, have no attention bias, and big must have at least as many layers,
// heads, KV heads and MLP neurons, and a hidden size that is a whole multiple of small's.
InitialWeights grown_weights(const std::string& small_dir, const ModelConfig& big, uint64_t seed);

}  // namespace dspark::model
