// The CPU backend's threads: a small persistent pool. A call publishes its task list, every
// participant (the caller included) runs one contiguous block of it (as OpenMP's static schedule
// does, which keeps neighbouring GEMM tiles on one core), then the tasks of the others' blocks
// that they have not begun, and the caller waits for the others. Which thread runs which task
// varies; results do not, because every task writes its own outputs in its own fixed order
// (parallel.h).
//
// Why not an OpenMP parallel region: one costs about 2 us on two threads here, and a decode step
// runs about twenty of them. Idle workers spin briefly (back-to-back ops keep them hot), then
// sleep on a condition variable, so an idle process does not burn a core.
//
// A team (run_team) is one such round whose tasks are the ranks' walks of a whole plan: inside
// it a parallel_for is a share of the call's tasks on each rank plus a look at the progress of
// the ranks whose work it depends on (one counter each, published after each call it worked
// on), not a fork and a join.
#include "backends/cpu/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
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
// This thread's place in the team it walks with (null outside a team): its rank and how many of
// the team's calls it has passed.
struct TeamRank {
  int rank = 0;
  int size = 0;  // the team's threads: num_threads() for its ranks, whatever set_num_threads does meanwhile
  uint64_t calls = 0;
  std::vector<uint64_t> last_work;  // per rank, the last call in which it had a share
};
thread_local TeamRank* t_team = nullptr;
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
  // The workers `threads` needs, started now (std::system_error when the system refuses one).
  void start(int threads) {
    std::lock_guard caller(call_mu_);
    grow(threads);
  }
  int workers() {
    std::lock_guard caller(call_mu_);
    return static_cast<int>(workers_.size());
  }

  void run(int64_t n, TaskRef task, int threads, bool take_others = true) {
    std::lock_guard caller(call_mu_);  // one parallel_for at a time; others queue here
    round(n, task, threads, take_others);
  }

  // Runs body(rank) on `threads` participants at once, each as a rank of a team.
  void team(TaskRef body, int threads) {
    std::lock_guard caller(call_mu_);
    while (static_cast<int>(progress_.size()) < threads) progress_.emplace_back();
    for (int r = 0; r < threads; ++r) progress_[static_cast<size_t>(r)].calls.store(0, std::memory_order_relaxed);
    team_size_ = threads;
    stop_team_.store(false, std::memory_order_relaxed);
    // (published to the workers by the round's generation_ bump)
    round(threads, [&](int64_t rank) {
      thread_local TeamRank me;  // (its list kept from walk to walk: a decode step allocates nothing)
      me.rank = static_cast<int>(rank), me.size = threads, me.calls = 0;
      t_team = &me;
      t_in_task = false;
      try {
        me.last_work.assign(static_cast<size_t>(threads), 0);
        body(rank);
      } catch (const TeamStopped&) {  // another rank stopped the walk; it reports why
      } catch (...) {
        stop_team();
        t_team = nullptr;
        t_in_task = true;
        throw;  // to the round's error, rethrown on the caller
      }
      t_team = nullptr;
      t_in_task = true;
    }, threads, /*take_others=*/false);  // rank r's walk is task r, on participant r
  }

  // This rank's share of a team call of n tasks: the static split, or all of them on rank `only`.
  // Before working on it, the rank waits for the others' last calls with a share (whose outputs
  // it may read, or whose inputs it may overwrite); a rank without a share publishes nothing,
  // so the others' checks on it stay hits in their caches.
  void share(int64_t n, TaskRef task, int only) {
    TeamRank& me = *t_team;
    const uint64_t call = ++me.calls;
    const int64_t parts = only >= 0 ? (n > 0 ? 1 : 0) : std::clamp<int64_t>(n, 0, team_size_);
    const int first = only >= 0 ? only : 0;  // the working ranks: [first, first + parts)
    const bool mine = me.rank >= first && me.rank < first + parts;
    if (mine) wait_for_work(me);
    for (int r = first; r < first + parts; ++r) me.last_work[static_cast<size_t>(r)] = call;
    if (!mine) return;
    const int64_t p = only >= 0 ? 0 : me.rank, begin = only >= 0 ? 0 : p * n / parts, end = only >= 0 ? n : (p + 1) * n / parts;
    t_in_task = true;
    try {
      for (int64_t i = begin; i < end; ++i) task(i);
    } catch (...) {
      t_in_task = false;
      stop_team();
      throw;
    }
    t_in_task = false;
    progress_[static_cast<size_t>(me.rank)].calls.store(call, std::memory_order_release);
  }

  // Waits until every other rank has finished its last call with a share.
  void fence() { wait_for_work(*t_team); }

  // A call on which every rank works (on nothing): each is done with everything before it.
  void barrier() {
    TeamRank& me = *t_team;
    const uint64_t call = ++me.calls;
    std::fill(me.last_work.begin(), me.last_work.end(), call);
    progress_[static_cast<size_t>(me.rank)].calls.store(call, std::memory_order_release);
    wait_for_work(me);
  }

  void stop_team() { stop_team_.store(true, std::memory_order_release); }

 private:
  // Waits until every other rank has published its last working call (or the walk stopped: throws).
  void wait_for_work(const TeamRank& me) {
    for (int r = 0; r < team_size_; ++r) {
      if (r == me.rank) continue;
      const std::atomic<uint64_t>& theirs = progress_[static_cast<size_t>(r)].calls;
      const uint64_t want = me.last_work[static_cast<size_t>(r)];
      for (int spin = 0; theirs.load(std::memory_order_acquire) < want; ++spin) {
        if (stop_team_.load(std::memory_order_acquire)) throw TeamStopped{};
        if (spin < kSpins) cpu_relax();
        else std::this_thread::yield();  // a long step on another rank
      }
    }
  }

  // Starts workers until there are threads - 1 (no round runs now). A thread the system refuses
  // throws std::system_error and leaves the pool as it was: its slot goes too (a round would
  // wait on it forever).
  void grow(int threads) {
    while (static_cast<int>(workers_.size()) < threads - 1) {
      const int index = static_cast<int>(workers_.size());
      // A new worker starts from the current round, so it waits for the next.
      const uint64_t now = generation_.load(std::memory_order_relaxed);
      done_.emplace_back();  // a deque: the slots of running workers stay where they are
      done_.back().round.store(now, std::memory_order_relaxed);
      try {
        workers_.emplace_back([this, index, now] { work(index, now); });
      } catch (...) {
        done_.pop_back();
        throw;
      }
    }
  }

  void round(int64_t n, TaskRef task, int threads, bool take_others) {
    grow(threads);
    task_ = task;
    active_ = threads - 1;
    take_others_ = take_others;
    while (static_cast<int>(blocks_.size()) < threads) blocks_.emplace_back();
    for (int p = 0; p < threads; ++p) {
      blocks_[static_cast<size_t>(p)].next.store(p * n / threads, std::memory_order_relaxed);
      blocks_[static_cast<size_t>(p)].end = (p + 1) * n / threads;
    }
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

  static constexpr int kSpins = 1 << 14;  // about a millisecond of pause instructions

  // Participant p of active_ + 1 runs tasks [p n / P, (p + 1) n / P) in order, then (take_others_)
  // the tasks the others have not begun, from the front of their blocks: a participant whose
  // core runs slower (another tenant on it, or its vCPU not running) then holds the call up by
  // at most the task it is in. Each task is claimed once through its block's counter.
  void take_tasks(int p) {
    const int parts = active_ + 1;
    t_in_task = true;
    for (int q = 0; q < (take_others_ ? parts : 1); ++q) {
      Block& b = blocks_[static_cast<size_t>((p + q) % parts)];
      for (int64_t i; (i = b.next.fetch_add(1, std::memory_order_relaxed)) < b.end;) {
        try {
          task_(i);
        } catch (...) {
          std::lock_guard lock(error_mu_);
          if (!error_) error_ = std::current_exception();
        }
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
  int active_ = 0;
  bool take_others_ = false;
  struct alignas(64) Block {  // a participant's block of the round's tasks: the next one unclaimed
    std::atomic<int64_t> next{0};
    int64_t end = 0;
  };
  std::deque<Block> blocks_;
  std::mutex error_mu_;
  std::exception_ptr error_;  // the first exception a task of this round threw
  struct alignas(64) DoneSlot {
    std::atomic<uint64_t> round{0};  // the last round this worker finished
  };
  std::deque<DoneSlot> done_;
  // The team's state, set before its round starts: each rank's published progress (a line of
  // its own), the team's size and whether a rank stopped the walk.
  struct alignas(64) Progress {
    std::atomic<uint64_t> calls{0};
  };
  std::deque<Progress> progress_;
  alignas(64) int team_size_ = 0;
  std::atomic<bool> stop_team_{false};
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

Residency& residency() {
  static Residency r;
  return r;
}
int g_teams_walking = 0;  // (under Residency::mu) teams whose ranks look operands up

// Under r.mu: the placements start over when the thread count changed or too many operands were
// seen, but never while a team walks (its ranks look each operand up one after the other and
// must agree; run_team starts over before its walk instead).
bool start_over_if_due(Residency& r, int threads) {
  if (g_teams_walking != 0 || (static_cast<int>(r.bytes.size()) == threads && r.home.size() < kMaxResident)) return false;
  r.home.clear();
  r.bytes.assign(static_cast<size_t>(threads), 0);
  g_residency_epoch.fetch_add(1, std::memory_order_acq_rel);
  return true;
}

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
  Residency& r = residency();
  std::lock_guard lock(r.mu);
  if (start_over_if_due(r, threads)) t_home.clear();
  if (static_cast<int>(r.bytes.size()) != threads) return 0;  // the count changed during a walk: the caller
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

Status start_threads(bool asked) {
  const int n = num_threads();
  try {
    pool().start(n);
  } catch (const std::system_error& e) {
    // One per hardware thread, not asked for: as many as the system starts (the results are the
    // same for any count).
    if (!asked) {
      set_num_threads(pool().workers() + 1);
      return Status::ok();
    }
    return unavailable("--threads " + std::to_string(n) + ": the system refused a worker thread: " + e.what());
  }
  return Status::ok();
}

int num_threads() {
  if (t_team) return t_team->size;
  const int n = g_threads.load();
  return n <= 0 ? hardware_threads() : n;
}

void run_team(int threads, TaskRef body) {
  if (threads <= 1 || t_in_task || t_team) {  // one rank: its calls are plain ones (nested: inline)
    const bool was = std::exchange(t_in_task, t_in_task || t_team != nullptr);
    struct Restore {
      bool was;
      ~Restore() { t_in_task = was; }
    } restore{was};
    body(0);
    return;
  }
  {
    Residency& r = residency();
    std::lock_guard lock(r.mu);
    start_over_if_due(r, threads);
    ++g_teams_walking;
  }
  struct Done {
    ~Done() {
      std::lock_guard lock(residency().mu);
      --g_teams_walking;
    }
  } done;
  pool().team(body, threads);
}

bool in_team() { return t_team != nullptr && !t_in_task; }

void team_fence() {
  if (in_team()) pool().fence();
}

void team_barrier() {
  if (in_team()) pool().barrier();
}

void run_alone(TaskRef f) {
  if (in_team()) return pool().share(1, f, 0);
  f(0);
}

void team_stop() {
  if (t_team) pool().stop_team();
}

void parallel_for(int64_t n, TaskRef task) {
  if (in_team()) return pool().share(n, task, -1);
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
  if (t_team) return pool().share(1, task, home);
  // Participant `home` of home + 1 takes task `home` of as many; the others have nothing to do.
  pool().run(home + 1, [&](int64_t i) { if (i == home) task(0); }, home + 1, /*take_others=*/false);
}

}  // namespace volta::cpu
