// Built when the CUDA toolkit was not found: the backend slot exists and says why it is empty.
#include "volta/backend.h"

namespace volta {

Result<std::unique_ptr<Backend>> make_cuda_backend() {
  return unavailable(
      "--device cuda: this Volta build has no CUDA backend (the CUDA toolkit was not found when it was built)");
}

}  // namespace volta
