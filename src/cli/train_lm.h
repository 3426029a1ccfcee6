// `volta train --recipe shakespeare-char`: TinyLM on a text file, with evaluation, checkpoints,
// exact resume and a JSON-lines log.
#pragma once

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "train/lm.h"

namespace volta::cli {

struct LMTrainFlags {
  std::string data = "data/tinyshakespeare.txt";
  std::string out;
  std::string resume;
  bool overwrite = false;
  uint64_t seed = 0;
  bool bias = false;
  std::string arch = "gpt";
  std::string numerics = "off";
  train::LMRecipe recipe = train::shakespeare_char();
};

// `given(name)` says whether a flag was on the command line (recipe defaults apply otherwise).
Status train_lm(LMTrainFlags flags, const std::function<bool(const std::string&)>& given, const GlobalFlags& global,
                const ProfileFlags& profile);

}  // namespace volta::cli
