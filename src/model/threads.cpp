#include "model/threads.h"

#include <omp.h>

#include <thread>

#include <torch/torch.h>

namespace dspark::model {

void set_num_threads(int n) {
  if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  omp_set_num_threads(n);
  torch::set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

void release_idle_threads() { omp_pause_resource_all(omp_pause_soft); }

}  // namespace dspark::model
