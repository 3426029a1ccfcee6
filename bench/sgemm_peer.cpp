// sgemm_peer.cpp: fp32 GEMM GFLOP/s of a peer library on the shape suite of `volta bench matmul`
// (src/cli/cmd_bench.cpp), timed the same way, so rows pair up by (m, n, k).
//
// One source, two programs (bench/compare.sh builds both):
//   g++ -O2 -std=c++20 sgemm_peer.cpp -lopenblas                     -> OpenBLAS cblas_sgemm
//   g++ -O2 -std=c++20 -DPEER_ONEDNN sgemm_peer.cpp -ldnnl -fopenmp  -> oneDNN dnnl_sgemm
// Usage: sgemm_peer [--threads T] [--runs R] [--warmup W] [--group all|square|tiny-gpt|decode|big-gpt]
// Output: one JSON object per line with volta's keys: bench, group, m, n, k, form, threads, gflops
// (median of the timed samples), gflops_best, backend.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#ifdef PEER_ONEDNN
#include <dnnl.h>
#include <omp.h>
#else
#include <cblas.h>
#endif

namespace {

struct Shape {
  const char* group;
  int64_t m, n, k;
  const char* form = "nn";  // "tn": C = Aᵀ B with A stored [k, m]; "nt": C = A Bᵀ with B stored [n, k]
};

// Must match gemm_suite() in src/cli/cmd_bench.cpp.
const Shape kSuite[] = {
    {"square", 64, 64, 64},        {"square", 128, 128, 128},     {"square", 256, 256, 256},
    {"square", 512, 512, 512},     {"square", 1024, 1024, 1024},  {"square", 2048, 2048, 2048},
    {"tiny-gpt", 768, 384, 128},   {"tiny-gpt", 768, 512, 128},   {"tiny-gpt", 768, 128, 512},
    {"tiny-gpt", 768, 65, 128},    {"decode", 1, 384, 128},       {"decode", 1, 512, 128},
    {"decode", 1, 128, 512},       {"decode", 1, 65, 128},        {"big-gpt", 16384, 1152, 384},
    {"big-gpt", 16384, 1536, 384}, {"big-gpt", 16384, 384, 1536}, {"big-gpt", 16384, 65, 384},
    {"train-bwd", 128, 384, 768, "tn"}, {"train-bwd", 128, 128, 768, "tn"}, {"train-bwd", 128, 512, 768, "tn"},
    {"train-bwd", 512, 128, 768, "tn"}, {"train-bwd", 65, 128, 768, "tn"},  {"train-bwd", 768, 128, 384, "nt"},
    {"train-bwd", 768, 128, 128, "nt"}, {"train-bwd", 768, 128, 512, "nt"}, {"train-bwd", 768, 512, 128, "nt"},
    {"train-bwd", 768, 65, 128, "nt"},  {"train-bwd", 768, 128, 65}};

#ifdef PEER_ONEDNN
const char* kBackend = "onednn";
void set_threads(int t) { omp_set_num_threads(t); }
// C[m,n] = op(A) * op(B), all row-major (dnnl_sgemm's convention); A stored [k, m] when
// transposed, B [n, k].
bool sgemm(const Shape& s, const float* a, const float* b, float* c) {
  const bool ta = s.form[0] == 't', tb = s.form[1] == 't';
  return dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', s.m, s.n, s.k, 1.0f, a, ta ? s.m : s.k, b, tb ? s.k : s.n, 0.0f, c,
                    s.n) == dnnl_success;
}
#else
const char* kBackend = "openblas";
void set_threads(int t) { openblas_set_num_threads(t); }
bool sgemm(const Shape& s, const float* a, const float* b, float* c) {
  const bool ta = s.form[0] == 't', tb = s.form[1] == 't';
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(s.m),
              static_cast<int>(s.n), static_cast<int>(s.k), 1.0f, a, static_cast<int>(ta ? s.m : s.k), b,
              static_cast<int>(tb ? s.k : s.n), 0.0f, c, static_cast<int>(s.n));
  return true;
}
#endif

// Deterministic values in [-1, 1); the timing does not depend on them (no denormals).
void fill(std::vector<float>& v, uint32_t seed) {
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / static_cast<float>(1u << 23) - 1.0f;
  }
}

int64_t int_arg(const char* flag, const char* value) {
  char* end = nullptr;
  const long long v = value ? std::strtoll(value, &end, 10) : -1;
  if (!value || *end != '\0' || v < 0) {
    std::fprintf(stderr, "sgemm_peer: %s needs a non-negative integer\n", flag);
    std::exit(2);
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t threads = 1, runs = 5, warmup = 2;
  std::string group = "all";
  for (int i = 1; i < argc; ++i) {
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (!std::strcmp(argv[i], "--threads")) threads = int_arg(argv[i], value);
    else if (!std::strcmp(argv[i], "--runs")) runs = int_arg(argv[i], value);
    else if (!std::strcmp(argv[i], "--warmup")) warmup = int_arg(argv[i], value);
    else if (!std::strcmp(argv[i], "--group") && value) group = value;
    else {
      std::fprintf(stderr, "usage: %s [--threads T] [--runs R] [--warmup W] [--group G]\n", argv[0]);
      return 2;
    }
    ++i;
  }
  if (threads < 1 || runs < 1) {
    std::fprintf(stderr, "sgemm_peer: --threads and --runs must be >= 1\n");
    return 2;
  }
  set_threads(static_cast<int>(threads));

  using Clock = std::chrono::steady_clock;
  for (const Shape& s : kSuite) {
    if (group != "all" && group != s.group) continue;
    std::vector<float> a(s.m * s.k), b(s.k * s.n), c(s.m * s.n);
    fill(a, 1);
    fill(b, 2);
    const double flop = 2.0 * static_cast<double>(s.m * s.n * s.k);
    // Same sampling as volta: repetitions for ~20 ms per sample, warm-up samples, median.
    const int64_t reps = std::clamp<int64_t>(static_cast<int64_t>(2e9 / flop), 1, 100000);
    std::vector<double> gflops;
    for (int64_t r = 0; r < warmup + runs; ++r) {
      const auto t0 = Clock::now();
      for (int64_t i = 0; i < reps; ++i) {
        if (!sgemm(s, a.data(), b.data(), c.data())) {
          std::fprintf(stderr, "sgemm_peer: %s sgemm failed on %lldx%lldx%lld\n", kBackend,
                       static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(s.k));
          return 1;
        }
      }
      const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
      if (r >= warmup) gflops.push_back(flop * static_cast<double>(reps) / dt / 1e9);
    }
    const double best = *std::max_element(gflops.begin(), gflops.end());
    std::sort(gflops.begin(), gflops.end());
    std::printf(
        "{\"bench\":\"matmul\",\"group\":\"%s\",\"m\":%lld,\"n\":%lld,\"k\":%lld,\"form\":\"%s\",\"threads\":%lld,"
        "\"gflops\":%.3f,\"gflops_best\":%.3f,\"backend\":\"%s\"}\n",
        s.group, static_cast<long long>(s.m), static_cast<long long>(s.n), static_cast<long long>(s.k), s.form,
        static_cast<long long>(threads), gflops[gflops.size() / 2], best, kBackend);
    std::fflush(stdout);
  }
  return 0;
}
