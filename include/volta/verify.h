// verify_graph runs before anything else touches a graph (and after every pass in tests).
#pragma once

#include "volta/ir.h"

namespace volta::ir {

// Rejects: ids that do not match positions, empty or duplicate names, references to
// undefined values, cycles, wrong arity, attributes the op does not know, constants whose
// payload does not match their type, leaves with negative dims, types that differ from what
// the op's rule infers, and graphs without outputs. Every error names the node.
Status verify_graph(const Graph& g);

}  // namespace volta::ir
