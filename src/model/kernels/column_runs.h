// How linear_small shares one call's output columns between threads. Columns go in chunks; each
// thread owns a contiguous run of chunks and works through it front to back, so each core streams
// its own part of the weights in memory order. A thread whose run is done takes the remaining
// chunks from the backs of the others' runs. So when one core is slowed down (this VM's other
// tenants do that for seconds at a time), the other finishes its tail instead of waiting for it
// at the end of the call.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>

namespace dspark::kernels {

class ColumnRuns {
 public:
  // Chunks of chunk_columns columns over [0, n), shared by `threads` threads (the last chunk may
  // be shorter).
  ColumnRuns(int64_t n, int64_t chunk_columns, int threads);

  // The next chunk for thread `self` as [*begin, *end); false when every chunk is handed out.
  // Each chunk goes to exactly one caller.
  bool next(int self, int64_t* begin, int64_t* end);

 private:
  // One cache line each, so that claims on one run do not stall the thread working another.
  struct alignas(64) Run {
    int64_t first = 0, count = 0;      // chunks [first, first + count)
    int64_t taken_front = 0;           // claims by the owner, from the front; only it touches this
    std::atomic<int64_t> claimed{0};  // claims made on this run; those below count succeeded
    std::atomic<int64_t> stolen{0};   // successful claims from the back, by other threads
  };
  // Whether a chunk of `run` is still free, reserving it if so.
  static bool claim(Run& run);
  void chunk_columns(int64_t chunk, int64_t* begin, int64_t* end) const;

  int64_t n_, chunk_columns_;
  int threads_;
  std::unique_ptr<Run[]> runs_;
};

}  // namespace dspark::kernels
