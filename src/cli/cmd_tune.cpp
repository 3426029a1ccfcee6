// `volta tune matmul`: searches the CPU matmul's cache-blocking parameters per shape class and
// stores the winners in the tuning cache (docs/matmul_tuning.md). Timings are medians of repeated
// runs after warm-up; a choice is kept only when it beats the default by --margin. Every
// candidate's output is checked bit for bit against the default's: blocking must not change bits.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "backends/cpu/matmul.h"
#include "cli/commands.h"
#include "volta/backend.h"
#include "volta/rng.h"

namespace volta::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct TuneFlags {
  std::vector<int64_t> dims;
  std::string shapes = "suite";
  int64_t runs = 5;
  int64_t warmup = 1;
  double margin = 0.03;
  bool save = true;
};

struct Shape3 {
  int64_t m, n, k;
};

// `--shapes suite` is the GEMM suite of `volta bench matmul` (the peers' shapes); `square` its
// square part; `model` the tiny-gpt and big-gpt layers.
Result<std::vector<Shape3>> shapes_for(const TuneFlags& f) {
  std::vector<Shape3> out;
  for (int64_t d : f.dims) {
    if (d < 1 || d > 8192) return invalid_argument("--dim must be in [1, 8192], got " + std::to_string(d));
    out.push_back({d, d, d});
  }
  if (!out.empty()) return out;
  const std::vector<Shape3> square = {{64, 64, 64}, {128, 128, 128}, {256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024}, {2048, 2048, 2048}};
  const std::vector<Shape3> model = {{768, 384, 128},    {768, 512, 128},    {768, 128, 512},    {768, 65, 128},
                                     {16384, 1152, 384}, {16384, 1536, 384}, {16384, 384, 1536}, {16384, 65, 384}};
  if (f.shapes == "square" || f.shapes == "suite") out.insert(out.end(), square.begin(), square.end());
  if (f.shapes == "model" || f.shapes == "suite") out.insert(out.end(), model.begin(), model.end());
  if (out.empty()) return invalid_argument("--shapes must be suite, square or model, got '" + f.shapes + "'");
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Operands of one shape and a timer for a blocking on them.
class Bench {
 public:
  Bench(Shape3 s, int64_t runs, int64_t warmup) : s_(s), runs_(runs), warmup_(warmup) {
    a_ = Tensor::zeros(DType::f32, {s.m, s.k});
    b_ = Tensor::zeros(DType::f32, {s.k, s.n});
    fill_normal(a_, 7, 1, 0.0f, 1.0f);
    fill_normal(b_, 7, 2, 0.0f, 1.0f);
    c_.resize(static_cast<size_t>(s.m * s.n));
  }
  double flop() const { return 2.0 * static_cast<double>(s_.m) * static_cast<double>(s_.n) * static_cast<double>(s_.k); }
  void run(const cpu::MatmulBlocking& bl) {
    cpu::gemm(isa_, bl, {a_.data<float>(), s_.k, 1}, {b_.data<float>(), s_.n, 1}, c_.data(), s_.n, s_.m, s_.n, s_.k);
  }
  // Median GFLOP/s of `runs` samples of ~20 ms each, after `warmup` samples.
  double gflops(const cpu::MatmulBlocking& bl) {
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
  Shape3 s_;
  int64_t runs_, warmup_, reps_ = 0;
  cpu::MatmulIsa isa_ = cpu::matmul_best_isa();
  Tensor a_, b_;
  std::vector<float> c_;
};

// The blocking the kernel would actually use (values clamped to the shape), so candidates that
// behave the same are timed once.
cpu::MatmulBlocking effective(cpu::MatmulBlocking bl, Shape3 s, cpu::MatmulTile tile) {
  auto round_up = [](int64_t a, int64_t b) { return (a + b - 1) / b * b; };
  bl.kc = std::min(bl.kc, s.k);
  bl.mc = std::min(round_up(bl.mc, tile.rows), round_up(s.m, tile.rows));
  bl.nc = std::min(round_up(bl.nc, tile.cols), round_up(s.n, tile.cols));
  return bl;
}

struct Outcome {
  cpu::TunedEntry entry;
  bool kept = false;
};

// Coordinate search from the default: the best kc, then the best mc with it, then nc.
Result<Outcome> tune_shape(Shape3 s, const TuneFlags& f) {
  const cpu::MatmulIsa isa = cpu::matmul_best_isa();
  const cpu::MatmulTile tile = cpu::matmul_tile(isa);
  const cpu::MatmulBlocking def = cpu::matmul_default_blocking(isa);
  Bench bench(s, f.runs, f.warmup);
  bench.run(def);
  const std::vector<float> expected = bench.c();
  const double def_gflops = bench.gflops(def);
  cpu::MatmulBlocking best = def;
  double best_gflops = def_gflops;
  std::set<std::tuple<int64_t, int64_t, int64_t>> seen;
  const auto e = effective(def, s, tile);
  seen.insert({e.kc, e.mc, e.nc});
  auto try_one = [&](cpu::MatmulBlocking cand) -> Status {
    const cpu::MatmulBlocking eff = effective(cand, s, tile);
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
  const cpu::MatmulBlocking after_kc = best;
  for (int64_t mult : {2, 4, 6, 8, 12, 16, 24, 32}) VOLTA_RETURN_IF_ERROR(try_one({after_kc.kc, mult * tile.rows, after_kc.nc}));
  const cpu::MatmulBlocking after_mc = best;
  for (int64_t mult : {4, 8, 16, 32, 64}) VOLTA_RETURN_IF_ERROR(try_one({after_mc.kc, after_mc.mc, mult * tile.cols}));
  // The winner must win again in a fresh measurement against a fresh default.
  Outcome out;
  out.entry = {cpu::matmul_shape_class(s.m, s.n, s.k), s.m, s.n, s.k, best, best_gflops, def_gflops};
  if (!(best == def)) {
    const double again_def = bench.gflops(def), again_best = bench.gflops(best);
    out.entry.gflops = again_best;
    out.entry.default_gflops = again_def;
    out.kept = again_best > again_def * (1.0 + f.margin);
  }
  return out;
}

Status tune_matmul(const TuneFlags& f) {
  if (f.runs < 1 || f.runs > 100000) return invalid_argument("--runs must be in [1, 100000], got " + std::to_string(f.runs));
  if (f.warmup < 0 || f.warmup > 100000) return invalid_argument("--warmup must be in [0, 100000], got " + std::to_string(f.warmup));
  if (f.margin < 0) return invalid_argument("--margin must be >= 0");
  VOLTA_ASSIGN_OR_RETURN(const std::vector<Shape3> shapes, shapes_for(f));
  const cpu::MatmulIsa isa = cpu::matmul_best_isa();
  const cpu::CpuSignature sig = cpu::current_cpu_signature();
  const cpu::MatmulBlocking def = cpu::matmul_default_blocking(isa);
  std::printf("tuning matmul on %s (%s kernels, %lldx%lld tiles), %d threads; default kc=%lld mc=%lld nc=%lld\n",
              sig.cpu.c_str(), sig.isa.c_str(), static_cast<long long>(cpu::matmul_tile(isa).rows),
              static_cast<long long>(cpu::matmul_tile(isa).cols), cpu_threads(), static_cast<long long>(def.kc),
              static_cast<long long>(def.mc), static_cast<long long>(def.nc));
  std::printf("%6s %6s %6s  %-22s %9s %9s %5s %5s %5s  %s\n", "m", "n", "k", "class", "default", "tuned", "kc", "mc", "nc", "kept");
  // One winner per class: the fastest ratio over its shapes.
  std::map<std::string, cpu::TunedEntry> won;
  for (const Shape3& s : shapes) {
    VOLTA_ASSIGN_OR_RETURN(const Outcome o, tune_shape(s, f));
    const cpu::TunedEntry& e = o.entry;
    std::printf("%6lld %6lld %6lld  %-22s %9.1f %9.1f %5lld %5lld %5lld  %s\n", static_cast<long long>(s.m),
                static_cast<long long>(s.n), static_cast<long long>(s.k), e.shape_class.c_str(), e.default_gflops, e.gflops,
                static_cast<long long>(e.blocking.kc), static_cast<long long>(e.blocking.mc), static_cast<long long>(e.blocking.nc),
                o.kept ? "yes" : "no (default)");
    std::fflush(stdout);
    if (!o.kept) continue;
    auto it = won.find(e.shape_class);
    if (it == won.end() || e.gflops / e.default_gflops > it->second.gflops / it->second.default_gflops) won[e.shape_class] = e;
  }
  if (!f.save) return Status::ok();
  VOLTA_ASSIGN_OR_RETURN(const std::string path, cpu::matmul_tuning_path(sig));
  // Classes tuned now replace their old entries (a class that kept the default loses its entry);
  // the others stay. An unreadable or foreign old file is replaced.
  std::map<std::string, cpu::TunedEntry> merged;
  if (auto old = cpu::read_matmul_tuning(path, sig))
    for (const cpu::TunedEntry& e : *old) merged[e.shape_class] = e;
  for (const Shape3& s : shapes) merged.erase(cpu::matmul_shape_class(s.m, s.n, s.k));
  for (const auto& [cls, e] : won) merged[cls] = e;
  std::vector<cpu::TunedEntry> entries;
  for (const auto& [cls, e] : merged) entries.push_back(e);
  VOLTA_RETURN_IF_ERROR(cpu::write_matmul_tuning(path, sig, entries));
  cpu::set_tuned_entries(entries);
  std::printf("wrote %zu tuned classes to %s\n", entries.size(), path.c_str());
  return Status::ok();
}

}  // namespace

Action add_tune(CLI::App& app, GlobalFlags& global) {
  auto f = std::make_shared<TuneFlags>();
  CLI::App* cmd = app.add_subcommand("tune", "Tune kernels for this machine: matmul");
  cmd->require_subcommand(1);
  CLI::App* mm = cmd->add_subcommand("matmul", "Search the CPU matmul's blocking parameters and cache the winners");
  mm->add_option("--dim", f->dims, "Square shapes N x N x N to tune (repeatable); overrides --shapes");
  mm->add_option("--shapes", f->shapes, "suite | square | model")->capture_default_str();
  mm->add_option("--runs", f->runs, "Timed runs per candidate (the median counts)")->capture_default_str();
  mm->add_option("--warmup", f->warmup, "Untimed warm-up runs per candidate")->capture_default_str();
  mm->add_option("--margin", f->margin, "Keep a tuned choice only if it beats the default by this fraction")->capture_default_str();
  mm->add_flag("!--no-save", f->save, "Print the table only; leave the cache file alone");
  mm->add_option("--device", global.device, "cpu (the tuner tunes the CPU kernels)");
  mm->add_option("--threads", global.threads, "CPU threads");
  mm->add_option("--memory-limit", global.memory_limit, "Most memory a plan may need, in bytes (suffix K, M or G)");
  return [f, mm, &global]() -> Status {
    if (!global.device.empty() && global.device != "cpu") return invalid_argument("tune matmul tunes the CPU kernels; --device must be cpu");
    if (mm->parsed()) return tune_matmul(*f);
    return invalid_argument("tune needs matmul");
  };
}

}  // namespace volta::cli
