#include "test_util.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "volta/text.h"

namespace volta::test {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int run_command(const std::string& cmd, std::string* out, std::string* err) {
  // ctest runs tests as parallel processes: each command gets its own stderr file.
  static std::atomic<int> counter{0};
  std::string err_path = ::testing::TempDir() + "volta_stderr_" + std::to_string(getpid()) + "_" +
                         std::to_string(counter++) + ".txt";
  std::string full = cmd + " 2>" + err_path;
  FILE* p = popen(full.c_str(), "r");
  if (!p) return -1;
  std::string result;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) result.append(buf, n);
  int status = pclose(p);
  if (out) *out = result;
  if (err) *err = read_file(err_path);
  std::remove(err_path.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string source_path(const std::string& rel) { return std::string(VOLTA_SOURCE_DIR) + "/" + rel; }

ir::Graph parse_ir(const std::string& text) {
  auto g = ir::parse_graph(text, "test");
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return g.is_ok() ? *g : ir::Graph{};
}

ir::Graph load_example(const std::string& file) {
  auto g = ir::load_graph(source_path("examples/" + file));
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return g.is_ok() ? *g : ir::Graph{};
}

Result<Bindings> seeded_values(const ir::Graph& g, uint64_t seed) {
  VOLTA_ASSIGN_OR_RETURN(Bindings values, init_params(g, seed));
  VOLTA_ASSIGN_OR_RETURN(Bindings inputs, random_inputs(g, seed));
  values.merge(inputs);
  return values;
}

void for_each_cpu_config(const std::function<void(cpu::MatmulIsa isa, int threads)>& fn) {
  for (auto isa : {cpu::MatmulIsa::kScalar, cpu::MatmulIsa::kAvx2, cpu::MatmulIsa::kAvx512}) {
    if (!cpu::matmul_isa_supported(isa)) continue;
    cpu::set_matmul_isa_override(isa);
    for (int threads : {1, 2}) {
      set_cpu_threads(threads);
      fn(isa, threads);
    }
  }
  cpu::set_matmul_isa_override(std::nullopt);
  set_cpu_threads(0);
}

}  // namespace volta::test
