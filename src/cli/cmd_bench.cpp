// `volta bench matmul | train | infer` (and `model`, bench_model.cpp): warm-up, repeated runs, medians; --json prints one JSON
// object per line (the keys the peer scripts in ../shared/peers use).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <nlohmann/json.hpp>

#include "backends/cpu/kernels.h"
#include "cli/commands.h"
#include "model/generate.h"
#include "train/lm.h"
#include "volta/builder.h"
#include "volta/rng.h"

namespace volta::cli {

namespace {

using Clock = std::chrono::steady_clock;

struct BenchFlags {
  int64_t runs = 5;
  int64_t warmup = 2;
  bool json = false;
  std::string group = "all";
  int64_t steps = 10;
  std::string data = "data/tinyshakespeare.txt";
  std::string checkpoint;
  std::vector<int64_t> batches = {1, 8};
  std::string kv = "both";  // KV-cache settings to time: on | off | both
  int64_t long_tokens = 500;  // bench infer: a run past the context (0: skip)
  int64_t keep = 0;           // bench infer: tokens a full window keeps (0: half the context)
  std::string weights;          // bench infer: the matmul weights' dtype (empty: as stored)
  bool compare_teams = false;   // bench infer: decode runs alternate with the CPU's teams on and off
  model::TinyLMConfig model;  // bench train: the recipe's model unless flags change it
  std::string arch = "gpt";   // bench train: gpt | llama
  int64_t batch = 0;          // bench train: 0 = the recipe's
  ProfileFlags profile;
  PipelineFlags pipeline;  // bench train and infer: a pass switched off, to time what it gains
  std::vector<std::string> compare_disabled;  // bench train and infer: a second pipeline, these passes off too
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// One result row; an error once stdout is gone (the bench stops instead of running on).
Status emit(bool json, const nlohmann::ordered_json& row, const std::string& text) {
  if (json) std::printf("%s\n", row.dump().c_str());
  else std::printf("%s\n", text.c_str());
  std::fflush(stdout);
  return stdout_status();
}

struct GemmShape {
  const char* group;
  int64_t m, n, k;
  const char* form = "nn";  // "tn": C = Aᵀ B with A stored [k, m]; "nt": C = A Bᵀ with B stored [n, k]
};

// The peers' suite (../shared/peers/sgemm_common.hpp), so rows pair up by (m, n, k), and
// bench/sgemm_peer.cpp's train-bwd group: the shakespeare-char training step's products in the
// forms its plan runs them (768 rows of 128 channels; the weight gradients tn, the input
// gradients and the tied head nt), paired by (m, n, k, form).
const std::vector<GemmShape>& gemm_suite() {
  static const std::vector<GemmShape> shapes = {
      {"square", 64, 64, 64},       {"square", 128, 128, 128},    {"square", 256, 256, 256},
      {"square", 512, 512, 512},    {"square", 1024, 1024, 1024}, {"square", 2048, 2048, 2048},
      {"tiny-gpt", 768, 384, 128},  {"tiny-gpt", 768, 512, 128},  {"tiny-gpt", 768, 128, 512},
      {"tiny-gpt", 768, 65, 128},   {"decode", 1, 384, 128},      {"decode", 1, 512, 128},
      {"decode", 1, 128, 512},      {"decode", 1, 65, 128},       {"big-gpt", 16384, 1152, 384},
      {"big-gpt", 16384, 1536, 384}, {"big-gpt", 16384, 384, 1536}, {"big-gpt", 16384, 65, 384},
      {"train-bwd", 128, 384, 768, "tn"}, {"train-bwd", 128, 128, 768, "tn"}, {"train-bwd", 128, 512, 768, "tn"},
      {"train-bwd", 512, 128, 768, "tn"}, {"train-bwd", 65, 128, 768, "tn"},  {"train-bwd", 768, 128, 384, "nt"},
      {"train-bwd", 768, 128, 128, "nt"}, {"train-bwd", 768, 128, 512, "nt"}, {"train-bwd", 768, 512, 128, "nt"},
      {"train-bwd", 768, 65, 128, "nt"},  {"train-bwd", 768, 128, 65}};
  return shapes;
}

Status bench_matmul(const BenchFlags& f, const GlobalFlags& global) {
  VOLTA_ASSIGN_OR_RETURN(DeviceKind device, device_from_flag_or_env(global.device));
  VOLTA_ASSIGN_OR_RETURN(auto backend, select_backend(device));
  const auto& suite = gemm_suite();
  if (f.group != "all" && std::none_of(suite.begin(), suite.end(), [&](const GemmShape& s) { return f.group == s.group; }))
    return invalid_argument("--group must be all, square, tiny-gpt, decode, big-gpt or train-bwd, got '" + f.group + "'");
  if (!f.json) std::printf("%-9s %6s %6s %6s %8s %10s %4s\n", "group", "m", "n", "k", "threads", "GFLOP/s", "form");
  for (const GemmShape& s : suite) {
    if (f.group != "all" && f.group != s.group) continue;
    const bool trans_a = s.form[0] == 't', trans_b = s.form[1] == 't';
    const Shape a_shape = trans_a ? Shape{s.k, s.m} : Shape{s.m, s.k}, b_shape = trans_b ? Shape{s.n, s.k} : Shape{s.k, s.n};
    ModelBuilder b("gemm");
    Value x = b.input("a", {DType::f32, a_shape});
    Value w = b.input("b", {DType::f32, b_shape});
    b.output(b.matmul(x, w, "c", trans_a, trans_b));
    VOLTA_ASSIGN_OR_RETURN(ir::Graph g, b.build());
    Tensor ta = Tensor::zeros(DType::f32, a_shape), tb = Tensor::zeros(DType::f32, b_shape),
           tc = Tensor::zeros(DType::f32, {s.m, s.n});
    fill_normal(ta, 1, 1, 0.0f, 1.0f);
    fill_normal(tb, 1, 2, 0.0f, 1.0f);
    const ir::Node& node = g.node(g.outputs[0]);
    // Operands, output and workspace in the backend's memory (device memory on a GPU), so only
    // the kernel is timed; each sample ends with a copy out, which waits for queued work.
    const size_t ws_bytes = backend->workspace_bytes(g, node);
    const KernelInfo kernel = backend->kernel_info(g, node, global.determinism);
    std::shared_ptr<std::byte> mem[4];
    const size_t sizes[4] = {ta.bytes(), tb.bytes(), tc.bytes(), ws_bytes};
    for (int j = 0; j < 4; ++j) {
      VOLTA_ASSIGN_OR_RETURN(mem[j], backend->allocate(sizes[j]));
    }
    VOLTA_RETURN_IF_ERROR(backend->copy_in(mem[0].get(), ta.raw(), ta.bytes()));
    VOLTA_RETURN_IF_ERROR(backend->copy_in(mem[1].get(), tb.raw(), tb.bytes()));
    const TensorRef in[2] = {{mem[0].get(), ta.type()}, {mem[1].get(), tb.type()}};
    const TensorRef out{mem[2].get(), tc.type()};
    const std::span<std::byte> ws(mem[3].get(), ws_bytes);
    const double flop = 2.0 * static_cast<double>(s.m * s.n * s.k);
    // Enough repetitions per sample for ~20 ms (a device: for ~20 ms at ~1 TFLOP/s and more).
    const double budget = backend->host_memory() ? 2e9 : 2e10;
    int64_t reps = std::clamp<int64_t>(static_cast<int64_t>(budget / flop), 1, 100000);
    std::vector<double> gflops;
    for (int64_t r = 0; r < f.warmup + f.runs; ++r) {
      const auto t0 = Clock::now();
      for (int64_t i = 0; i < reps; ++i) VOLTA_RETURN_IF_ERROR(backend->execute(node, in, out, ws, kernel));
      VOLTA_RETURN_IF_ERROR(backend->copy_out(tc.raw(), mem[2].get(), sizeof(float)));
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      if (r >= f.warmup) gflops.push_back(flop * static_cast<double>(reps) / dt / 1e9);
    }
    const double med = median(gflops);
    char text[128];
    std::snprintf(text, sizeof text, "%-9s %6lld %6lld %6lld %8d %10.1f %4s", s.group, static_cast<long long>(s.m),
                  static_cast<long long>(s.n), static_cast<long long>(s.k), cpu_threads(), med, s.form);
    VOLTA_RETURN_IF_ERROR(emit(f.json,
         {{"bench", "matmul"}, {"group", s.group}, {"m", s.m}, {"n", s.n}, {"k", s.k}, {"form", s.form}, {"threads", cpu_threads()},
          {"gflops", med}, {"gflops_best", *std::max_element(gflops.begin(), gflops.end())}, {"backend", backend->name()},
          {"kernel", kernel.variant}},
         text));
  }
  return Status::ok();
}

// One timed pipeline of bench train: its own runtime, task and trainer (the runtime owns the
// model's state, so each arm trains its own copy from the same seed).
struct TrainArm {
  std::unique_ptr<train::LMTask> task;
  std::unique_ptr<Runtime> rt;
  std::unique_ptr<train::Trainer> trainer;
  std::vector<double> ms;  // the timed steps
};

Result<std::unique_ptr<TrainArm>> start_train_arm(const BenchFlags& f, const GlobalFlags& global, DeviceKind device,
                                                  const train::LMRecipe& r, const CompileOptions& compile) {
  auto arm = std::make_unique<TrainArm>();
  VOLTA_ASSIGN_OR_RETURN(train::TextData data, train::load_text_data(f.data, r.model.context));
  VOLTA_ASSIGN_OR_RETURN(arm->task, train::LMTask::create(r, std::move(data)));
  VOLTA_ASSIGN_OR_RETURN(Runtime rt, new_runtime(global, device, &arm->task->forward()));
  arm->rt = std::make_unique<Runtime>(std::move(rt));
  // The recipe's step without evaluation, checkpoints or log: steps 0, 1, ... of seed 1.
  train::TrainerOptions opts = arm->task->trainer_options("");
  opts.eval_every = 0;
  opts.steps = f.warmup + f.steps;
  opts.training.compile = compile;
  VOLTA_ASSIGN_OR_RETURN(arm->trainer, train::Trainer::start(*arm->rt, *arm->task, opts, 1));
  return arm;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ",") + n;
  return s;
}

Status bench_train(const BenchFlags& f, const GlobalFlags& global) {
  VOLTA_ASSIGN_OR_RETURN(DeviceKind device, device_from_flag_or_env(global.device));
  train::LMRecipe r = train::shakespeare_char();
  r.model = f.model;
  VOLTA_ASSIGN_OR_RETURN(r.model.arch, model::parse_arch(f.arch));
  if (r.model.arch == model::Arch::Llama) model::llama_defaults(r.model);
  if (f.batch > 0) r.batch = f.batch;
  VOLTA_ASSIGN_OR_RETURN(const CompileOptions compile, f.pipeline.to_options());
  CompileOptions other = compile;  // the compared pipeline
  other.pipeline.dump_after.clear();  // the first pipeline's dump only
  other.pipeline.dump = nullptr;
  for (const std::string& name : f.compare_disabled) {
    VOLTA_RETURN_IF_ERROR(check_pass_name(name, "--compare-disable-pass"));
    other.pipeline.disabled.insert(name);
  }
  std::vector<std::unique_ptr<TrainArm>> arms;
  VOLTA_ASSIGN_OR_RETURN(arms.emplace_back(), start_train_arm(f, global, device, r, compile));
  if (!f.compare_disabled.empty()) {
    VOLTA_ASSIGN_OR_RETURN(arms.emplace_back(), start_train_arm(f, global, device, r, other));
  }
  Profiler profiler;
  // With two arms, their steps alternate and each pair starts with the other arm than the last
  // (A B, B A, A B, ...): a noisy machine's slow and fast phases then fall on both.
  for (int64_t s = 0; s < f.warmup + f.steps; ++s) {
    if (s == f.warmup && f.profile.enabled()) arms[0]->rt->set_profiler(&profiler);
    for (size_t k = 0; k < arms.size(); ++k) {
      TrainArm& arm = *arms[s % 2 == 0 ? k : arms.size() - 1 - k];
      VOLTA_ASSIGN_OR_RETURN(train::StepReport st, arm.trainer->step());
      if (s >= f.warmup) arm.ms.push_back(1000.0 * st.seconds);
    }
  }
  const model::TinyLMConfig& c = r.model;
  const double base = median(arms[0]->ms);
  for (size_t k = 0; k < arms.size(); ++k) {
    const TrainArm& arm = *arms[k];
    const double med = median(arm.ms);
    const double tok_s = static_cast<double>(arm.task->batch_tokens()) / (med / 1000.0);
    std::string label = k == 0 ? "" : " with " + joined(f.compare_disabled) + " off";
    nlohmann::ordered_json row = {{"bench", "train"}, {"recipe", r.name}, {"arch", model::arch_name(c.arch)}, {"layers", c.layers},
                                  {"heads", c.heads}, {"channels", c.channels}, {"context", c.context}, {"batch", r.batch},
                                  {"threads", cpu_threads()}, {"ms_per_step", med}, {"tokens_per_s", tok_s}, {"steps", f.steps},
                                  {"backend", arm.rt->backend().name()}, {"deterministic", determinism_name(global.determinism)}};
    if (k > 0) {
      // Each pair's ratio too: its spread says how far the machine's noise reaches.
      std::vector<double> pairs;
      for (size_t i = 0; i < arm.ms.size(); ++i) pairs.push_back(arm.ms[i] / arms[0]->ms[i]);
      const auto [lo, hi] = std::minmax_element(pairs.begin(), pairs.end());
      char ratio[128];
      std::snprintf(ratio, sizeof ratio, " (%.3fx the first; pairs %.3fx median, %.3f-%.3f)", med / base, median(pairs), *lo, *hi);
      label += ratio;
      row["compare_disabled"] = f.compare_disabled;
      row["ratio"] = med / base;
      row["pair_ratio_median"] = median(pairs);
    }
    char text[400];
    std::snprintf(text, sizeof text, "train %s %s (%lldL %lldH %lldC ctx %lld, batch %lld)%s: %.2f ms/step (median of %lld%s), %.0f tokens/s, %d threads, %s, %s",
                  r.name.c_str(), model::arch_name(c.arch), static_cast<long long>(c.layers), static_cast<long long>(c.heads),
                  static_cast<long long>(c.channels), static_cast<long long>(c.context), static_cast<long long>(r.batch),
                  label.c_str(), med, static_cast<long long>(f.steps), arms.size() > 1 ? ", alternating" : "", tok_s, cpu_threads(),
                  arm.rt->backend().name().c_str(), determinism_name(global.determinism));
    VOLTA_RETURN_IF_ERROR(emit(f.json, row, text));
  }
  return f.profile.finish(profiler);
}

// Decode timed two ways, one run each in turn (A B, B A, ...: a slow phase of a noisy machine
// falls on both): `arm(0)` and `arm(1)` give tokens/s, `names` say what each is (the CPU's teams
// on and off, a pipeline and the one with passes off); each side's median and the median of the
// pairs' ratios (arm 0 over arm 1).
Status compare_decode(const BenchFlags& f, int64_t B, bool kv, const std::array<std::string, 2>& names, const char* bench,
                      const std::function<Result<double>(int)>& arm) {
  std::vector<double> a, b, ratio;
  for (int64_t r = 0; r < std::max<int64_t>(f.runs, 1); ++r) {
    double pair[2] = {};
    for (int i = 0; i < 2; ++i) {
      const int k = (i == 0) == (r % 2 == 0) ? 0 : 1;
      VOLTA_ASSIGN_OR_RETURN(pair[k], arm(k));
    }
    a.push_back(pair[0]), b.push_back(pair[1]), ratio.push_back(pair[0] / pair[1]);
  }
  char text[320];
  std::snprintf(text, sizeof text, "decode batch %lld, kv cache %s: %s %.0f tokens/s, %s %.0f tokens/s, pair median %.3f (%d threads)",
                static_cast<long long>(B), kv ? "on" : "off", names[0].c_str(), median(a), names[1].c_str(), median(b),
                median(ratio), cpu_threads());
  VOLTA_RETURN_IF_ERROR(emit(f.json,
       {{"bench", bench}, {"batch", B}, {"kv_cache", kv}, {"arms", {names[0], names[1]}}, {"tokens_per_s", {median(a), median(b)}},
        {"pair_median", median(ratio)}, {"threads", cpu_threads()}},
       text));
  return Status::ok();
}

Status bench_infer(const BenchFlags& f, const GlobalFlags& global) {
  VOLTA_ASSIGN_OR_RETURN(DeviceKind device, device_from_flag_or_env(global.device));
  model::TinyLMConfig c = train::shakespeare_char().model;
  Bindings params;
  DType stored = DType::f32;
  if (!f.checkpoint.empty()) {
    VOLTA_ASSIGN_OR_RETURN(train::LMCheckpoint ck, train::load_lm_checkpoint(f.checkpoint));
    c = ck.recipe.model;
    params = ck.state.params;
    stored = train::stored_weights(ck);
  } else {
    VOLTA_ASSIGN_OR_RETURN(ir::Graph g, model::build_tinylm_loss(c, 1, c.context));
    VOLTA_ASSIGN_OR_RETURN(params, init_params(g, 1));
  }
  VOLTA_ASSIGN_OR_RETURN(ir::Graph step, model::build_tinylm_decode(c, 1));
  VOLTA_ASSIGN_OR_RETURN(Runtime rt, new_runtime(global, device, &step));
  Profiler profiler;
  if (f.profile.enabled()) rt.set_profiler(&profiler);
  VOLTA_ASSIGN_OR_RETURN(const DType weights, weights_flag(f.weights, stored));
  VOLTA_ASSIGN_OR_RETURN(const CompileOptions compile, f.pipeline.to_options());
  VOLTA_ASSIGN_OR_RETURN(model::Generator gen, model::Generator::create(rt, c, params, weights, compile));
  // --compare-disable-pass: a second generator (its own state and plans) with those passes off too.
  std::optional<model::Generator> other;
  if (!f.compare_disabled.empty()) {
    CompileOptions off = compile;
    off.pipeline.dump_after.clear();  // the first pipeline's dump only
    off.pipeline.dump = nullptr;
    for (const std::string& name : f.compare_disabled) {
      VOLTA_RETURN_IF_ERROR(check_pass_name(name, "--compare-disable-pass"));
      off.pipeline.disabled.insert(name);
    }
    VOLTA_ASSIGN_OR_RETURN(other, model::Generator::create(rt, c, params, weights, off));
  }
  for (int64_t B : f.batches) {
    // Prefill: a full context of B sequences.
    VOLTA_RETURN_IF_ERROR(gen.reserve(B));
    VOLTA_ASSIGN_OR_RETURN(auto plan, gen.prefill_plan(B, c.context));
    const Bindings in = {{"tokens", Tensor::zeros(DType::i32, {B, c.context})}};
    std::vector<double> prefill;
    for (int64_t r = 0; r < f.warmup + f.runs; ++r) {
      const auto t0 = Clock::now();
      VOLTA_ASSIGN_OR_RETURN(std::vector<Tensor> out, rt.run(*plan, in, &gen.state()));
      if (r >= f.warmup) prefill.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
    const double prefill_tok_s = static_cast<double>(B * c.context) / median(prefill);
    for (bool kv : {true, false}) {
      if (f.kv != "both" && (f.kv == "on") != kv) continue;
      // Greedy decode from a one-token prompt: up to the full context, then past it.
      auto tokens_per_s = [&](int64_t tokens, model::Generator& g) -> Result<double> {
        model::SampleOptions o;
        o.temperature = 0.0;
        o.batch = B;
        o.tokens = tokens;
        o.kv_cache = kv;
        o.keep = f.keep;
        std::vector<double> secs;
        for (int64_t r = 0; r < f.warmup + f.runs; ++r) {
          const auto t0 = Clock::now();
          VOLTA_ASSIGN_OR_RETURN(auto out, g.generate({0}, o));
          if (r >= f.warmup) secs.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        }
        return static_cast<double>(B * tokens) / median(secs);
      };
      VOLTA_ASSIGN_OR_RETURN(const double decode_tok_s, tokens_per_s(c.context - 1, gen));
      if (f.compare_teams) {
        VOLTA_RETURN_IF_ERROR(compare_decode(f, B, kv, {"teams on", "off"}, "infer_teams", [&](int k) -> Result<double> {
          set_cpu_teams(k == 0);
          Result<double> t = tokens_per_s(c.context - 1, gen);
          set_cpu_teams(true);
          return t;
        }));
      }
      if (other) {
        const std::array<std::string, 2> names = {"all passes", "without " + joined(f.compare_disabled)};
        VOLTA_RETURN_IF_ERROR(compare_decode(f, B, kv, names, "infer_passes",
                                             [&](int k) { return tokens_per_s(c.context - 1, k == 0 ? gen : *other); }));
      }
      double long_tok_s = 0.0;
      if (f.long_tokens > 0) {
        VOLTA_ASSIGN_OR_RETURN(long_tok_s, tokens_per_s(f.long_tokens, gen));
      }
      char text[240];
      std::snprintf(text, sizeof text, "infer batch %lld, kv cache %s, %s weights: prefill %.0f tokens/s, decode %.0f tokens/s, %lld tokens %.0f tokens/s (%d threads)",
                    static_cast<long long>(B), kv ? "on " : "off", dtype_name(weights), prefill_tok_s, decode_tok_s, static_cast<long long>(f.long_tokens),
                    long_tok_s, cpu_threads());
      VOLTA_RETURN_IF_ERROR(emit(f.json,
           {{"bench", "infer"}, {"batch", B}, {"kv_cache", kv}, {"prefill_tokens_per_s", prefill_tok_s},
            {"decode_tokens_per_s", decode_tok_s}, {"long_tokens", f.long_tokens}, {"long_tokens_per_s", long_tok_s},
            {"threads", cpu_threads()}, {"context", c.context}, {"weights", dtype_name(weights)}, {"backend", rt.backend().name()}},
           text));
    }
  }
  return f.profile.finish(profiler);
}

}  // namespace

Action add_bench(CLI::App& app, GlobalFlags& global) {
  auto f = std::make_shared<BenchFlags>();
  CLI::App* cmd = app.add_subcommand("bench", "Benchmarks: matmul, train, infer, model");
  cmd->require_subcommand(1);
  auto common = [&](CLI::App* sub) {
    sub->add_option("--runs", f->runs, "Timed runs (the median is reported)")->capture_default_str();
    sub->add_option("--warmup", f->warmup, "Untimed warm-up runs")->capture_default_str();
    sub->add_flag("--json", f->json, "One JSON object per line");
    f->profile.add_to(*sub);
  };
  CLI::App* mm = cmd->add_subcommand("matmul", "GFLOP/s of the matmul kernel on the peers' shape suite");
  common(mm);
  mm->add_option("--group", f->group, "all | square | tiny-gpt | decode | big-gpt | train-bwd")->capture_default_str();
  CLI::App* tr = cmd->add_subcommand("train", "ms per training step of the shakespeare-char recipe");
  common(tr);
  tr->add_option("--recipe", f->group, "shakespeare-char")->capture_default_str();
  tr->add_option("--steps", f->steps, "Timed steps")->capture_default_str();
  tr->add_option("--data", f->data, "Training text")->capture_default_str();
  tr->add_option("--context", f->model.context, "Context length")->capture_default_str();
  tr->add_option("--layers", f->model.layers, "Transformer blocks")->capture_default_str();
  tr->add_option("--heads", f->model.heads, "Attention heads")->capture_default_str();
  tr->add_option("--channels", f->model.channels, "Model width")->capture_default_str();
  tr->add_option("--batch", f->batch, "Batch size (default: the recipe's)");
  tr->add_option("--arch", f->arch, "gpt | llama (its default kv heads and ffn width)")->capture_default_str();
  f->pipeline.add_to(*tr);
  tr->add_option("--compare-disable-pass", f->compare_disabled,
                 "Also time the step with these passes off, the two pipelines' steps alternating (one ratio from the same minutes)");
  CLI::App* inf = cmd->add_subcommand("infer", "Prefill and decode tokens/s, with and without the KV cache");
  common(inf);
  inf->add_option("--checkpoint", f->checkpoint, "TinyLM checkpoint (default: shakespeare-char with seeded weights)");
  inf->add_option("--batch", f->batches, "Batch sizes")->capture_default_str();
  inf->add_option("--kv-cache", f->kv, "Decode with the KV cache: on | off | both")->capture_default_str();
  inf->add_option("--long", f->long_tokens, "Also time this many tokens, past the context (0: skip)")->capture_default_str();
  inf->add_flag("--compare-teams", f->compare_teams,
                 "Also time decode with the CPU's teams off (every kernel call forks), runs alternating");
  inf->add_option("--keep", f->keep, "Tokens a full context keeps when it moves on (0: half the context)")->capture_default_str();
  inf->add_option("--weights", f->weights, "Matmul weights in f32, bf16 or f16 (default: as stored, f32 without a checkpoint)");
  f->pipeline.add_to(*inf);
  inf->add_option("--compare-disable-pass", f->compare_disabled,
                  "Also time decode with these passes off, the two pipelines' runs alternating (one ratio from the same minutes)");
  auto mf = std::make_shared<BenchModelFlags>();
  CLI::App* md = cmd->add_subcommand("model", "Steady-state latency (median, p90), first run and compile time of any model");
  md->add_option("file", mf->file, "An ONNX model (.onnx) or a model in the IR text format (.vir)")->required();
  md->add_option("--input", mf->inputs, "ONNX models: NAME=FILE.pb|.npy binds an input (others get seeded values)");
  md->add_option("--shape", mf->shapes, "ONNX models: NAME=DIMS (e.g. input_ids=1x128) binds an input's dynamic dims");
  md->add_option("--runs", mf->runs, "Timed runs")->capture_default_str();
  md->add_option("--warmup", mf->warmup, "Untimed runs after the first")->capture_default_str();
  md->add_option("--seed", mf->seed, "Seed of generated inputs and .vir params")->capture_default_str();
  md->add_flag("--json", mf->json, "One JSON object");
  md->add_option("--weights", mf->weights, "Matmul weights (params and constants read only as a matmul's right operand) in f32, bf16 or f16")
      ->capture_default_str();
  mf->profile.add_to(*md);
  mf->pipeline.add_to(*md);
  for (CLI::App* sub : {mm, tr, inf, md}) {
    sub->add_option("--device", global.device, "cpu | cuda | auto");
    sub->add_option("--threads", global.threads, "CPU threads");
    sub->add_option("--memory-limit", global.memory_limit, "Most memory a plan may need, in bytes (suffix K, M or G)");
  }
  return [f, mf, mm, tr, inf, md, &global]() -> Status {
    if (md->parsed()) {
      if (mf->runs < 1 || mf->runs > 100000) return invalid_argument("--runs must be in [1, 100000], got " + std::to_string(mf->runs));
      if (mf->warmup < 0 || mf->warmup > 100000)
        return invalid_argument("--warmup must be in [0, 100000], got " + std::to_string(mf->warmup));
      VOLTA_RETURN_IF_ERROR(mf->profile.check({mf->file}));
      return bench_model(*mf, global);
    }
    // Bounded so that a typo (or a value the flag parser saturated) is an error, not a run of years.
    if (f->runs < 1 || f->runs > 100000) return invalid_argument("--runs must be in [1, 100000], got " + std::to_string(f->runs));
    if (f->warmup < 0 || f->warmup > 100000) return invalid_argument("--warmup must be in [0, 100000], got " + std::to_string(f->warmup));
    if (f->steps < 1 || f->steps > 100000) return invalid_argument("--steps must be in [1, 100000], got " + std::to_string(f->steps));
    if (f->kv != "on" && f->kv != "off" && f->kv != "both")
      return invalid_argument("--kv-cache must be on, off or both, got '" + f->kv + "'");
    if (f->long_tokens < 0 || f->long_tokens > 1000000)
      return invalid_argument("--long must be in [0, 1000000], got " + std::to_string(f->long_tokens));
    for (int64_t b : f->batches)
      if (b < 1 || b > 4096) return invalid_argument("--batch must be in [1, 4096], got " + std::to_string(b));
    VOLTA_RETURN_IF_ERROR(f->profile.check({f->data, f->checkpoint}));
    if (mm->parsed()) {
      // The matmul bench calls the backend's kernel directly, outside any plan: nothing to trace.
      if (f->profile.enabled()) return invalid_argument("--profile: bench matmul times the kernel outside a plan; profile bench train or infer");
      return bench_matmul(*f, global);
    }
    if (tr->parsed()) {
      if (f->group != "all" && f->group != "shakespeare-char")
        return invalid_argument("--recipe: bench train knows shakespeare-char, got '" + f->group + "'");
      if (tr->count("--batch") > 0 && f->batch < 1)
        return invalid_argument("--batch must be >= 1, got " + std::to_string(f->batch));
      if (!f->compare_disabled.empty() && f->profile.enabled())
        return invalid_argument("--profile: with --compare-disable-pass two pipelines run; profile one at a time");
      return bench_train(*f, global);
    }
    if (inf->parsed()) return bench_infer(*f, global);
    return invalid_argument("bench needs matmul, train or infer");
  };
}

}  // namespace volta::cli
