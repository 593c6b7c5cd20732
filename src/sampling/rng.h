// Per-request random streams. Randomness is always passed in: every request owns an Rng seeded
// from its own seed, so its samples do not depend on what else runs in the batch.
#pragma once
#include <cstdint>

namespace dspark::sampling {

// SplitMix64's finaliser: a bijective scramble of 64 bits (also what derives a request's side
// streams from its seed).
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Counter-based generator (SplitMix64 over seed + counter): cheap, reproducible, and its state is
// two integers, so a request's stream can be saved and restored exactly.
class Rng {
 public:
  explicit Rng(uint64_t seed = 0) : seed_(seed) {}

  uint64_t next_u64() { return mix64(seed_ * 0x9E3779B97F4A7C15ull + (++counter_) * 0xD1B54A32D192ED03ull); }

  // Uniform in the open interval (0, 1): never exactly 0 or 1, so `u < p` with p = 0 always rejects
  // and p = 1 always accepts.
  // 52 bits: (m + 0.5) 2^-52 is exact for every m < 2^52, so the largest value is 1 - 2^-53 (with
  // 53 bits the + 0.5 would round the top value up to exactly 1).
  double uniform() { return (static_cast<double>(next_u64() >> 12) + 0.5) * 0x1.0p-52; }

  uint64_t seed() const { return seed_; }
  uint64_t counter() const { return counter_; }
  void set_counter(uint64_t counter) { counter_ = counter; }

 private:
  uint64_t seed_;         // the request's seed
  uint64_t counter_ = 0;  // draws so far
};

}  // namespace dspark::sampling
