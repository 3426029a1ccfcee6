// The CPU matmul's tuner (`volta tune matmul` drives it): a coordinate search of the cache-blocking
// parameters per shape, timed as medians of repeated runs after warm-up, every candidate checked
// bit for bit against the default's output (blocking must not change bits); then the winners per
// shape class merged into this machine's tuning cache. docs/matmul_tuning.md.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include "backends/cpu/matmul.h"
#include "io/lock.h"
#include "volta/rng.h"
#include "volta/tensor.h"

namespace volta::cpu {

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Operands of one shape and a timer for a blocking on them.
class Bench {
 public:
  Bench(MatmulShape s, int64_t runs, int64_t warmup) : s_(s), runs_(runs), warmup_(warmup) {
    a_ = Tensor::zeros(DType::f32, {s.m, s.k});
    b_ = Tensor::zeros(DType::f32, {s.k, s.n});
    fill_normal(a_, 7, 1, 0.0f, 1.0f);
    fill_normal(b_, 7, 2, 0.0f, 1.0f);
    c_.resize(static_cast<size_t>(s.m * s.n));
  }
  double flop() const { return 2.0 * static_cast<double>(s_.m) * static_cast<double>(s_.n) * static_cast<double>(s_.k); }
  void run(const MatmulBlocking& bl) {
    gemm(isa_, bl, {a_.data<float>(), s_.k, 1}, {b_.data<float>(), s_.n, 1}, c_.data(), s_.n, s_.m, s_.n, s_.k);
  }
  // Median GFLOP/s of `runs` samples of ~20 ms each, after `warmup` samples.
  double gflops(const MatmulBlocking& bl) {
    if (reps_ == 0) {  // calibrate once, on the first blocking timed
      const auto t0 = Clock::now();
      run(bl);
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      reps_ = std::clamp<int64_t>(static_cast<int64_t>(0.02 / std::max(dt, 1e-7)), 1, 100000);
    }
    std::vector<double> samples;
    for (int64_t r = 0; r < warmup_ + runs_; ++r) {
      const auto t0 = Clock::now();
      for (int64_t i = 0; i < reps_; ++i) run(bl);
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      if (r >= warmup_) samples.push_back(flop() * static_cast<double>(reps_) / dt / 1e9);
    }
    return median(samples);
  }
  const std::vector<float>& c() const { return c_; }

 private:
  MatmulShape s_;
  int64_t runs_, warmup_, reps_ = 0;
  MatmulIsa isa_ = matmul_best_isa();
  Tensor a_, b_;
  std::vector<float> c_;
};

// The blocking the kernel would actually use (values clamped to the shape), so candidates that
// behave the same are timed once.
MatmulBlocking effective(MatmulBlocking bl, MatmulShape s, MatmulTile tile) {
  bl.kc = std::min(bl.kc, s.k);
  bl.mc = std::min(matmul_row_block(bl.mc, s.m, tile.rows), round_up(s.m, tile.rows));
  bl.nc = std::min(round_up(bl.nc, tile.cols), round_up(s.n, tile.cols));
  return bl;
}

}  // namespace

// Coordinate search from the default: the best kc, then the best mc with it, then nc. The winner
// must win again, by the margin, in a fresh measurement against a fresh default.
Result<MatmulTuneOutcome> tune_matmul_shape(MatmulShape s, const MatmulTuneOptions& f) {
  const MatmulIsa isa = matmul_best_isa();
  const MatmulTile tile = matmul_tile(isa);
  const MatmulBlocking def = matmul_default_blocking(isa);
  Bench bench(s, f.runs, f.warmup);
  bench.run(def);
  const std::vector<float> expected = bench.c();
  const double def_gflops = bench.gflops(def);
  MatmulBlocking best = def;
  double best_gflops = def_gflops;
  std::set<std::tuple<int64_t, int64_t, int64_t>> seen;
  const auto e = effective(def, s, tile);
  seen.insert({e.kc, e.mc, e.nc});
  auto try_one = [&](MatmulBlocking cand) -> Status {
    const MatmulBlocking eff = effective(cand, s, tile);
    if (!seen.insert({eff.kc, eff.mc, eff.nc}).second) return Status::ok();
    bench.run(cand);
    if (std::memcmp(bench.c().data(), expected.data(), expected.size() * sizeof(float)) != 0)
      return internal_error("blocking kc=" + std::to_string(cand.kc) + " mc=" + std::to_string(cand.mc) + " nc=" +
                            std::to_string(cand.nc) + " changed the bits of the product");
    const double g = bench.gflops(cand);
    if (g > best_gflops) best_gflops = g, best = cand;
    return Status::ok();
  };
  for (int64_t kc : {64, 96, 128, 160, 192, 256, 384}) VOLTA_RETURN_IF_ERROR(try_one({kc, best.mc, best.nc}));
  const MatmulBlocking after_kc = best;
  for (int64_t mult : {2, 4, 6, 8, 12, 16, 24, 32}) VOLTA_RETURN_IF_ERROR(try_one({after_kc.kc, mult * tile.rows, after_kc.nc}));
  const MatmulBlocking after_mc = best;
  for (int64_t mult : {4, 8, 16, 32, 64}) VOLTA_RETURN_IF_ERROR(try_one({after_mc.kc, after_mc.mc, mult * tile.cols}));
  // The winner must win again in a fresh measurement against a fresh default.
  MatmulTuneOutcome out;
  out.entry = {matmul_shape_class(s.m, s.n, s.k), s.m, s.n, s.k, best, best_gflops, def_gflops};
  if (!(best == def)) {
    const double again_def = bench.gflops(def), again_best = bench.gflops(best);
    out.entry.gflops = again_best;
    out.entry.default_gflops = again_def;
    out.kept = again_best > again_def * (1.0 + f.margin);
  }
  return out;
}

Result<MatmulTuneSaved> save_matmul_tuning(const std::vector<MatmulTuneOutcome>& outcomes) {
  // One winner per class: the fastest ratio over its shapes.
  std::map<std::string, TunedEntry> won;
  for (const MatmulTuneOutcome& o : outcomes) {
    if (!o.kept) continue;
    const TunedEntry& e = o.entry;
    auto it = won.find(e.shape_class);
    if (it == won.end() || e.gflops / e.default_gflops > it->second.gflops / it->second.default_gflops) won[e.shape_class] = e;
  }
  const CpuSignature sig = current_cpu_signature();
  MatmulTuneSaved saved;
  VOLTA_ASSIGN_OR_RETURN(saved.path, matmul_tuning_path(sig));
  // Classes tuned now replace their old entries (a class that kept the default loses its entry);
  // the others stay. An unreadable or foreign old file is replaced. Under a lock: two tunes at
  // once each merge with what the other saved.
  VOLTA_RETURN_IF_ERROR(make_tuning_dir(saved.path));
  // (A folder that cannot lock, a network file system's ENOLCK, saves without one.)
  const Result<io::FileLock> lock = io::FileLock::acquire(saved.path + ".lock", /*wait=*/true);
  std::map<std::string, TunedEntry> merged;
  if (auto old = read_matmul_tuning(saved.path, sig))
    for (const TunedEntry& e : *old) merged[e.shape_class] = e;
  for (const MatmulTuneOutcome& o : outcomes) merged.erase(o.entry.shape_class);
  for (const auto& [cls, e] : won) merged[cls] = e;
  for (const auto& [cls, e] : merged) saved.entries.push_back(e);
  VOLTA_RETURN_IF_ERROR(write_matmul_tuning(saved.path, sig, saved.entries));
  set_tuned_entries(saved.entries);
  return saved;
}

}  // namespace volta::cpu
