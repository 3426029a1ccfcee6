// volta_op_tests: every op of the op table, on every backend, against the reference kernels.
//
//   volta_op_tests [-o OP[,OP...]] [-b cpu|cuda] [-m test|grad|perf] [-l strict|run-to-run|off]
//
// test  each case of tests/ops/op_cases.cpp on the backend vs the reference kernel (within the
//       case's bound; nan and infinity where the reference has them; exact zeros kept), the
//       same with nan, +-inf and +-0 in the float inputs, and repeat bits: the CPU at 1, 2 and
//       3 threads, a device twice.
// grad  each differentiable op's gradient rule, run on the backend, against central finite
//       differences; each op marked NoGrad in ops.def must be refused by autograd, naming it.
// perf  microseconds, GFLOP/s and GB/s of each case's kernel on the backend.
//
// -l picks the kernels a plan at that determinism level would run (test and perf): below
// strict, the CPU's split-K and CUDA's cuBLAS matmul; repeat bits are then checked at one
// thread count, the level's promise.
//
// Without -b: the CPU, and CUDA when a device is present. Exit 0 when nothing failed, 1 when
// something did, 2 on a usage error.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>

#include "ops/node_runner.h"
#include "ops/op_cases.h"
#include "volta/autograd.h"
#include "volta/builder.h"
#include "volta/profiler.h"
#include "volta/rng.h"
#include "volta/runtime.h"

namespace volta::test {
namespace {

struct Tally {
  int passed = 0, failed = 0, skipped = 0;
};

struct Harness {
  std::string mode = "test";
  Determinism level = Determinism::Strict;
  std::set<ir::Op> ops;  // empty: all
  std::vector<std::string> backends;
  bool backends_named = false;
};

// Element-wise check of `got` against the reference `want`: the same nan positions, the same
// infinities, exact zeros kept, and |got - want| / (1 + |want|) <= tol. Integers are exact.
// Returns the first problem ("" when none); *worst gets the largest error.
std::string compare(const Tensor& want, const Tensor& got, double tol, double* worst) {
  if (want.type() != got.type()) return "type " + got.type().to_string() + ", want " + want.type().to_string();
  const bool f32 = want.dtype() == DType::f32, f64 = want.dtype() == DType::f64;
  if (!f32 && !f64) return std::memcmp(want.raw(), got.raw(), want.bytes()) == 0 ? "" : "integers differ";
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double r = f32 ? want.data<float>()[i] : want.data<double>()[i];
    const double g = f32 ? got.data<float>()[i] : got.data<double>()[i];
    std::ostringstream at;
    at << "element " << i << ": " << g << ", reference " << r;
    if (std::isnan(r) || std::isnan(g)) {
      if (std::isnan(r) != std::isnan(g)) return at.str();
      continue;
    }
    if (std::isinf(r) || std::isinf(g)) {
      if (r != g) return at.str();
      continue;
    }
    if (r == 0.0 && g != 0.0) return at.str() + " (an exact zero)";
    const double err = std::fabs(g - r) / (1.0 + std::fabs(r));
    *worst = std::max(*worst, err);
    if (err > tol) return at.str() + " (bound " + std::to_string(tol) + ")";
  }
  return "";
}

// Every value a run leaves (inputs written in place, then the output) against the reference's.
std::string compare_all(const std::vector<Tensor>& want, const std::vector<Tensor>& got, double tol, double* worst) {
  for (size_t i = 0; i < want.size(); ++i) {
    std::string why = compare(want[i], got[i], tol, worst);
    if (!why.empty()) return (i + 1 == want.size() ? "output " : "input " + std::to_string(i) + " (in place) ") + why;
  }
  return "";
}

bool bitwise_equal(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].bitwise_equal(b[i])) return false;
  return true;
}

bool has_float_data(const OpCase& c) {
  for (const CaseInput& in : c.inputs)
    if (is_random_float(in.fill)) return true;
  return false;
}

std::vector<TensorType> input_types(const OpCase& c) {
  std::vector<TensorType> t;
  for (const CaseInput& in : c.inputs) t.push_back(in.type);
  return t;
}

Result<std::unique_ptr<Backend>> make_backend(const std::string& name) {
  if (name == "cpu") return make_cpu_backend();
  if (name == "cuda") return make_cuda_backend();
  return invalid_argument("unknown backend '" + name + "' (cpu or cuda)");
}

void report(Tally& t, const char* verdict, const std::string& backend, const std::string& label, const std::string& detail) {
  std::printf("%-4s %-5s %s: %s\n", verdict, backend.c_str(), label.c_str(), detail.c_str());
  if (!std::strcmp(verdict, "PASS")) ++t.passed;
  else if (!std::strcmp(verdict, "FAIL")) ++t.failed;
  else ++t.skipped;
}

// A form of the op the backend refuses when planning (Backend::check_node, kUnimplemented) is a
// visible skip: planning names it to the user, so there is no kernel to test. Any other refusal fails.
Status planning_refusal(const Backend& be, const ir::Node& node, const OpCase& c) {
  const ir::Graph g = node_graph(node, input_types(c));
  return be.check_node(g, g.nodes.back());
}
const char* refusal_verdict(const Status& s) { return s.code() == StatusCode::kUnimplemented ? "SKIP" : "FAIL"; }

// One case's parity on one backend, with ordinary and with special values.
void test_case(Backend& be, const OpCase& c, Tally& tally, Determinism level) {
  const std::string label = c.label();
  auto node = make_node(c.op, input_types(c), c.attrs);
  if (!node.is_ok()) return report(tally, "FAIL", be.name(), label, "the case does not verify: " + node.status().message());
  if (Status s = planning_refusal(be, *node, c); !s.is_ok())
    return report(tally, refusal_verdict(s), be.name(), label, "refused when planning: " + s.message());
  auto ref = make_reference_backend();
  const bool cpu = be.name() == "cpu";
  // Strict: the CPU at 1, 2 and 3 threads; below it the same thread count twice.
  const std::vector<int> threads = !cpu ? std::vector<int>{0, 0} : level == Determinism::Strict ? std::vector<int>{1, 2, 3}
                                                                                                 : std::vector<int>{2, 2};
  std::string detail;
  for (bool specials : {false, true}) {
    if (specials && !(c.specials && has_float_data(c))) continue;
    const std::vector<Tensor> in = make_inputs(c, 23, specials);
    auto want = run_in_place(*ref, *node, in);
    if (!want.is_ok()) return report(tally, "FAIL", be.name(), label, "reference: " + want.status().message());
    std::vector<std::vector<Tensor>> runs;
    for (int t : threads) {
      if (cpu) set_cpu_threads(t);
      auto got = run_in_place(be, *node, in, level);
      if (cpu) set_cpu_threads(0);
      if (!got.is_ok()) return report(tally, "FAIL", be.name(), label, got.status().message());
      runs.push_back(std::move(*got));
    }
    double worst = 0;
    const std::string why = compare_all(*want, runs[0], c.tol, &worst);
    const std::string with = specials ? "with nan/inf: " : "";
    if (!why.empty()) return report(tally, "FAIL", be.name(), label, with + why);
    for (size_t r = 1; r < runs.size(); ++r)
      if (!bitwise_equal(runs[0], runs[r]))
        return report(tally, "FAIL", be.name(), label,
                      with + (threads[0] != threads[r] ? std::to_string(threads[0]) + " and " + std::to_string(threads[r]) +
                                  " threads differ"
                                                       : "two runs differ"));
    char buf[96];
    std::snprintf(buf, sizeof buf, "max err %.2g (bound %.0g)", worst, c.tol);
    detail += specials ? "; nan/inf ok" : buf;
  }
  // The variant the runs took: asked of the node as it stands in its graph (inputs wired), as run_in_place asks.
  const ir::Graph g = node_graph(*node, input_types(c));
  report(tally, "PASS", be.name(), label,
         detail + (cpu && level == Determinism::Strict ? "; threads 1/2/3 bitwise" : "; rerun bitwise") + " (" +
             be.kernel_info(g, g.nodes.back(), level).variant + ")");
}

// A NoGrad op: its gradient rule must refuse, naming the op.
void check_refusal(const std::string& backend, const OpCase& c, Tally& tally) {
  ModelBuilder b;
  std::vector<Value> in;
  // Params (state-updating ops write theirs in place: optimizer_update, increment, cache_write),
  // integers as untrained state; f64 scalars (a norm, a learning rate) as inputs.
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const TensorType& t = c.inputs[i].type;
    const std::string name = "x" + std::to_string(i);
    in.push_back(t.dtype == DType::f64 ? b.input(name, t) : b.param(name, t, ParamInit{"zeros", 0, 0, t.dtype == DType::f32}));
  }
  const Value y = b.op(c.op, in, c.attrs, "y");
  b.output(y);
  auto g = b.build();
  if (!g.is_ok()) return report(tally, "FAIL", backend, c.label(), "the case does not build: " + g.status().message());
  ModelBuilder with_dy(*g);
  const Value dy = with_dy.input("dy", g->node(y.id).type);
  auto rule = autograd::grad_rule(with_dy, g->node(y.id), y, dy);
  const std::string name = ir::op_name(c.op);
  if (rule.is_ok()) return report(tally, "FAIL", backend, c.label(), "ops.def says NoGrad, but its gradient rule gave one");
  if (rule.status().message().find("[" + name + "]") == std::string::npos)
    return report(tally, "FAIL", backend, c.label(), "the refusal does not name the op: " + rule.status().message());
  report(tally, "PASS", backend, c.label(), "refused: " + rule.status().message());
}

// A differentiable op's case: autograd's gradient of L = sum(y * r) (r fixed, random), run on
// the backend, against central differences of L. L is summed on the host in double from the
// backend's y, so the differences see y's rounding, not a long f32 sum's.
void grad_case(const std::string& backend, const OpCase& c, Tally& tally) {
  const std::string label = c.label();
  if (!c.no_grad.empty()) return report(tally, "SKIP", backend, label, c.no_grad);
  auto type = ir::infer_type(c.op, input_types(c), c.attrs);
  if (!type.is_ok()) return report(tally, "FAIL", backend, label, "the case does not verify: " + type.status().message());
  auto is_param = [](const CaseInput& ci) { return ci.type.dtype == DType::f32 && is_random_float(ci.fill); };
  if (type->dtype != DType::f32 || std::none_of(c.inputs.begin(), c.inputs.end(), is_param))
    return report(tally, "SKIP", backend, label, "no float input and output");
  if (type->numel() == 0) return report(tally, "SKIP", backend, label, "an empty output");

  ModelBuilder b;
  Bindings values;
  std::vector<Value> in;
  const std::vector<Tensor> data = make_inputs(c, 5, false, 1.0f);
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const std::string name = "x" + std::to_string(i);
    if (is_param(c.inputs[i])) {
      in.push_back(b.param(name, c.inputs[i].type));
      values.emplace(name, data[i]);
    } else {
      in.push_back(b.constant(name, data[i]));
    }
  }
  const Value y = b.op(c.op, in, c.attrs, "y");
  b.output(y);
  auto forward = b.build();
  if (!forward.is_ok()) return report(tally, "FAIL", backend, label, forward.status().message());
  Tensor r = Tensor::zeros(DType::f32, type->shape);
  fill_normal(r, 99, 1, 0.0f, 1.0f);
  ModelBuilder lb(*forward);
  const Value weighted = lb.mul(y, lb.constant("r", r));
  std::vector<int64_t> axes;
  for (size_t i = 0; i < type->shape.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  lb.output(axes.empty() ? weighted : lb.reduce_sum(weighted, axes, false, "loss"));
  auto with_loss = lb.build();
  if (!with_loss.is_ok()) return report(tally, "FAIL", backend, label, with_loss.status().message());
  with_loss->outputs = {with_loss->outputs.back()};
  auto gg = autograd::build_backward(*with_loss);
  if (!gg.is_ok()) return report(tally, "FAIL", backend, label, gg.status().message());

  auto be = make_backend(backend);
  if (!be.is_ok()) return report(tally, "FAIL", backend, label, be.status().message());
  Runtime rt(std::move(*be));
  auto train = rt.compile(gg->graph);
  auto fwd = rt.compile(*forward);
  if (!train.is_ok() || !fwd.is_ok()) {
    // A backend without a kernel for an op or form of the gradient graph refuses it by name
    // (reduce_max's gradient needs equal): a visible skip, as for a forward form it refuses.
    const Status& s = train.is_ok() ? fwd.status() : train.status();
    return report(tally, refusal_verdict(s), backend, label, "refused when planning: " + s.message());
  }
  auto analytic = rt.run(**train, values);
  if (!analytic.is_ok()) return report(tally, "FAIL", backend, label, analytic.status().message());
  auto loss = [&]() -> Result<double> {
    VOLTA_ASSIGN_OR_RETURN(std::vector<Tensor> out, rt.run(**fwd, values));
    double sum = 0;
    for (int64_t i = 0; i < out[0].numel(); ++i) sum += static_cast<double>(out[0].data<float>()[i]) * r.data<float>()[i];
    return sum;
  };
  // Where x +- h crosses a kink (relu, max, clip), the central difference averages two slopes:
  // the one-sided difference on the smooth side is the derivative then.
  constexpr float kStep = 1e-2f;
  constexpr double kMaxRel = 1e-2;  // |autograd - fd| / max(|fd|, 1e-2)
  double max_rel = 0, max_abs = 0;
  int64_t checked = 0;
  for (size_t p = 0; p < gg->params.size(); ++p) {
    const Tensor param = values.at(gg->params[p]);
    const Tensor& grad = (*analytic)[p + 1];
    const int64_t stride = std::max<int64_t>(1, param.numel() / 64);  // about 64 elements, evenly spread
    // Each perturbed value is bound as a tensor of its own: a device runtime keeps a param's
    // upload keyed by its storage and does not re-read a tensor changed in place.
    auto loss_at = [&](int64_t i, float x) {
      Tensor t = param.clone();
      t.data<float>()[i] = x;
      values.insert_or_assign(gg->params[p], t);
      auto l = loss();
      values.insert_or_assign(gg->params[p], param);
      return l;
    };
    for (int64_t i = 0; i < param.numel(); i += stride) {
      const float saved = param.data<float>()[i], hi = saved + kStep, lo = saved - kStep;
      auto mid = loss();
      auto up = loss_at(i, hi);
      auto down = loss_at(i, lo);
      for (const auto* l : {&mid, &up, &down})
        if (!l->is_ok()) return report(tally, "FAIL", backend, label, l->status().message());
      const double g = grad.data<float>()[i];
      double err = 1e300, rel = 1e300;
      for (double fd : {(*up - *down) / (double{hi} - lo), (*up - *mid) / (double{hi} - saved), (*mid - *down) / (double{saved} - lo)}) {
        if (std::fabs(g - fd) / std::max(std::fabs(fd), 1e-2) < rel) {
          err = std::fabs(g - fd);
          rel = err / std::max(std::fabs(fd), 1e-2);
        }
      }
      max_abs = std::max(max_abs, err);
      max_rel = std::max(max_rel, rel);
      ++checked;
    }
  }
  char buf[128];
  std::snprintf(buf, sizeof buf, "max rel %.2g (bound %.0g), max abs %.2g, %lld elements", max_rel, kMaxRel, max_abs,
                static_cast<long long>(checked));
  report(tally, max_rel < kMaxRel ? "PASS" : "FAIL", backend, label, buf);
}

// Microseconds per call of the case's kernel: the fastest of 5 batches, each >= 20 ms.
void perf_case(Backend& be, const OpCase& c, Tally& tally, Determinism level) {
  const std::string label = c.label();
  auto node = make_node(c.op, input_types(c), c.attrs);
  if (!node.is_ok()) return report(tally, "FAIL", be.name(), label, node.status().message());
  if (Status s = planning_refusal(be, *node, c); !s.is_ok())
    return report(tally, refusal_verdict(s), be.name(), label, "refused when planning: " + s.message());
  const std::vector<Tensor> in = make_inputs(c, 23, false);
  auto up = upload(be, in);
  if (!up.is_ok()) return report(tally, "FAIL", be.name(), label, "cannot upload the inputs: " + up.status().message());
  uint64_t bytes = node->type.bytes();
  for (const Tensor& t : in) bytes += t.bytes();
  const ir::Graph g = node_graph(*node, input_types(c));
  const ir::Node& n = g.nodes.back();
  const size_t ws_bytes = be.workspace_bytes(g, n);
  auto ws = be.allocate(ws_bytes);
  auto out = be.allocate(n.type.bytes());
  if (!ws.is_ok() || !out.is_ok()) return report(tally, "FAIL", be.name(), label, "out of memory");
  const KernelInfo kernel = be.kernel_info(g, n, level);
  auto once = [&] {
    return be.execute(n, up->refs, TensorRef{out->get(), n.type}, std::span<std::byte>(ws->get(), ws_bytes), kernel);
  };
  using clock = std::chrono::steady_clock;
  int64_t reps = 1;
  double best_us = 1e300;
  for (int batch = -1; batch < 5; ++batch) {  // batch -1 warms up and sizes the batches
    const auto start = clock::now();
    for (int64_t i = 0; i < reps; ++i)
      if (Status st = once(); !st.is_ok()) return report(tally, "FAIL", be.name(), label, st.message());
    if (Status st = be.synchronize(); !st.is_ok()) return report(tally, "FAIL", be.name(), label, st.message());
    const double us = std::chrono::duration<double, std::micro>(clock::now() - start).count();
    if (batch < 0) {
      reps = std::clamp<int64_t>(static_cast<int64_t>(20000.0 / std::max(us, 0.01)), 1, 100000);
      continue;
    }
    best_us = std::min(best_us, us / static_cast<double>(reps));
  }
  const double flops = static_cast<double>(node_flops(g, n));
  char buf[128];
  std::snprintf(buf, sizeof buf, "%10.2f us %9.2f GFLOP/s %8.2f GB/s", best_us, flops / (best_us * 1e3),
                static_cast<double>(bytes) / (best_us * 1e3));
  report(tally, "PASS", be.name(), label, buf);
}

int usage(const char* why) {
  std::fprintf(stderr, "volta_op_tests: %s\nusage: volta_op_tests [-o OP[,OP...]] [-b cpu|cuda] [-m test|grad|perf] [-l strict|run-to-run|off]\n", why);
  return 2;
}

int run(int argc, char** argv) {
  Harness h;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      std::printf("usage: volta_op_tests [-o OP[,OP...]] [-b cpu|cuda] [-m test|grad|perf] [-l strict|run-to-run|off]\n");
      return 0;
    }
    if (i + 1 >= argc) return usage(("missing value of " + flag).c_str());
    const std::string value = argv[++i];
    if (flag == "-m") {
      if (value != "test" && value != "grad" && value != "perf") return usage(("unknown mode '" + value + "'").c_str());
      h.mode = value;
    } else if (flag == "-l") {
      auto level = parse_determinism(value);
      if (!level.is_ok()) return usage(level.status().message().c_str());
      h.level = *level;
    } else if (flag == "-b") {
      if (value != "cpu" && value != "cuda") return usage(("unknown backend '" + value + "'").c_str());
      h.backends.push_back(value);
      h.backends_named = true;
    } else if (flag == "-o") {
      std::stringstream ss(value);
      for (std::string name; std::getline(ss, name, ',');) {
        auto op = ir::parse_op(name);
        if (!op.is_ok()) return usage(("unknown op '" + name + "'").c_str());
        h.ops.insert(*op);
      }
    } else {
      return usage(("unknown flag " + flag).c_str());
    }
  }
  if (h.backends.empty()) h.backends = {"cpu", "cuda"};

  Tally tally;
  int ops_run = 0, ops_wanted = 0;
  for (const std::string& name : h.backends) {
    auto be = make_backend(name);
    if (!be.is_ok()) {
      if (h.backends_named) {
        std::printf("FAIL %-5s %s\n", name.c_str(), be.status().message().c_str());
        ++tally.failed;
      } else {
        std::printf("SKIP %-5s %s\n", name.c_str(), be.status().message().c_str());
      }
      continue;
    }
    for (int i = 0; i < ir::kNumOps; ++i) {
      const ir::Op op = static_cast<ir::Op>(i);
      if ((!h.ops.empty() && !h.ops.count(op)) || ir::is_leaf(op)) continue;
      ++ops_wanted;
      const std::vector<OpCase> cases = op_cases(op);
      if (cases.empty()) {
        report(tally, "FAIL", name, ir::op_name(op), "no cases in tests/ops/op_cases.cpp");
        continue;
      }
      if (!(*be)->capabilities().supports(op)) {
        report(tally, "SKIP", name, ir::op_name(op), "no " + name + " kernel");
        continue;
      }
      ++ops_run;
      if (h.mode == "grad" && ir::op_info(op).grad == ir::OpGrad::NoGrad) {
        check_refusal(name, cases[0], tally);
        continue;
      }
      for (const OpCase& c : cases) {
        if (!c.feature.empty() && !(*be)->capabilities().has(c.feature)) {
          report(tally, "SKIP", name, c.label(), "needs the backend feature " + c.feature);
          continue;
        }
        if (h.mode == "test") test_case(**be, c, tally, h.level);
        else if (h.mode == "grad") grad_case(name, c, tally);
        else perf_case(**be, c, tally, h.level);
      }
    }
  }
  std::printf("volta_op_tests -m %s -l %s: %d passed, %d failed, %d skipped; %d of %d ops run\n", h.mode.c_str(),
              determinism_name(h.level), tally.passed, tally.failed, tally.skipped, ops_run, ops_wanted);
  return tally.failed ? 1 : 0;
}

}  // namespace
}  // namespace volta::test

int main(int argc, char** argv) { return volta::test::run(argc, argv); }
