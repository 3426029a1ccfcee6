#include "backends/cpu/parallel.h"

#include <atomic>
#include <thread>

#ifdef VOLTA_HAVE_OPENMP
#include <omp.h>
#endif

namespace volta::cpu {

namespace {
std::atomic<int> g_threads{0};
int hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}
}  // namespace

void set_num_threads(int n) { g_threads = n <= 0 ? hardware_threads() : n; }

int num_threads() {
  const int n = g_threads.load();
  return n <= 0 ? hardware_threads() : n;
}

void parallel_for(int64_t n, const std::function<void(int64_t)>& task) {
  const int threads = num_threads();
  if (threads <= 1 || n <= 1) {
    for (int64_t i = 0; i < n; ++i) task(i);
    return;
  }
#ifdef VOLTA_HAVE_OPENMP
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) task(i);
#else
  for (int64_t i = 0; i < n; ++i) task(i);
#endif
}

}  // namespace volta::cpu
