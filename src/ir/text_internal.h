// Pieces the IR text printer (text_printer.cpp) and parser (text_parser.cpp) share.
#pragma once

#include <cstddef>
#include <cstdint>

#include "volta/ir.h"

namespace volta::ir::text {

constexpr int64_t kMaxDim = int64_t{1} << 40;    // each declared dim
constexpr int64_t kMaxNumel = int64_t{1} << 60;  // numel * 8 bytes still fits in int64
constexpr size_t kMaxRank = 64;

// numel with overflow and sanity checks; -1 when a dim is negative or the product is too big.
int64_t checked_numel(const Shape& shape);

}  // namespace volta::ir::text
