// `volta run FILE.vir`: bind inputs (files or seeded random) and params (seeded from their
// init), run through the Runtime, print each output's type and content hash.
#include <cctype>
#include <cerrno>
#include <map>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <fstream>

#include "cli/commands.h"
#include "cli/pipeline_flags.h"
#include "io/file.h"
#include "volta/text.h"

namespace volta::cli {

namespace {

struct RunFlags {
  std::string file;
  std::vector<std::string> inputs;  // NAME=FILE.bin | NAME=random
  uint64_t seed = 0;
  std::string output_dir;
  bool memory = false;
  int64_t repeat = 1;
  ProfileFlags profile;
  PipelineFlags pipeline;
};

// The plan run --repeat times: the first run's outputs; with more than one run also bench
// model's latency line (first run, then the steady state of the others). --profile traces the
// steady-state runs (the one run when there is one).
Result<std::pair<std::vector<Tensor>, std::string>> run_repeated(Runtime& rt, const plan::ExecutionPlan& plan, const Bindings& b,
                                                                 const RunFlags& f) {
  if (f.repeat < 1) return invalid_argument("--repeat must be at least 1, got " + std::to_string(f.repeat));
  Profiler profiler;
  std::pair<std::vector<Tensor>, std::string> out;
  if (f.repeat == 1) {
    if (f.profile.enabled()) rt.set_profiler(&profiler);
    auto r = rt.run(plan, b);
    rt.set_profiler(nullptr);
    VOLTA_ASSIGN_OR_RETURN(out.first, std::move(r));
  } else {
    VOLTA_ASSIGN_OR_RETURN(RunTimes t, time_runs(rt, plan, b, f.repeat - 1, 0, f.profile.enabled() ? &profiler : nullptr));
    out.first = std::move(t.outputs);
    out.second = "timing: " + format_run_times(t) + "\n";
  }
  VOLTA_RETURN_IF_ERROR(f.profile.finish(profiler));
  return out;
}

Result<Tensor> read_raw(const std::string& path, const std::string& name, const TensorType& type) {
  const auto wrong_size = [&](uint64_t have) {
    return invalid_argument("--input " + name + ": '" + path + "' has " + std::to_string(have) + " bytes but " + type.to_string() +
                            " needs " + std::to_string(type.bytes()) + " (raw little-endian)");
  };
  std::string bytes;
  VOLTA_RETURN_IF_ERROR(io::read_file_with(path, {uint64_t{1} << 40, "--input " + name}, [&](int fd, uint64_t size) -> Status {
    if (size != type.bytes()) return wrong_size(size);  // known before a byte is read (a 3 GB file for one float was read whole first)
    return io::read_all(fd, size, path, {}, &bytes);
  }));
  if (bytes.size() != type.bytes()) return wrong_size(bytes.size());  // a file that shrank while it was read
  Tensor t = Tensor::zeros(type.dtype, type.shape);
  if (!bytes.empty()) std::memcpy(t.raw(), bytes.data(), bytes.size());
  return t;
}

// The file of each output under --output DIR, checked before anything is written: two outputs
// never share a file (a returned value named twice is written once), and no output overwrites
// the model or an input file.
Result<std::vector<std::string>> output_paths(const std::string& dir, const std::vector<std::string>& names,
                                              const std::vector<std::string>& stems, const std::string& ext,
                                              const std::string& model, const std::vector<std::string>& input_specs) {
  std::vector<std::string> sources = {model};
  for (const std::string& spec : input_specs)
    if (auto eq = spec.find('='); eq != std::string::npos) sources.push_back(spec.substr(eq + 1));
  std::vector<std::string> paths;
  std::map<std::string, std::string> owner;  // path -> output name
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string path = (std::filesystem::path(dir) / (stems[i] + ext)).string();
    auto [it, fresh] = owner.emplace(path, names[i]);
    if (!fresh && it->second != names[i])
      return invalid_argument("--output: outputs '" + it->second + "' and '" + names[i] + "' would both be written to '" + path + "'");
    VOLTA_RETURN_IF_ERROR(io::check_output_path(path, "--output: output '" + names[i] + "'", sources));
    paths.push_back(path);
  }
  return paths;
}

Status write_raw(const std::string& path, const Tensor& t) {
  std::ofstream f(path, std::ios::binary);
  if (!f || !f.write(reinterpret_cast<const char*>(t.raw()), static_cast<std::streamsize>(t.bytes())) || !f.flush())
    return not_found("--output: cannot write '" + path + "': " + std::strerror(errno));
  return Status::ok();
}

std::string preview(const Tensor& value) {
  const Tensor t = is_half(value.dtype()) ? widen_to_f32(value) : value;  // bf16 / f16 shown as their values
  std::string s = "[";
  int64_t n = std::min<int64_t>(t.numel(), 4);
  for (int64_t i = 0; i < n; ++i) {
    char buf[32];
    if (t.dtype() == DType::f32) std::snprintf(buf, sizeof buf, "%.6g", static_cast<double>(t.data<float>()[i]));
    else if (t.dtype() == DType::f64) std::snprintf(buf, sizeof buf, "%.6g", t.data<double>()[i]);
    else if (t.dtype() == DType::i32) std::snprintf(buf, sizeof buf, "%d", t.data<int32_t>()[i]);
    else std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(t.data<int64_t>()[i]));
    s += (i ? ", " : "") + std::string(buf);
  }
  return s + (t.numel() > n ? ", ...]" : "]");
}

// Output file names keep [A-Za-z0-9._-]; anything else (e.g. the '/' of exported names) becomes '_'.
std::string file_stem(const std::string& name) {
  std::string out = name.empty() ? "output" : name;
  for (char& c : out)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '_';
  return out;
}

Status run_onnx(const RunFlags& flags, const GlobalFlags& global, DeviceKind device, const CompileOptions& opts) {
  VOLTA_ASSIGN_OR_RETURN(OnnxRun r, import_onnx(flags.file, flags.inputs, true));
  VOLTA_ASSIGN_OR_RETURN(Runtime rt, new_runtime(global, device, &r.model.graph));
  VOLTA_ASSIGN_OR_RETURN(auto plan, rt.compile(std::move(r.model.graph), opts));  // weights held once
  std::vector<std::string> names, stems, paths;
  for (const onnx::IoValue& io : r.model.outputs) names.push_back(io.name), stems.push_back(file_stem(io.name));
  if (!flags.output_dir.empty()) {
    VOLTA_ASSIGN_OR_RETURN(paths, output_paths(flags.output_dir, names, stems, r.npy ? ".npy" : ".pb", flags.file, flags.inputs));
  }
  if (!flags.output_dir.empty()) {  // before the run: a --profile may go into it
    std::error_code ec;
    std::filesystem::create_directories(flags.output_dir, ec);
    if (ec) return not_found("--output: cannot create '" + flags.output_dir + "': " + ec.message());
  }
  VOLTA_ASSIGN_OR_RETURN(auto ran, run_repeated(rt, *plan, r.bindings, flags));
  const std::vector<Tensor>& outputs = ran.first;
  std::printf("graph %s (ONNX opset %lld) on %s: %zu steps\n", plan->graph.name.c_str(), static_cast<long long>(r.model.opset),
              plan->backend.c_str(), plan->schedule.size());
  size_t next = 0;  // a sequence output is one run output per element
  for (size_t i = 0; i < r.model.outputs.size(); ++i) {
    const onnx::IoValue& io = r.model.outputs[i];
    VOLTA_ASSIGN_OR_RETURN(onnx::ValueFile v, onnx::output_value(io, outputs, &next));
    const std::string type = onnx::elem_type_name(static_cast<int32_t>(io.onnx_type));
    if (io.absent) std::printf("  %-20s %s\n", io.name.c_str(), "optional, holds nothing");
    if (io.sequence && !io.absent)
      std::printf("  %-20s %ssequence of %zu %s\n", io.name.c_str(), io.optional ? "optional " : "", v.tensors.size(), type.c_str());
    for (size_t e = 0; e < v.tensors.size(); ++e) {
      const Tensor& t = v.tensors[e].tensor;
      const std::string label = io.sequence ? "  [" + std::to_string(e) + "]" : io.name;
      std::printf("  %-20s %-18s fnv1a64 %s  %s\n", label.c_str(), (type + shape_to_string(t.shape())).c_str(),
                  hash_to_hex(fnv1a64(t.raw(), t.bytes())).c_str(), preview(t).c_str());
    }
    if (flags.output_dir.empty()) continue;
    VOLTA_RETURN_IF_ERROR(onnx::write_value_file(paths[i], v, io.name));
  }
  std::printf("%s", ran.second.c_str());
  if (flags.memory) std::printf("\n%s", plan::format_memory_report(plan->memory).c_str());
  return Status::ok();
}

}  // namespace

bool is_onnx_file(const std::string& path) { return std::filesystem::path(path).extension() == ".onnx"; }

Result<std::pair<std::string, Shape>> parse_shape_spec(const std::string& spec) {
  const size_t eq = spec.find('=');
  const auto bad = [&] { return invalid_argument("--shape: expected NAME=DIMS such as input_ids=1x128, got '" + spec + "'"); };
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) return bad();
  Shape shape;
  size_t pos = eq + 1;
  while (pos <= spec.size()) {
    const size_t x = std::min(spec.find('x', pos), spec.size());
    const std::string dim = spec.substr(pos, x - pos);
    if (dim.empty() || dim.size() > 12 || dim.find_first_not_of("0123456789") != std::string::npos) return bad();
    shape.push_back(std::stoll(dim));
    pos = x + 1;
  }
  return std::make_pair(spec.substr(0, eq), shape);
}

Result<OnnxRun> import_onnx(const std::string& file, const std::vector<std::string>& input_specs, bool require_all,
                            const std::vector<std::string>& shape_specs) {
  OnnxRun r;
  onnx::ImportOptions opts;
  for (const std::string& spec : shape_specs) {
    VOLTA_ASSIGN_OR_RETURN(auto named, parse_shape_spec(spec));
    opts.input_shapes[named.first] = named.second;
  }
  std::map<std::string, onnx::ValueFile> files;
  bool structured = false;  // a sequence or optional file, whose kind the model's declaration settles
  for (const std::string& spec : input_specs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      return invalid_argument("--input: expected NAME=FILE.pb or NAME=FILE.npy, got '" + spec + "'");
    const std::string name = spec.substr(0, eq), path = spec.substr(eq + 1);
    if (files.count(name)) return invalid_argument("--input " + name + " is given twice");  // (the last one won)
    auto v = onnx::read_value_file(path);
    if (!v.is_ok()) return Status(v.status().code(), "--input " + name + ": " + v.status().message());
    r.npy = r.npy || std::filesystem::path(path).extension() == ".npy";
    structured = structured || !v->proto.empty();
    files[name] = std::move(*v);
  }
  if (structured) {  // rare: read the declarations first
    VOLTA_ASSIGN_OR_RETURN(std::string bytes, io::read_file(file, {uint64_t{2} << 30, file}));
    VOLTA_ASSIGN_OR_RETURN(onnx::ModelInfo info, onnx::read_model_info(bytes, file));
    for (size_t i = 0; i < info.inputs.size(); ++i)
      if (auto it = files.find(info.inputs[i]); it != files.end())
        VOLTA_RETURN_IF_ERROR(onnx::as_declared(&it->second, info.input_sequence[i], info.input_optional[i], "--input " + it->first));
  }
  for (const auto& [name, v] : files) onnx::give_input(opts, name, v);
  VOLTA_ASSIGN_OR_RETURN(r.model, onnx::load_model(file, opts));
  r.bindings = r.model.params;
  std::set<std::string> known;
  for (const onnx::IoValue& io : r.model.inputs) {
    known.insert(io.name);
    if (io.node < 0 && !io.sequence && !io.absent) continue;  // folded into constants at import
    auto it = files.find(io.name);
    if (it == files.end()) {
      if (!require_all) continue;
      return invalid_argument("input '" + io.name + "' (" + (io.sequence ? "a sequence of " : "") +
                              onnx::elem_type_name(static_cast<int32_t>(io.onnx_type)) + shape_to_string(io.type.shape) +
                              ") is not bound: pass --input " + io.name + "=FILE.pb or .npy");
    }
    VOLTA_RETURN_IF_ERROR(onnx::bind_input(it->second, io, r.model.graph, "--input " + io.name, &r.bindings));
  }
  for (const auto& [name, t] : files)
    if (!known.count(name)) return invalid_argument("--input: model '" + file + "' has no input named '" + name + "'");
  for (const auto& [name, shape] : opts.input_shapes)
    if (!known.count(name)) return invalid_argument("--shape: model '" + file + "' has no input named '" + name + "'");
  return r;
}

Action add_run(CLI::App& app, GlobalFlags& global) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* cmd = app.add_subcommand("run", "Run a model through the full pipeline and print its outputs");
  cmd->add_option("file", flags->file, "Model in the IR text format (.vir) or an ONNX model (.onnx)")->required();
  cmd->add_option("--input", flags->inputs,
                  "Bind an input or param: NAME=FILE.bin (raw little-endian) or NAME=random (seeded); for .onnx "
                  "models NAME=FILE.pb (ONNX TensorProto) or NAME=FILE.npy");
  cmd->add_option("--seed", flags->seed, "Seed for params and random inputs")->capture_default_str();
  cmd->add_option("--output", flags->output_dir,
                  "Write each output to DIR/NAME.bin (.onnx models: DIR/NAME.pb, or NAME.npy when the inputs were .npy)");
  cmd->add_flag("--memory", flags->memory, "Also print the memory report");
  cmd->add_option("--repeat", flags->repeat,
                  "Run N times: outputs of the first run, then the first-run and steady-state latency (as bench model)")
      ->capture_default_str();
  flags->profile.add_to(*cmd);
  flags->pipeline.add_to(*cmd);
  return [flags, &global]() -> Status {
    std::vector<std::string> reads = {flags->file};
    for (const std::string& spec : flags->inputs)
      if (auto eq = spec.find('='); eq != std::string::npos) reads.push_back(spec.substr(eq + 1));
    VOLTA_RETURN_IF_ERROR(flags->profile.check(reads, flags->output_dir));  // (run makes --output DIR)
    VOLTA_ASSIGN_OR_RETURN(CompileOptions opts, flags->pipeline.to_options());
    VOLTA_ASSIGN_OR_RETURN(DeviceKind device, device_from_flag_or_env(global.device));
    if (is_onnx_file(flags->file)) return run_onnx(*flags, global, device, opts);
    VOLTA_ASSIGN_OR_RETURN(ir::Graph g, ir::load_graph(flags->file));
    VOLTA_ASSIGN_OR_RETURN(Runtime rt, new_runtime(global, device, &g));
    VOLTA_ASSIGN_OR_RETURN(auto plan, rt.compile(g, opts));

    VOLTA_ASSIGN_OR_RETURN(Bindings bindings, init_params(g, flags->seed));
    VOLTA_ASSIGN_OR_RETURN(Bindings random, random_inputs(g, flags->seed));
    std::set<std::string> bound_inputs;
    for (const std::string& spec : flags->inputs) {
      size_t eq = spec.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
        return invalid_argument("--input: expected NAME=FILE.bin or NAME=random, got '" + spec + "'");
      std::string name = spec.substr(0, eq), source = spec.substr(eq + 1);
      if (!bound_inputs.insert(name).second) return invalid_argument("--input " + name + " is given twice");  // (the last one won)
      int32_t id = g.find(name);
      if (id < 0 || (g.node(id).op != ir::Op::Input && g.node(id).op != ir::Op::Param))
        return invalid_argument("--input: graph '" + g.name + "' has no input or param named '" + name + "'");
      if (source == "random") {
        if (g.node(id).op == ir::Op::Input) bindings[name] = random.at(name);
      } else {
        VOLTA_ASSIGN_OR_RETURN(bindings[name], read_raw(source, name, g.node(id).type));
      }
    }
    for (const ir::Node& n : g.nodes)
      if (n.op == ir::Op::Input && !bound_inputs.count(n.name))
        return invalid_argument("input '" + n.name + "' (" + n.type.to_string() + ") is not bound: pass --input " + n.name +
                                "=FILE.bin or --input " + n.name + "=random");

    // Outputs by the names the graph declares: a pass may merge two returned values into one
    // node of the plan (CSE), so the plan's node names are not the outputs' names.
    std::vector<std::string> names;
    for (int32_t o : g.outputs) names.push_back(g.node(o).name);
    std::vector<std::string> paths;
    if (!flags->output_dir.empty()) {
      VOLTA_ASSIGN_OR_RETURN(paths, output_paths(flags->output_dir, names, names, ".bin", flags->file, flags->inputs));
    }
    if (!flags->output_dir.empty()) {  // before the run: a --profile may go into it
      std::error_code ec;
      std::filesystem::create_directories(flags->output_dir, ec);
      if (ec) return not_found("--output: cannot create '" + flags->output_dir + "': " + ec.message());
    }
    VOLTA_ASSIGN_OR_RETURN(auto ran, run_repeated(rt, *plan, bindings, *flags));
    const std::vector<Tensor>& outputs = ran.first;
    std::printf("graph %s on %s: %zu steps\n", plan->graph.name.c_str(), plan->backend.c_str(), plan->schedule.size());
    for (size_t i = 0; i < outputs.size(); ++i) {
      const std::string& name = names[i];
      const Tensor& t = outputs[i];
      std::printf("  %-20s %-18s fnv1a64 %s  %s\n", ("%" + name).c_str(), t.type().to_string().c_str(),
                  hash_to_hex(fnv1a64(t.raw(), t.bytes())).c_str(), preview(t).c_str());
      if (!flags->output_dir.empty()) VOLTA_RETURN_IF_ERROR(write_raw(paths[i], t));
    }
    std::printf("%s", ran.second.c_str());
    if (flags->memory) std::printf("\n%s", plan::format_memory_report(plan->memory).c_str());
    return Status::ok();
  };
}

}  // namespace volta::cli
