// `volta inspect FILE.vir`: the verified graph after the pipeline, its schedule and memory plan.
#include <cstdio>

#include "cli/commands.h"
#include "cli/pipeline_flags.h"
#include "volta/text.h"

namespace volta::cli {

namespace {
struct InspectFlags {
  std::string file;
  bool json = false;
  PipelineFlags pipeline;
};
}  // namespace

Action add_inspect(CLI::App& app, const GlobalFlags& global) {
  auto flags = std::make_shared<InspectFlags>();
  CLI::App* cmd = app.add_subcommand("inspect", "Print a model's verified graph, schedule and memory plan");
  cmd->add_option("file", flags->file, "Model in the IR text format (.vir)")->required();
  cmd->add_flag("--json", flags->json, "Print one JSON object (with peak_bytes and naive_bytes)");
  flags->pipeline.add_to(*cmd);
  return [flags, &global]() -> Status {
    VOLTA_ASSIGN_OR_RETURN(CompileOptions opts, flags->pipeline.to_options());
    VOLTA_ASSIGN_OR_RETURN(DeviceKind device, device_from_flag_or_env(global.device));
    VOLTA_ASSIGN_OR_RETURN(ir::Graph g, ir::load_graph(flags->file));
    VOLTA_ASSIGN_OR_RETURN(Runtime rt, Runtime::create(device, &g));
    VOLTA_ASSIGN_OR_RETURN(auto plan, rt.compile(g, opts));
    if (flags->json) {
      std::printf("%s\n", plan::plan_to_json(*plan).c_str());
      return Status::ok();
    }
    std::printf("graph %s: %zu nodes in, %zu after passes [%s], hash %s\n\n", g.name.c_str(), g.size(),
                plan->graph.size(), passes::pipeline_signature(opts.pipeline).c_str(), hash_to_hex(plan->graph_hash).c_str());
    std::printf("%s\n%s", ir::print_graph(plan->graph).c_str(), plan::format_plan(*plan).c_str());
    return Status::ok();
  };
}

}  // namespace volta::cli
