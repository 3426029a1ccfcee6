// Included by each *_vec.cpp after every other header but vec.h and vec_math.h: turns on the
// ISA of this build of the file (VOLTA_VEC_LEVEL 4: x86-64-v4, 3: x86-64-v3, 0: baseline; see
// vec_kernels.h) for the rest of it, and names its namespace (VOLTA_VEC_NS). Headers read before
// this point keep the baseline ISA, so a library template the kernels instantiate is baseline
// code wherever it is not inlined, whichever build's copy the linker keeps.
#pragma once

#ifndef VOLTA_VEC_LEVEL
#define VOLTA_VEC_LEVEL 0
#endif

#if VOLTA_VEC_LEVEL == 4
#define VOLTA_VEC_NS v4
#pragma GCC target("arch=x86-64-v4")
#elif VOLTA_VEC_LEVEL == 3
#define VOLTA_VEC_NS v3
#pragma GCC target("arch=x86-64-v3")
#else
#define VOLTA_VEC_NS base
#endif
