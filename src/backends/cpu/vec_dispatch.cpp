// The entry points of the vector kernels (vec_kernels.h): each forwards to the build of the
// kernel for the best ISA level this CPU has, chosen once (the one libgcc's x86-64-v4 / v3
// checks accept, which include the OS saving the wide registers).
#include "backends/cpu/vec_kernels.h"

namespace volta::cpu {

namespace {

struct Table {
  const char* isa;
#define VOLTA_VEC_SLOT(ret, name, params, args) ret(*name) params;
  VOLTA_VEC_KERNELS(VOLTA_VEC_SLOT)
#undef VOLTA_VEC_SLOT
};

#define VOLTA_VEC_ENTRY(ret, name, params, args) &NS::name,
#define NS base
constexpr Table kBase{"base", VOLTA_VEC_KERNELS(VOLTA_VEC_ENTRY)};
#undef NS
#if VOLTA_VEC_LEVELS
#define NS v3
constexpr Table kV3{"v3", VOLTA_VEC_KERNELS(VOLTA_VEC_ENTRY)};
#undef NS
#define NS v4
constexpr Table kV4{"v4", VOLTA_VEC_KERNELS(VOLTA_VEC_ENTRY)};
#undef NS
#endif
#undef VOLTA_VEC_ENTRY

const Table& pick() {
#if VOLTA_VEC_LEVELS
  if (__builtin_cpu_supports("x86-64-v4")) return kV4;
  if (__builtin_cpu_supports("x86-64-v3")) return kV3;
#endif
  return kBase;
}

const Table& table() {
  static const Table& t = pick();
  return t;
}

}  // namespace

#define VOLTA_VEC_FORWARD(ret, name, params, args) \
  ret name params { return table().name args; }
VOLTA_VEC_KERNELS(VOLTA_VEC_FORWARD)
#undef VOLTA_VEC_FORWARD

const char* vec_kernels_isa() { return table().isa; }

}  // namespace volta::cpu
