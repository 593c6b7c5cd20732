// model/threads.h: release_idle_threads ends the calling thread's idle OpenMP workers, so the thread
// that loaded a model leaves none behind when the server's engine thread starts its own team (two
// teams' threads on two CPUs make libgomp stop spinning between parallel regions).
#include <gtest/gtest.h>
#include <omp.h>

#include <chrono>
#include <filesystem>
#include <iterator>
#include <thread>

#include "model/threads.h"

namespace dspark::model {
namespace {

int64_t threads_of_this_process() {
  const std::filesystem::directory_iterator tasks("/proc/self/task");
  return std::distance(begin(tasks), end(tasks));
}

// On a thread of its own, so the test thread's OpenMP pool is not involved: a team of two leaves
// one docked worker; releasing it ends that worker (it exits asynchronously: polled for 5 s).
TEST(Threads, ReleaseEndsTheCallingThreadsIdleWorkers) {
  int64_t before = 0, with_team = 0, after = 0, team = 0;
  std::thread owner([&] {
    before = threads_of_this_process();
#pragma omp parallel num_threads(2)
    {
#pragma omp single
      team = omp_get_num_threads();
    }
    with_team = threads_of_this_process();
    release_idle_threads();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while ((after = threads_of_this_process()) > before && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  owner.join();
  ASSERT_EQ(team, 2);
  EXPECT_EQ(with_team, before + 1);  // the team's worker, docked after the region
  EXPECT_EQ(after, before);
}

}  // namespace
}  // namespace dspark::model
