// Runs the `volta` binary for the CLI tests (test_cli*.cpp): its exit code, stdout and stderr,
// and the check every bad input must pass.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "test_util.h"

namespace volta {

struct Cli {
  int code;
  std::string out, err;
};

inline Cli volta(const std::string& args) {
  Cli r;
  r.code = test::run_command("cd " + std::string(VOLTA_SOURCE_DIR) + " && env -u VOLTA_DEVICE " + VOLTA_CLI_PATH + " " +
                                 args,
                             &r.out, &r.err);
  return r;
}

struct BadCase {
  std::string args;
  int code;
  std::string needle;
};

// Each bad input: the expected exit code, its message on stderr, exactly one line of stderr and,
// for failed jobs (code 1), nothing on stdout.
inline void expect_bad_cases(const std::vector<BadCase>& cases) {
  for (const BadCase& c : cases) {
    Cli r = volta(c.args);
    EXPECT_EQ(r.code, c.code) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.needle), std::string::npos) << c.args << "\nstderr: " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << c.args << "\n" << r.err;
    if (c.code == 1) {
      EXPECT_TRUE(r.out.empty()) << c.args << "\n" << r.out;
    }
  }
}

}  // namespace volta
