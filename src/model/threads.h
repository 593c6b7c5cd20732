// How many threads the kernels and libtorch use. libgomp may start with a single thread (we saw
// omp_get_max_threads() == 1 on a 2-core machine), which halves decode speed, so the CLI sets
// the count explicitly: all cores unless the user says otherwise, as llama.cpp does.
#pragma once

namespace dspark::model {

// n <= 0 means all hardware threads. Sets both OpenMP's and libtorch's intra-op thread count.
void set_num_threads(int n);
int num_threads();

}  // namespace dspark::model
