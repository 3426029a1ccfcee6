// Liveness-based memory planner. Every computed value lives from the step that writes it to
// the last step that reads it or a view of it (outputs to the end); kernel workspaces live for
// their step. Views (reshapes and their like, see view_offset) share their input's bytes and are
// not executed.
// Buffers are placed "greedy by size": largest first, each at the lowest offset that no
// time-overlapping buffer already uses. All orders are total (size, step, node id), so the
// plan is the same on every run.
#include <algorithm>
#include <iterator>
#include <map>

#include "volta/plan.h"

namespace volta::plan {

namespace {

// Placed buffers by first step, with the latest last step under each node of a segment tree:
// the placed buffers that overlap a step range are found in O((k + 1) log steps) rather than by
// scanning every placed buffer (quadratic on long graphs).
class PlacedIndex {
 public:
  explicit PlacedIndex(int32_t steps) : n_(std::max(steps, 1)), max_last_(4 * static_cast<size_t>(n_), -1), at_(static_cast<size_t>(n_)) {}

  void add(const Buffer* b) {
    at_[static_cast<size_t>(b->first_step)].push_back(b);
    size_t node = 1;
    int32_t lo = 0, hi = n_ - 1;
    for (;;) {
      max_last_[node] = std::max(max_last_[node], b->last_step);
      if (lo == hi) return;
      const int32_t mid = lo + (hi - lo) / 2;
      if (b->first_step <= mid) node = 2 * node, hi = mid;
      else node = 2 * node + 1, lo = mid + 1;
    }
  }
  // Appends the buffers live at some step of [first, last].
  void overlapping(int32_t first, int32_t last, std::vector<const Buffer*>& out) const { query(1, 0, n_ - 1, first, last, out); }

 private:
  void query(size_t node, int32_t lo, int32_t hi, int32_t first, int32_t last, std::vector<const Buffer*>& out) const {
    if (lo > last || max_last_[node] < first) return;  // all start after the range or end before it
    if (lo == hi) {
      for (const Buffer* b : at_[static_cast<size_t>(lo)])
        if (b->last_step >= first) out.push_back(b);
      return;
    }
    const int32_t mid = lo + (hi - lo) / 2;
    query(2 * node, lo, mid, first, last, out);  // depth log2(steps)
    query(2 * node + 1, mid + 1, hi, first, last, out);
  }
  int32_t n_;
  std::vector<int32_t> max_last_;
  std::vector<std::vector<const Buffer*>> at_;
};

void place(std::vector<Buffer*>& buffers, int32_t steps, size_t& arena_bytes) {
  std::sort(buffers.begin(), buffers.end(), [](const Buffer* a, const Buffer* b) {
    if (a->bytes != b->bytes) return a->bytes > b->bytes;
    if (a->first_step != b->first_step) return a->first_step < b->first_step;
    if (a->cls != b->cls) return a->cls < b->cls;
    return a->node < b->node;
  });
  PlacedIndex placed(steps);
  std::vector<const Buffer*> conflicts;
  for (Buffer* buf : buffers) {
    if (buf->bytes == 0 || buf->last_step < buf->first_step) continue;
    conflicts.clear();
    placed.overlapping(buf->first_step, buf->last_step, conflicts);
    std::sort(conflicts.begin(), conflicts.end(), [](const Buffer* a, const Buffer* b) {
      return a->offset != b->offset ? a->offset < b->offset : a->bytes < b->bytes;
    });
    size_t offset = 0;
    for (const Buffer* c : conflicts) {
      if (c->offset >= offset + buf->bytes) break;  // the gap before c is big enough
      offset = std::max(offset, align_up(c->offset + c->bytes));
    }
    buf->offset = offset;
    arena_bytes = std::max(arena_bytes, offset + buf->bytes);
    placed.add(buf);
  }
}

}  // namespace

std::optional<size_t> view_offset(const ir::Graph& g, const ir::Node& n) {
  if (n.inputs.size() != 1) return std::nullopt;
  const Shape& in = g.node(n.inputs[0]).type.shape;
  switch (n.op) {
    case ir::Op::Reshape: return 0;
    case ir::Op::Transpose: {  // the same bytes when the dims longer than 1 keep their order
      auto perm = n.attrs.get_ints("perm");
      if (!perm.is_ok() || perm->size() != in.size()) return std::nullopt;
      int64_t prev = -1;
      for (int64_t d : *perm) {
        if (d < 0) d += static_cast<int64_t>(in.size());
        if (d < 0 || d >= static_cast<int64_t>(in.size())) return std::nullopt;
        if (in[static_cast<size_t>(d)] == 1) continue;
        if (d < prev) return std::nullopt;
        prev = d;
      }
      return 0;
    }
    case ir::Op::Slice: {  // one contiguous block when every dim before the axis is 1
      auto axis = n.attrs.get_int("axis", 0);
      auto start = n.attrs.get_int("start", 0);
      if (!axis.is_ok() || !start.is_ok() || in.empty()) return std::nullopt;
      const int64_t rank = static_cast<int64_t>(in.size()), a = *axis < 0 ? *axis + rank : *axis;
      if (a < 0 || a >= rank) return std::nullopt;
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < a; ++d) outer *= in[static_cast<size_t>(d)];
      for (int64_t d = a + 1; d < rank; ++d) inner *= in[static_cast<size_t>(d)];
      if (outer != 1) return std::nullopt;
      const int64_t dim = in[static_cast<size_t>(a)];
      const int64_t s = std::clamp<int64_t>(*start < 0 ? *start + dim : *start, 0, dim);
      return static_cast<size_t>(s * inner) * dtype_size(n.type.dtype);
    }
    default: return std::nullopt;
  }
}

const char* mem_class_name(MemClass c) {
  switch (c) {
    case MemClass::Input: return "input";
    case MemClass::Param: return "param";
    case MemClass::Constant: return "constant";
    case MemClass::Activation: return "activation";
    case MemClass::Temp: return "temp";
    case MemClass::Output: return "output";
    case MemClass::Grad: return "grad";
    case MemClass::OptState: return "optimizer_state";
    case MemClass::KvCache: return "kv_cache";
    case MemClass::kCount: break;
  }
  return "?";
}

Result<ExecutionPlan> make_plan(ir::Graph g, uint64_t graph_hash, const std::string& backend,
                                const WorkspaceFn& workspace, const PlanOptions& opts) {
  ExecutionPlan p;
  VOLTA_ASSIGN_OR_RETURN(p.schedule, make_schedule(g));
  const int32_t steps = static_cast<int32_t>(p.schedule.size());
  const int32_t last = std::max(steps - 1, 0);

  std::vector<bool> is_output(g.size(), false);
  for (int32_t o : g.outputs) is_output[static_cast<size_t>(o)] = true;

  p.values.resize(g.size());
  for (const ir::Node& n : g.nodes) {
    Buffer& b = p.values[static_cast<size_t>(n.id)];
    b.node = n.id;
    b.bytes = align_up(n.type.bytes());
    switch (n.op) {
      case ir::Op::Input: b.cls = MemClass::Input; break;
      case ir::Op::Param: b.cls = MemClass::Param; break;
      case ir::Op::Constant: b.cls = MemClass::Constant; break;
      default: b.cls = is_output[static_cast<size_t>(n.id)] ? MemClass::Output : MemClass::Activation;
    }
    b.in_arena = !ir::is_leaf(n.op);
    b.first_step = 0;
    b.last_step = b.in_arena ? -1 : last;  // leaves are bound for the whole run
  }
  // The buffer that holds a value's bytes: its own, or its root's when it is a view.
  auto storage = [&](int32_t id) -> Buffer& {
    Buffer& b = p.values[static_cast<size_t>(id)];
    return b.view_of >= 0 ? p.values[static_cast<size_t>(b.view_of)] : b;
  };
  p.workspaces.resize(p.schedule.size());
  for (int32_t s = 0; s < steps; ++s) {
    const ir::Node& n = g.node(p.schedule[static_cast<size_t>(s)]);
    Buffer& out = p.values[static_cast<size_t>(n.id)];
    out.first_step = s;
    out.last_step = std::max(out.last_step, s);
    // A view, or an in-place write whose value is its input's bytes (cache_write): no bytes of
    // its own. Inputs come first in the schedule: the root is known.
    const auto offset = ir::output_is_input(n.op) ? std::optional<size_t>(0) : view_offset(g, n);
    if (offset) {
      const Buffer& in = p.values[static_cast<size_t>(n.inputs[0])];
      out.view_of = storage(n.inputs[0]).node;
      out.view_offset = in.view_offset + *offset;
      out.in_arena = false;
      out.bytes = 0;
    }
    for (int32_t in : n.inputs) {
      Buffer& b = storage(in);
      if (b.in_arena) b.last_step = std::max(b.last_step, s);
    }
    Buffer& ws = p.workspaces[static_cast<size_t>(s)];
    ws.node = n.id;
    ws.cls = MemClass::Temp;
    ws.bytes = workspace ? align_up(workspace(g, n)) : 0;
    ws.in_arena = true;
    ws.first_step = ws.last_step = s;
  }
  // The model's state: params that optimizer_update writes as slots and the step counter
  // increment writes are optimizer state, the gradients it reads the Grad class; the caches
  // cache_write and cache_attention fill are the KV cache.
  for (const ir::Node& n : g.nodes) {
    if (n.op == ir::Op::CacheWrite || n.op == ir::Op::CacheAttention)
      for (size_t i = 0; i < n.inputs.size(); ++i)
        if (ir::writes_input(n.op, i) && !storage(n.inputs[i]).in_arena) storage(n.inputs[i]).cls = MemClass::KvCache;
    if (n.op != ir::Op::OptimizerUpdate && n.op != ir::Op::Increment) continue;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      Buffer& b = storage(n.inputs[i]);
      if (n.op == ir::Op::OptimizerUpdate && i == 1 && b.in_arena) b.cls = MemClass::Grad;
      if (ir::writes_input(n.op, i) && !(n.op == ir::Op::OptimizerUpdate && i == 0) && !b.in_arena) b.cls = MemClass::OptState;
    }
  }
  for (size_t i = 0; i < g.outputs.size(); ++i) {
    // An output that is a view keeps its root's bytes: the root lives to the end in its class.
    Buffer& root = storage(g.outputs[i]);
    if (!root.in_arena) continue;
    root.last_step = last;
    root.cls = i < opts.output_classes.size() ? opts.output_classes[i] : MemClass::Output;
  }

  // Place.
  std::vector<Buffer*> arena;
  for (Buffer& b : p.values)
    if (b.in_arena) arena.push_back(&b);
  for (Buffer& b : p.workspaces) arena.push_back(&b);
  MemoryReport& m = p.memory;
  place(arena, steps, m.arena_bytes);

  // Report: naive = every buffer on its own; peak per class over steps.
  auto account = [&](const Buffer& b) { m.naive[static_cast<size_t>(b.cls)] += b.bytes; };
  for (const Buffer& b : p.values) {
    account(b);
    if (!b.in_arena) m.external_bytes += b.bytes;
  }
  for (const Buffer& b : p.workspaces) account(b);
  // Live bytes per class at every step, by a sweep over the steps where buffers start and end.
  std::vector<std::array<int64_t, kNumMemClasses>> delta(static_cast<size_t>(last) + 2);
  auto add_interval = [&](const Buffer& b) {
    if (b.bytes == 0 || b.last_step < b.first_step) return;
    delta[static_cast<size_t>(b.first_step)][static_cast<size_t>(b.cls)] += static_cast<int64_t>(b.bytes);
    delta[static_cast<size_t>(b.last_step) + 1][static_cast<size_t>(b.cls)] -= static_cast<int64_t>(b.bytes);
  };
  for (const Buffer& b : p.values) add_interval(b);
  for (const Buffer& b : p.workspaces) add_interval(b);
  std::array<int64_t, kNumMemClasses> live{};
  for (int32_t s = 0; s <= last; ++s) {
    size_t total = 0;
    for (size_t c = 0; c < kNumMemClasses; ++c) {
      live[c] += delta[static_cast<size_t>(s)][c];
      m.peak[c] = std::max(m.peak[c], static_cast<size_t>(live[c]));
      total += static_cast<size_t>(live[c]);
    }
    m.peak_live_bytes = std::max(m.peak_live_bytes, total);
  }
  for (size_t c = 0; c < kNumMemClasses; ++c) {
    m.peak[c] += opts.extra_bound[c];
    m.naive[c] += opts.extra_bound[c];
    m.external_bytes += opts.extra_bound[c];
    m.peak_live_bytes += opts.extra_bound[c];
  }
  for (size_t c = 0; c < kNumMemClasses; ++c) m.naive_bytes += m.naive[c];
  m.peak_bytes = m.external_bytes + m.arena_bytes;
  Placement& pl = m.placement;
  pl.device = opts.device;
  for (const ir::Node& n : g.nodes) {
    const size_t bytes = p.values[static_cast<size_t>(n.id)].bytes;
    if (n.op == ir::Op::Input) pl.host_input_bytes += bytes;
    if (n.op == ir::Op::Param || n.op == ir::Op::Constant) pl.device_param_bytes += bytes;
  }
  pl.device_temp_bytes = m.arena_bytes;
  for (int32_t o : g.outputs) pl.device_output_bytes += g.node(o).type.bytes();

  if (opts.memory_budget_bytes > 0 && m.peak_bytes > opts.memory_budget_bytes)
    return out_of_memory("plan for graph '" + g.name + "' needs " + std::to_string(m.peak_bytes) + " bytes (arena " +
                         std::to_string(m.arena_bytes) + " + bound inputs, params and constants " +
                         std::to_string(m.external_bytes) + ") but the memory budget is " +
                         std::to_string(opts.memory_budget_bytes) + " bytes");
  p.graph = std::move(g);
  p.graph_hash = graph_hash;
  p.backend = backend;
  return p;
}

Status verify_allocation(const ExecutionPlan& p) {
  std::vector<const Buffer*> arena;
  for (const Buffer& b : p.values)
    if (b.in_arena && b.bytes > 0) arena.push_back(&b);
  for (const Buffer& b : p.workspaces)
    if (b.bytes > 0) arena.push_back(&b);
  auto describe = [&](const Buffer* b) {
    std::string what = b->cls == MemClass::Temp ? "workspace of '" : "value '";
    return what + p.graph.node(b->node).name + "' [" + std::to_string(b->offset) + ", " +
           std::to_string(b->offset + b->bytes) + ") steps " + std::to_string(b->first_step) + ".." +
           std::to_string(b->last_step);
  };
  for (const Buffer* b : arena) {
    if (b->offset % kAlignment != 0) return internal_error("misaligned " + describe(b));
    if (b->offset + b->bytes > p.memory.arena_bytes) return internal_error("outside the arena: " + describe(b));
  }
  // Sweep the steps keeping the live buffers by offset: each one that becomes live must fit
  // between its neighbours (live buffers never share bytes, so the neighbours are enough).
  std::vector<const Buffer*> by_start = arena, by_end = arena;
  std::sort(by_start.begin(), by_start.end(), [](const Buffer* a, const Buffer* b) {
    return a->first_step != b->first_step ? a->first_step < b->first_step : a->node < b->node;
  });
  std::sort(by_end.begin(), by_end.end(), [](const Buffer* a, const Buffer* b) {
    return a->last_step != b->last_step ? a->last_step < b->last_step : a->node < b->node;
  });
  std::multimap<size_t, const Buffer*> live;  // by offset
  size_t ended = 0;
  for (const Buffer* b : by_start) {
    if (b->last_step < b->first_step) continue;
    for (; ended < by_end.size() && by_end[ended]->last_step < b->first_step; ++ended) {
      auto [lo, hi] = live.equal_range(by_end[ended]->offset);
      for (auto it = lo; it != hi; ++it)
        if (it->second == by_end[ended]) {
          live.erase(it);
          break;
        }
    }
    auto next = live.lower_bound(b->offset);
    if (next != live.end() && next->first < b->offset + b->bytes)
      return internal_error("live buffers overlap: " + describe(b) + " and " + describe(next->second));
    if (next != live.begin()) {
      const Buffer* prev = std::prev(next)->second;
      if (prev->offset + prev->bytes > b->offset) return internal_error("live buffers overlap: " + describe(prev) + " and " + describe(b));
    }
    live.emplace(b->offset, b);
  }
  return Status::ok();
}

std::vector<bool> fixed_values(const ExecutionPlan& p) {
  const ir::Graph& g = p.graph;
  const auto root = [&](int32_t id) {
    const int32_t r = p.values[static_cast<size_t>(id)].view_of;
    return static_cast<size_t>(r >= 0 ? r : id);
  };
  std::vector<bool> fixed(g.size(), false);
  for (size_t id = 0; id < g.size(); ++id) fixed[id] = ir::is_leaf(g.node(static_cast<int32_t>(id)).op);
  for (const ir::Node& n : g.nodes)
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (ir::writes_input(n.op, i)) fixed[root(n.inputs[i])] = false;
  for (size_t id = 0; id < g.size(); ++id) fixed[id] = fixed[root(static_cast<int32_t>(id))];
  return fixed;
}

}  // namespace volta::plan
