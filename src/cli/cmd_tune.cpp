// `volta tune matmul`: flags, the shapes to tune and the table; the search and the tuning cache
// are the CPU backend's (backends/cpu/tuner.cpp, docs/matmul_tuning.md).
#include <cstdio>

#include "backends/cpu/matmul.h"
#include "cli/commands.h"
#include "volta/backend.h"

namespace volta::cli {

namespace {

struct TuneFlags {
  std::vector<int64_t> dims;
  std::string shapes = "suite";
  int64_t runs = 5;
  int64_t warmup = 1;
  double margin = 0.03;
  bool save = true;
};

// `--shapes suite` is the GEMM suite of `volta bench matmul` (the peers' shapes); `square` its
// square part; `model` the tiny-gpt and big-gpt layers.
Result<std::vector<cpu::MatmulShape>> shapes_for(const TuneFlags& f) {
  std::vector<cpu::MatmulShape> out;
  for (int64_t d : f.dims) {
    if (d < 1 || d > 8192) return invalid_argument("--dim must be in [1, 8192], got " + std::to_string(d));
    out.push_back({d, d, d});
  }
  if (!out.empty()) return out;
  const std::vector<cpu::MatmulShape> square = {{64, 64, 64}, {128, 128, 128}, {256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024}, {2048, 2048, 2048}};
  const std::vector<cpu::MatmulShape> model = {{768, 384, 128},    {768, 512, 128},    {768, 128, 512},    {768, 65, 128},
                                               {16384, 1152, 384}, {16384, 1536, 384}, {16384, 384, 1536}, {16384, 65, 384}};
  if (f.shapes == "square" || f.shapes == "suite") out.insert(out.end(), square.begin(), square.end());
  if (f.shapes == "model" || f.shapes == "suite") out.insert(out.end(), model.begin(), model.end());
  if (out.empty()) return invalid_argument("--shapes must be suite, square or model, got '" + f.shapes + "'");
  return out;
}

Status tune_matmul(const TuneFlags& f) {
  if (f.runs < 1 || f.runs > 100000) return invalid_argument("--runs must be in [1, 100000], got " + std::to_string(f.runs));
  if (f.warmup < 0 || f.warmup > 100000) return invalid_argument("--warmup must be in [0, 100000], got " + std::to_string(f.warmup));
  if (f.margin < 0) return invalid_argument("--margin must be >= 0");
  VOLTA_ASSIGN_OR_RETURN(const std::vector<cpu::MatmulShape> shapes, shapes_for(f));
  const cpu::MatmulIsa isa = cpu::matmul_best_isa();
  const cpu::CpuSignature sig = cpu::current_cpu_signature();
  if (f.save) {  // where the results go is checked before the work (a suite runs for minutes)
    VOLTA_ASSIGN_OR_RETURN(const std::string path, cpu::matmul_tuning_path(sig));
    VOLTA_RETURN_IF_ERROR(cpu::make_tuning_dir(path));
  }
  const cpu::MatmulBlocking def = cpu::matmul_default_blocking(isa);
  std::printf("tuning matmul on %s (%s kernels, %lldx%lld tiles), %d threads; default kc=%lld mc=%lld nc=%lld\n",
              sig.cpu.c_str(), sig.isa.c_str(), static_cast<long long>(cpu::matmul_tile(isa).rows),
              static_cast<long long>(cpu::matmul_tile(isa).cols), cpu_threads(), static_cast<long long>(def.kc),
              static_cast<long long>(def.mc), static_cast<long long>(def.nc));
  std::printf("%6s %6s %6s  %-22s %9s %9s %5s %5s %5s  %s\n", "m", "n", "k", "class", "default", "tuned", "kc", "mc", "nc", "kept");
  std::vector<cpu::MatmulTuneOutcome> outcomes;
  for (const cpu::MatmulShape& s : shapes) {
    VOLTA_ASSIGN_OR_RETURN(const cpu::MatmulTuneOutcome o, cpu::tune_matmul_shape(s, {f.runs, f.warmup, f.margin}));
    const cpu::TunedEntry& e = o.entry;
    std::printf("%6lld %6lld %6lld  %-22s %9.1f %9.1f %5lld %5lld %5lld  %s\n", static_cast<long long>(s.m),
                static_cast<long long>(s.n), static_cast<long long>(s.k), e.shape_class.c_str(), e.default_gflops, e.gflops,
                static_cast<long long>(e.blocking.kc), static_cast<long long>(e.blocking.mc), static_cast<long long>(e.blocking.nc),
                o.kept ? "yes" : "no (default)");
    std::fflush(stdout);
    VOLTA_RETURN_IF_ERROR(stdout_status());  // its reader gone: no further shapes
    outcomes.push_back(o);
  }
  if (!f.save) return Status::ok();
  VOLTA_ASSIGN_OR_RETURN(const cpu::MatmulTuneSaved saved, cpu::save_matmul_tuning(outcomes));
  std::printf("wrote %zu tuned classes to %s\n", saved.entries.size(), saved.path.c_str());
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
