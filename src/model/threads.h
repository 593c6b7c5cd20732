// How many threads the kernels and libtorch use. libgomp may start with a single thread (we saw
// omp_get_max_threads() == 1 on a 2-core machine), which halves decode speed, so the CLI sets
// the count explicitly: all cores unless the user says otherwise, as llama.cpp does.
#pragma once

namespace dspark::model {

// n <= 0 means all hardware threads. Sets both OpenMP's and libtorch's intra-op thread count.
void set_num_threads(int n);
int num_threads();

// Ends the calling thread's idle OpenMP workers. Call it on a thread that has run parallel work
// (loading a model) before another thread takes the work over (the server's engine thread): while
// two teams' threads exist, more than the CPUs, libgomp takes the machine for oversubscribed and
// its workers sleep in the kernel after every parallel region instead of spinning, so each of a
// step's ~200 regions pays a futex wake (measured: 17% of a serving step's samples in the kernel's
// wake-up path, steps 1.3-1.8x their in-process time).
void release_idle_threads();

}  // namespace dspark::model
