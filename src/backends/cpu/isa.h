// Target attributes for the kernels written per ISA with intrinsics (matmul_kernels.cpp,
// matmul_transpose.cpp); the run-time choice between them is matmul.h's MatmulIsa.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#include <immintrin.h>
#define VOLTA_MATMUL_X86 1
#define VOLTA_TARGET_AVX512 __attribute__((target("avx512f,avx2,fma")))
#define VOLTA_TARGET_AVX2 __attribute__((target("avx2,fma")))
#endif
