// Which device the models run on. The CLI's global --device sets a process-wide default that every
// LoadOptions starts from (as --threads sets the thread count), so each command loads its target
// and drafters there without a flag of its own; code that wants another device says so in its
// LoadOptions. Drafters follow their target's device.
#pragma once
#include <string>

#include <torch/torch.h>

namespace dspark::model {

// "cpu", "cuda" or "cuda:N". Throws dspark::Error (naming `flag` and the value) on anything else,
// and on a CUDA device this libtorch cannot use (built without CUDA, no GPU, or N out of range).
torch::Device parse_device(const std::string& name, const std::string& flag = "--device");

// The device LoadOptions start from: CPU unless set_default_device said otherwise.
torch::Device default_device();
void set_default_device(const torch::Device& device);

// Waits until the work queued on `device` has finished (a no-op on the CPU): timers read after it
// measure the work, not its queueing.
void synchronize(const torch::Device& device);

// A stable name for profiles and reports: "cpu", or "cuda:N" with the index made explicit
// (a bare "cuda" means the current device, index 0 unless the process changed it).
std::string device_label(const torch::Device& device);

}  // namespace dspark::model
