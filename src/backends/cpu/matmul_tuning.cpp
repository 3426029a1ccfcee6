// Which matmul kernels and blocking this CPU runs: the ISA (the best it has, or a test's
// override), the default blocking, and the tuning cache: blocking parameters measured by `volta
// tune matmul`, per shape class, in a JSON file per CPU signature; the kernel loads it once,
// lazily, and falls back to the defaults for shapes it lacks. Tuned parameters change speed
// only: the matmul's bits do not depend on blocking.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backends/cpu/matmul.h"
#include "io/file.h"
#include "volta/checkpoint.h"  // write_file_atomic

namespace volta::cpu {

namespace {

constexpr const char* kFormat = "volta-matmul-tuning";
constexpr int kFormatVersion = 1;
constexpr int64_t kMaxBlock = 1 << 16;  // larger values in a file are not ours

int64_t bucket(int64_t x) { return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(std::max<int64_t>(x, 1)))); }

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) break;
      std::string name = line.substr(colon + 1);
      name.erase(0, name.find_first_not_of(" \t"));
      name.erase(name.find_last_not_of(" \t") + 1);
      if (!name.empty()) return name;
    }
  return "unknown-cpu";
}

nlohmann::json signature_json(const CpuSignature& s) { return {{"cpu", s.cpu}, {"isa", s.isa}, {"volta", s.version}}; }

Result<std::vector<TunedEntry>> parse_tuning(const std::string& text, const CpuSignature& sig) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return parse_error("not a JSON object");
  try {  // type errors in a hand-edited file surface as json exceptions; they stay in here
    if (j.value("format", "") != kFormat || j.value("version", 0) != kFormatVersion)
      return parse_error(std::string("not a ") + kFormat + " v" + std::to_string(kFormatVersion) + " file");
    if (j.at("signature") != signature_json(sig)) return invalid_argument("signature " + j.at("signature").dump() + " is not this CPU's");
    std::vector<TunedEntry> entries;
    for (const nlohmann::json& e : j.at("entries")) {
      TunedEntry t;
      t.shape_class = e.at("class").get<std::string>();
      t.m = e.at("m").get<int64_t>();
      t.n = e.at("n").get<int64_t>();
      t.k = e.at("k").get<int64_t>();
      t.blocking = {e.at("kc").get<int64_t>(), e.at("mc").get<int64_t>(), e.at("nc").get<int64_t>()};
      t.gflops = e.value("gflops", 0.0);
      t.default_gflops = e.value("default_gflops", 0.0);
      for (int64_t v : {t.blocking.kc, t.blocking.mc, t.blocking.nc})
        if (v < 1 || v > kMaxBlock) return parse_error("blocking value " + std::to_string(v) + " out of range");
      entries.push_back(std::move(t));
    }
    return entries;
  } catch (const nlohmann::json::exception& e) {
    return parse_error(std::string("malformed entry: ") + e.what());
  }
}

// The in-memory cache: shape class -> blocking, loaded from the file on first use.
struct Cache {
  std::mutex mu;
  bool loaded = false;
  std::map<std::string, MatmulBlocking> by_class;

  void fill(const std::vector<TunedEntry>& entries) {
    by_class.clear();
    for (const TunedEntry& e : entries) by_class[e.shape_class] = e.blocking;
    loaded = true;
  }
  // Caller holds mu. A missing, unreadable, corrupt or foreign file leaves the cache empty.
  void load() {
    const CpuSignature sig = current_cpu_signature();
    Result<std::string> path = matmul_tuning_path(sig);
    Result<std::vector<TunedEntry>> entries = path ? read_matmul_tuning(*path, sig) : Result<std::vector<TunedEntry>>(path.status());
    fill(entries ? *entries : std::vector<TunedEntry>{});
  }
};

Cache& cache() {
  static Cache c;
  return c;
}

}  // namespace

std::string matmul_shape_class(int64_t M, int64_t N, int64_t K) {
  return "m" + std::to_string(bucket(M)) + "_n" + std::to_string(bucket(N)) + "_k" + std::to_string(bucket(K));
}

std::string CpuSignature::file_stem() const {
  std::string stem = cpu + "_" + isa + "_v" + version;
  for (char& c : stem)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') c = '-';
  return stem;
}

CpuSignature current_cpu_signature() {
  static const CpuSignature sig{cpu_model_name(), std::string(matmul_isa_name(matmul_best_isa())), VOLTA_VERSION};
  return sig;
}

Result<std::string> volta_cache_dir() {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  if (std::string d = env("VOLTA_CACHE_DIR"); !d.empty()) return d;
  if (std::string d = env("XDG_CACHE_HOME"); !d.empty()) return d + "/volta";
  if (std::string d = env("HOME"); !d.empty()) return d + "/.cache/volta";
  return not_found("no cache directory: set VOLTA_CACHE_DIR, XDG_CACHE_HOME or HOME");
}

Result<std::string> matmul_tuning_path(const CpuSignature& sig) {
  VOLTA_ASSIGN_OR_RETURN(const std::string dir, volta_cache_dir());
  return dir + "/matmul/" + sig.file_stem() + ".json";
}

Result<std::vector<TunedEntry>> read_matmul_tuning(const std::string& path, const CpuSignature& sig) {
  auto text = io::read_file(path, {uint64_t{16} << 20, ""});
  if (!text.is_ok()) return not_found("cannot read " + path + ": " + text.status().message());
  Result<std::vector<TunedEntry>> entries = parse_tuning(*text, sig);
  if (!entries) return Status(entries.status().code(), path + ": " + entries.status().message());
  return entries;
}

Status write_matmul_tuning(const std::string& path, const CpuSignature& sig, std::vector<TunedEntry> entries) {
  std::sort(entries.begin(), entries.end(), [](const TunedEntry& a, const TunedEntry& b) { return a.shape_class < b.shape_class; });
  nlohmann::ordered_json list = nlohmann::ordered_json::array();
  for (const TunedEntry& e : entries)
    list.push_back({{"class", e.shape_class}, {"m", e.m}, {"n", e.n}, {"k", e.k}, {"kc", e.blocking.kc}, {"mc", e.blocking.mc},
                    {"nc", e.blocking.nc}, {"gflops", e.gflops}, {"default_gflops", e.default_gflops}});
  const nlohmann::ordered_json j = {{"format", kFormat},
                                    {"version", kFormatVersion},
                                    {"signature", {{"cpu", sig.cpu}, {"isa", sig.isa}, {"volta", sig.version}}},
                                    {"entries", list}};
  VOLTA_RETURN_IF_ERROR(make_tuning_dir(path));
  // A temporary file of this process renamed over the old one: readers never see half a file,
  // and two tunes at once never rename each other's temporary (one fixed name did).
  return io::write_file_atomic(path, j.dump(2) + "\n");
}

Status make_tuning_dir(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::filesystem::create_directories(dir, ec);
  if (ec) return unavailable("cannot create " + dir.string() + ": " + ec.message());
  if (::access(dir.c_str(), W_OK) != 0) return unavailable("cannot write into " + dir.string() + ": " + std::strerror(errno));
  return Status::ok();
}

std::optional<MatmulBlocking> tuned_blocking(int64_t M, int64_t N, int64_t K) {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  if (!c.loaded) c.load();
  if (c.by_class.empty()) return std::nullopt;
  auto it = c.by_class.find(matmul_shape_class(M, N, K));
  if (it == c.by_class.end()) return std::nullopt;
  return it->second;
}

void set_tuned_entries(const std::vector<TunedEntry>& entries) {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  c.fill(entries);
}

void reload_matmul_tuning() {
  Cache& c = cache();
  std::lock_guard lock(c.mu);
  c.loaded = false;
  c.by_class.clear();
}

// ---- ISA and blocking ------------------------------------------------------------------------------

MatmulIsa matmul_best_isa() {
  static const MatmulIsa best = matmul_isa_supported(MatmulIsa::kAvx512) ? MatmulIsa::kAvx512
                                : matmul_isa_supported(MatmulIsa::kAvx2) ? MatmulIsa::kAvx2
                                                                         : MatmulIsa::kScalar;
  return best;
}

namespace {
std::atomic<int> g_isa_override{-1};  // -1: none
}  // namespace

MatmulIsa matmul_active_isa() {
  const int o = g_isa_override.load(std::memory_order_relaxed);
  return o < 0 ? matmul_best_isa() : static_cast<MatmulIsa>(o);
}

void set_matmul_isa_override(std::optional<MatmulIsa> isa) {
  g_isa_override = isa && matmul_isa_supported(*isa) ? static_cast<int>(*isa) : -1;
}

MatmulBlocking matmul_default_blocking(MatmulIsa isa) {
  // kc x (tile cols) of packed B stays in L1 while the tile rows of packed A stream past it;
  // the mc x kc block of A and the kc x nc block of B fit in L2 together.
  switch (isa) {
    case MatmulIsa::kAvx512: return {.kc = 192, .mc = 144, .nc = 512};
    case MatmulIsa::kAvx2: return {.kc = 256, .mc = 96, .nc = 512};
    case MatmulIsa::kScalar: break;
  }
  return {.kc = 256, .mc = 64, .nc = 256};
}

int64_t cpu_l2_bytes() {
  static const int64_t bytes = [] {
    long v = 0;
#ifdef _SC_LEVEL2_CACHE_SIZE
    v = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    return v > 0 ? std::clamp<int64_t>(v, int64_t{128} << 10, int64_t{64} << 20) : int64_t{1} << 20;
  }();
  return bytes;
}

int64_t matmul_row_block(int64_t mc, int64_t rows, int64_t tile_rows) {
  // AVX2's 96-row blocks and a 128-row weight gradient: 7% faster at 1 thread as one block.
  const int64_t block = round_up(std::max<int64_t>(mc, 1), tile_rows), all = round_up(std::max<int64_t>(rows, 1), tile_rows);
  return all <= block + block / 2 ? all : block;
}

MatmulBlocking matmul_blocking_for(MatmulIsa isa, int64_t M, int64_t N, int64_t K) {
  if (auto tuned = tuned_blocking(M, N, K)) return *tuned;
  return matmul_default_blocking(isa);
}

}  // namespace volta::cpu
