// speculate_step_update: CUDA implementation (rule in speculate_step_update.h). No Paddle include.
// Design: docs/design/step_ops.md.
#include "speculate_step_update/speculate_step_update.h"

#include "speculate_common/warp_per_slot.cuh"

namespace fdspec {
namespace {

__device__ void update_slot(const SpeculateStepUpdateParams& p, int lane, int64_t b) {
  const StepUpdateSlot u = step_update_slot(p, b);
  int64_t* row = p.token_ids_all + b * p.token_ids_stride + u.row;
  for (int64_t i = lane; i < u.n; i += kSlotWarp) row[i] = p.accept_tokens[b * p.width + i];
  // Every lane has read the slot's scalars before lane 0 overwrites them.
  __syncwarp();
  if (lane == 0) step_update_write_scalars(p, b, u);
}

}  // namespace

cudaError_t speculate_step_update_gpu(const SpeculateStepUpdateParams& p, cudaStream_t stream) {
  return launch_warp_per_slot<SpeculateStepUpdateParams, update_slot>(p, stream);
}

}  // namespace fdspec
