// Threads for the CPU backend. Work is cut into a fixed list of tasks chosen from the problem
// shape (a decode product on a packed weight also cuts its columns into one share per thread;
// no reduction is ever split), and each task writes its own outputs with its own fixed
// reduction order, so results are bitwise the same for any number of threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "volta/status.h"

namespace volta::cpu {

// Threads used by parallel_for; n <= 0 means one per hardware thread.
void set_num_threads(int n);
int num_threads();
// Starts the worker threads num_threads() needs now, so that a system that refuses one fails
// here with a message (`asked`: the count was given) or runs on the threads it started (the
// default count), rather than failing inside a kernel call.
Status start_threads(bool asked);

// A task list's body, borrowed for one call: a pointer to the caller's callable and a function
// that invokes it. Unlike std::function it never copies the callable to the heap, so a worker
// reads the caller's lambda where it is (a decode step makes about 25 of these calls a token).
class TaskRef {
 public:
  template <typename F>
    requires std::is_invocable_v<const F&, int64_t> && (!std::is_same_v<std::remove_cvref_t<F>, TaskRef>)
  TaskRef(const F& f)  // NOLINT(google-explicit-constructor): called with lambdas
      : obj_(static_cast<const void*>(&f)), call_([](const void* o, int64_t i) { (*static_cast<const F*>(o))(i); }) {}
  void operator()(int64_t i) const { call_(obj_, i); }

 private:
  const void* obj_;
  void (*call_)(const void*, int64_t);
};

// Runs task(i) for every i in [0, n), spread over the threads.
void parallel_for(int64_t n, TaskRef task);

// parallel_for for a product over an operand read again on later calls (a decode step's
// weight, keyed by its address): a single task of at least 192 KB runs on the participant whose
// share of such operands is the smallest when `key` is first seen, and on that one every later
// call (0 is the caller, which then waits), so each core's cache keeps its own weights from
// token to token; smaller single tasks stay on the caller, and split products count each
// participant's tasks (`bytes_per_task` each) toward its share.
// Only which thread runs a task depends on this, never a result.
void parallel_for_resident(const void* key, int64_t bytes_per_task, int64_t n, TaskRef task);

// A team: every thread walks a plan's steps at once (Backend::walk), so a step's parallel_for
// costs no fork and no join. run_team runs body(rank) on `threads` participants at once (ranks
// [0, threads), rank 0 on the caller; num_threads() inside), and returns when every body has.
// Inside a body, parallel_for and parallel_for_resident do not fork: every rank makes the same
// calls with the same task counts (it runs the same kernels on the same arguments) and takes its
// own share of each call's tasks (the same shares as outside a team). Before working on a
// share a rank waits until every other rank has finished its last call with a share (whose
// outputs this one may read, or whose inputs it may overwrite); a rank without a share goes on
// at once. So a kernel's code outside its tasks runs on every rank: there it may write only its
// locals and thread-local scratch (anything else goes through run_alone), and it may read values
// the plan computes (a position, ids) only between team_fence() and team_barrier()
// (read_outside_tasks).
void run_team(int threads, TaskRef body);
bool in_team();
// Waits until every other rank has finished its last call with a share: then this rank sees all
// that the calls so far wrote. Outside a team: nothing.
void team_fence();
// Waits until every rank has got here, done with everything before: then no rank still reads
// what a later call may overwrite. Outside a team: nothing.
void team_barrier();
// Runs f(0) as one call whose only share is rank 0's, its parallel_for calls inline (code that
// writes outside tasks, or packs into one thread's buffer for all). Outside a team: f(0).
void run_alone(TaskRef f);
// Ends the team's walk early (a step failed on this rank): a rank waiting on another from now on
// throws TeamStopped, which run_team catches.
void team_stop();
struct TeamStopped {};
// A Shared kernel's read of an input's values (a position, ids) outside its tasks: f() between
// team_fence() and team_barrier(), unless the input stays as it is for the whole run
// (TensorRef::fixed: a bound input no step writes, a decode step's position and ids) or there
// is none (`read` null): then f() at once.
template <typename Ref, typename F>
auto read_outside_tasks(const Ref* read, F&& f) {
  if (!read || read->fixed) return f();
  team_fence();
  auto r = f();
  team_barrier();
  return r;
}

// Runs f(begin, end) over [0, n) in fixed chunks of `chunk` elements (the last may be shorter).
template <typename F>
void parallel_chunks(int64_t n, int64_t chunk, F&& f) {
  parallel_for((n + chunk - 1) / chunk, [&](int64_t c) { f(c * chunk, std::min(n, (c + 1) * chunk)); });
}

// Runs f(first, end) over rows [0, n) of `len` elements each, in tasks of about `chunk` elements
// of whole rows; parallel_rows runs f(row) for each row of them.
template <typename F>
void parallel_row_ranges(int64_t n, int64_t len, int64_t chunk, F&& f) {
  const int64_t per = std::max<int64_t>(1, chunk / std::max<int64_t>(1, len));
  parallel_for((n + per - 1) / per, [&](int64_t t) { f(t * per, std::min(n, (t + 1) * per)); });
}
template <typename F>
void parallel_rows(int64_t n, int64_t len, int64_t chunk, F&& f) {
  parallel_row_ranges(n, len, chunk, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) f(r);
  });
}

// Elements per task of the elementwise and row kernels: enough work to outweigh a task's
// hand-off, few enough that tensors of a few times this size spread over the threads.
inline constexpr int64_t kTaskElements = 16384;

// parallel_chunks, parallel_rows and parallel_row_ranges with tasks of kTaskElements.
template <typename F>
void chunks(int64_t n, F&& f) {
  parallel_chunks(n, kTaskElements, f);
}
template <typename F>
void chunk_rows(int64_t n, int64_t len, F&& f) {
  parallel_rows(n, len, kTaskElements, f);
}
template <typename F>
void chunk_row_ranges(int64_t n, int64_t len, F&& f) {
  parallel_row_ranges(n, len, kTaskElements, f);
}

}  // namespace volta::cpu
