// Precompiled header for every translation unit that uses libtorch: parsing torch's headers
// dominates build time, so they are parsed once.
#pragma once
#include <torch/torch.h>
