// The CPU backend's threads: a small persistent pool. A call publishes its task list, every
// participant (the caller included) runs one contiguous block of it (as OpenMP's static schedule
// does, which keeps neighbouring GEMM tiles on one core), and the caller waits for the others. Which thread runs which task varies; results do not, because every task
// writes its own outputs in its own fixed order (parallel.h).
//
// Why not an OpenMP parallel region: one costs about 2 us on two threads here, and a decode step
// runs about twenty of them. Idle workers spin briefly (back-to-back ops keep them hot), then
// sleep on a condition variable, so an idle process does not burn a core.
#include "backends/cpu/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace volta::cpu {

namespace {

std::atomic<int> g_threads{0};
// Asked once: glibc answers hardware_concurrency() by reading sysfs, several microseconds a call,
// and a program that never sets the thread count asks on every parallel_for.
int hardware_threads() {
  static const int n = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return n;
}

void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

thread_local bool t_in_task = false;      // nested parallel_for calls run inline
constexpr auto kNoTask = [](int64_t) {};  // the pool's task before its first round

class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  // Runs task(0..n-1) on `threads` participants (the caller and threads - 1 workers).
  void run(int64_t n, TaskRef task, int threads) {
    std::lock_guard caller(call_mu_);  // one parallel_for at a time; others queue here
    while (static_cast<int>(workers_.size()) < threads - 1) {
      const int index = static_cast<int>(workers_.size());
      // A new worker starts from the current round (no round runs now), so it waits for the next.
      const uint64_t now = generation_.load(std::memory_order_relaxed);
      done_.emplace_back();  // a deque: the slots of running workers stay where they are
      done_.back().round.store(now, std::memory_order_relaxed);
      workers_.emplace_back([this, index, now] { work(index, now); });
    }
    task_ = task;
    n_ = n;
    active_ = threads - 1;
    // Every worker acknowledges every round in its own slot, taking tasks only when it is among
    // the active ones, so none can miss a round or read the next round's state. (A shared count
    // the caller reset each round cost a cache line's trip to this core before the round could
    // start: about a fifth of a two-thread round.)
    const uint64_t round = generation_.fetch_add(1, std::memory_order_seq_cst) + 1;
    // A worker going to sleep counts itself in sleepers_ before its last look at generation_
    // (both seq_cst), so either it sees the new round or this sees it and wakes it.
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard lock(mu_);
      cv_.notify_all();
    }
    take_tasks(0);
    for (const DoneSlot& d : done_)
      while (d.round.load(std::memory_order_acquire) != round) cpu_relax();
    // A task that threw (std::bad_alloc of a kernel's scratch) fails the whole call on the
    // caller's thread, where it can become an error value; a worker never terminates the process.
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  static constexpr int kSpins = 1 << 14;  // about a millisecond of pause instructions

  // Participant p of active_ + 1 runs tasks [p n / P, (p + 1) n / P).
  void take_tasks(int p) {
    const int64_t parts = active_ + 1;
    t_in_task = true;
    for (int64_t i = p * n_ / parts; i < (p + 1) * n_ / parts; ++i) {
      try {
        task_(i);
      } catch (...) {
        std::lock_guard lock(error_mu_);
        if (!error_) error_ = std::current_exception();
      }
    }
    t_in_task = false;
  }

  void work(int index, uint64_t seen) {
    for (;;) {
      for (int spin = 0; generation_.load(std::memory_order_acquire) == seen; ++spin) {
        if (spin < kSpins) {
          cpu_relax();
          continue;
        }
        std::unique_lock lock(mu_);
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        cv_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_seq_cst) != seen; });
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
        if (stop_) return;
      }
      seen = generation_.load(std::memory_order_acquire);
      if (index < active_) take_tasks(index + 1);
      done_[static_cast<size_t>(index)].round.store(seen, std::memory_order_release);
    }
  }

  std::mutex call_mu_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<int> sleepers_{0};
  // The current round, written before generation_ is bumped and read after it is seen: one
  // cache line the workers poll, apart from the done slots the caller polls (sharing a line, the
  // two sides' writes bounced it between the cores several times a round).
  alignas(64) std::atomic<uint64_t> generation_{0};
  TaskRef task_ = kNoTask;
  int64_t n_ = 0;
  int active_ = 0;
  std::mutex error_mu_;
  std::exception_ptr error_;  // the first exception a task of this round threw
  struct alignas(64) DoneSlot {
    std::atomic<uint64_t> round{0};  // the last round this worker finished
  };
  std::deque<DoneSlot> done_;
};

Pool& pool() {
  static Pool p;
  return p;
}

// Where parallel_for_resident runs each operand's single task, and the bytes of resident
// operands each participant reads.
struct Residency {
  std::mutex mu;
  std::unordered_map<const void*, int> home;  // looked up, never iterated
  std::vector<int64_t> bytes;
};
constexpr size_t kMaxResident = 4096;  // operands remembered before starting over
// A single task reading less than this stays on the caller: handing it to another core costs
// about a microsecond, more than reading it from L3 instead of L2 does.
constexpr int64_t kMinMovedBytes = 192 * 1024;

// Bumped whenever the shared placements start over, so each thread's copy of them does too.
std::atomic<uint64_t> g_residency_epoch{0};

int resident_home(const void* key, int64_t bytes_per_task, int64_t n, int threads) {
  // Each calling thread keeps the placements it has looked up, so a decode step's products
  // take no lock once placed (a lock and a shared lookup per product cost a few percent there).
  thread_local std::unordered_map<const void*, int> t_home;
  thread_local uint64_t t_epoch = ~uint64_t{0};
  if (t_epoch == g_residency_epoch.load(std::memory_order_acquire)) {
    if (auto it = t_home.find(key); it != t_home.end()) return it->second;
  } else {
    t_home.clear();
  }
  static Residency r;
  std::lock_guard lock(r.mu);
  if (static_cast<int>(r.bytes.size()) != threads || r.home.size() >= kMaxResident) {
    r.home.clear();
    r.bytes.assign(static_cast<size_t>(threads), 0);
    g_residency_epoch.fetch_add(1, std::memory_order_acq_rel);
    t_home.clear();
  }
  t_epoch = g_residency_epoch.load(std::memory_order_acquire);
  if (auto it = r.home.find(key); it != r.home.end()) return t_home[key] = it->second;
  int home = 0;
  if (n == 1) {
    if (bytes_per_task >= kMinMovedBytes)
      home = static_cast<int>(std::min_element(r.bytes.begin(), r.bytes.end()) - r.bytes.begin());
    r.bytes[static_cast<size_t>(home)] += bytes_per_task;
  } else {  // parallel_for's static split: participant p takes tasks [p n / P, (p + 1) n / P)
    const int64_t parts = std::min<int64_t>(threads, n);
    for (int64_t p = 0; p < parts; ++p) r.bytes[static_cast<size_t>(p)] += ((p + 1) * n / parts - p * n / parts) * bytes_per_task;
  }
  r.home.emplace(key, home);
  return t_home[key] = home;
}

}  // namespace

void set_num_threads(int n) { g_threads = n <= 0 ? hardware_threads() : n; }

int num_threads() {
  const int n = g_threads.load();
  return n <= 0 ? hardware_threads() : n;
}

void parallel_for(int64_t n, TaskRef task) {
  const int threads = static_cast<int>(std::min<int64_t>(num_threads(), n));
  if (threads <= 1 || t_in_task) {
    for (int64_t i = 0; i < n; ++i) task(i);
    return;
  }
  pool().run(n, task, threads);
}

void parallel_for_resident(const void* key, int64_t bytes_per_task, int64_t n, TaskRef task) {
  const int threads = num_threads();
  if (threads <= 1 || t_in_task || n <= 0) return parallel_for(n, task);
  const int home = resident_home(key, bytes_per_task, n, threads);
  if (n > 1 || home == 0) return parallel_for(n, task);
  // Participant `home` of home + 1 takes task `home` of as many; the others have nothing to do.
  pool().run(home + 1, [&](int64_t i) { if (i == home) task(0); }, home + 1);
}

}  // namespace volta::cpu
