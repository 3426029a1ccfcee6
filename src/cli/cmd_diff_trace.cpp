// `volta diff-trace A B`: the first node, run and op whose output differs between two hash traces
// (--trace-hashes), with the largest difference when both kept their values (--trace-values).
// Prints what it found; identical traces exit 0, different ones 1.
#include <cstdio>

#include "cli/commands.h"
#include "volta/trace.h"

namespace volta::cli {

Action add_diff_trace(CLI::App& app, GlobalFlags&) {
  auto files = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand("diff-trace", "Name the first node whose output differs between two --trace-hashes files");
  cmd->add_option("traces", *files, "Two trace files (A B)")->required()->expected(2);
  return [files]() -> Status {
    VOLTA_ASSIGN_OR_RETURN(const TraceDiff d, diff_traces((*files)[0], (*files)[1]));
    if (d.same) {
      std::printf("traces identical: %lld records\n", static_cast<long long>(d.records));
      return Status::ok();
    }
    std::printf("first difference after %lld identical records: %s\n  %s\n", static_cast<long long>(d.records), d.where.c_str(),
                d.what.c_str());
    return invalid_argument("the traces differ at " + d.where);
  };
}

}  // namespace volta::cli
