#include "model/device.h"

#include <regex>

#include "common/error.h"

namespace dspark::model {

namespace {

torch::Device& default_device_storage() {
  static torch::Device device = torch::kCPU;
  return device;
}

}  // namespace

torch::Device parse_device(const std::string& name, const std::string& flag) {
  static const std::regex pattern("cpu|cuda(:[0-9]{1,3})?");
  if (!std::regex_match(name, pattern))
    throw Error(flag + ": expected cpu, cuda or cuda:N, got '" + name + "'");
  const torch::Device device(name);
  if (device.is_cpu()) return device;
  if (!torch::cuda::is_available())
    throw Error(flag + " " + name + ": this libtorch has no usable CUDA (built for the CPU only, or no GPU visible)");
  const int64_t n_gpus = static_cast<int64_t>(torch::cuda::device_count());
  if (device.has_index() && device.index() >= n_gpus)
    throw Error(flag + " " + name + ": only " + std::to_string(n_gpus) + " CUDA device(s) visible");
  return device;
}

torch::Device default_device() { return default_device_storage(); }

void set_default_device(const torch::Device& device) { default_device_storage() = device; }

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.has_index() ? device.index() : -1);
}

std::string device_label(const torch::Device& device) {
  if (device.is_cpu()) return "cpu";
  return c10::DeviceTypeName(device.type(), /*lower_case=*/true) + ":" +
         std::to_string(device.has_index() ? device.index() : 0);
}

}  // namespace dspark::model
