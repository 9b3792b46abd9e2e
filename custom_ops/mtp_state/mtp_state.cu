// FastDeploy's MTP bookkeeping ops: CUDA implementations (rules in mtp_state.h). No Paddle include.
//
// The ops are a few dependent trips to memory over B slots: their time is launch latency plus those
// trips. Each is one kernel launched as a programmatic dependent of the work before it
// (common/cuda_utils.cuh), loads a slot's scalars together and writes from registers. The two ops
// that reduce over the batch (not_need_stop; update's token index) use one block that walks the
// slots in chunks, so any B works with no second kernel and no scratch memory.
#include "mtp_state/mtp_state.h"

#include <algorithm>

#include "common/cuda_utils.cuh"

namespace fdspec {
namespace {

constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr int kScanThreads = 256;    // preprocess / update: one block, a thread per slot per chunk
constexpr int kSlotThreads = 128;    // postprocess / set_value_by_flags: a thread per slot
constexpr int kGatherThreads = 256;  // hidden-state gathers: a block per slot

int scan_threads(int64_t batch) {
  return static_cast<int>(std::min<int64_t>(
      kScanThreads, std::max<int64_t>(kWarp, (batch + kWarp - 1) / kWarp * kWarp)));
}

__global__ void __launch_bounds__(kScanThreads) mtp_preprocess_kernel(MtpPreprocessParams p) {
  wait_for_primary_grid();
  allow_dependent_launch();
  bool any = false;
  for (int64_t base = 0; base < p.batch; base += blockDim.x) {
    const int64_t b = base + threadIdx.x;
    bool runs = false;
    if (b < p.batch) {
      const MtpPreprocessSlot s = mtp_preprocess_load(p, b);
      int64_t* target = p.target_model_draft_tokens + b * p.target_draft_stride;
      for (int64_t i = 1; i < p.target_draft_stride; ++i) target[i] = -1;
      mtp_preprocess_store(p, b, s);
      runs = s.runs;
    }
    any = __syncthreads_or(runs) || any;
  }
  if (threadIdx.x == 0) p.not_need_stop[0] = any;
}

// Exclusive prefix sum of `v` over the block (blockDim.x a multiple of 32, <= kScanThreads), and
// the block's total in *total. Two barriers.
__device__ __forceinline__ int block_exclusive_scan(int v, int* total) {
  __shared__ int warp_sums[kScanThreads / kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  int inc = v;
#pragma unroll
  for (int d = 1; d < kWarp; d <<= 1) {
    const int n = __shfl_up_sync(kFullMask, inc, d);
    if (lane >= d) inc += n;
  }
  if (lane == kWarp - 1) warp_sums[warp] = inc;
  __syncthreads();
  int before = 0, all = 0;
  for (int w = 0; w < warps; ++w) {
    const int s = warp_sums[w];
    before += w < warp ? s : 0;
    all += s;
  }
  __syncthreads();  // warp_sums is reused by the next chunk
  *total = all;
  return before + inc - v;
}

__global__ void __launch_bounds__(kScanThreads) mtp_update_kernel(MtpUpdateParams p) {
  wait_for_primary_grid();
  allow_dependent_launch();
  int64_t rank_base = 0, stopped = 0;
  for (int64_t base = 0; base < p.batch; base += blockDim.x) {
    const int64_t b = base + threadIdx.x;
    MtpUpdateSlot s;
    if (b < p.batch) s = mtp_update_load(p, b);
    const bool active = b < p.batch && s.len > 0;
    int chunk_active = 0;
    const int64_t rank = rank_base + block_exclusive_scan(active ? 1 : 0, &chunk_active);
    rank_base += chunk_active;
    if (active) {
      const int64_t token = rank < p.next_tokens_len ? p.inter_next_tokens[rank] : -1;
      mtp_update_store(p, b, s, token);
    }
    stopped += __syncthreads_count(active && s.stopped);
  }
  if (threadIdx.x == 0) p.not_need_stop[0] = stopped < p.batch;
}

__global__ void __launch_bounds__(kSlotThreads) mtp_postprocess_kernel(MtpPostprocessParams p) {
  wait_for_primary_grid();
  allow_dependent_launch();
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b < p.batch) mtp_postprocess_slot(p, b);
}

__global__ void __launch_bounds__(kSlotThreads)
    mtp_set_value_by_flags_kernel(MtpSetValueByFlagsParams p) {
  wait_for_primary_grid();
  allow_dependent_launch();
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b < p.batch) mtp_set_value_by_flags_slot(p, b);
}

// Copies (src != nullptr) or zeroes `count` rows of `row_units` units of type U.
template <typename U>
__device__ __forceinline__ void copy_rows(const U* src, U* dst, int64_t count, int64_t row_units) {
  const int64_t n = count * row_units;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src != nullptr ? src[i] : U{};
}

template <typename U>
__global__ void __launch_bounds__(kGatherThreads) hidden_gather_kernel(HiddenGatherParams p) {
  __shared__ int64_t sums[kGatherThreads / kWarp];
  wait_for_primary_grid();
  allow_dependent_launch();
  const int64_t b = blockIdx.x;
  // This slot's offsets (the counts of the slots before it) and the totals, in one pass.
  int64_t in_before = 0, out_before = 0, out_all = 0;
  for (int64_t t = threadIdx.x; t < p.batch; t += blockDim.x) {
    const HiddenSlotPlan q = hidden_slot_plan(p, t);
    if (t < b) {
      in_before += q.in_count;
      out_before += q.out_count;
    }
    out_all += q.out_count;
  }
  const int64_t in_off = block_sum<kGatherThreads>(in_before, sums);
  __syncthreads();
  const int64_t out_off = block_sum<kGatherThreads>(out_before, sums);
  __syncthreads();
  const int64_t total = block_sum<kGatherThreads>(out_all, sums);
  constexpr int64_t kUnit = sizeof(U);
  const int64_t row_units = p.row_bytes / kUnit;
  const U* in = static_cast<const U*>(p.input);
  U* out = static_cast<U*>(p.out);
  if (b < p.batch) {
    const HiddenSlotPlan q = hidden_slot_plan(p, b);
    const int64_t rows = clamp_to<int64_t>(q.out_count, 0, p.rows - out_off);
    const int64_t src0 = in_off + q.first;
    // Copied rows must lie in the input; the rest of the slot's rows are zero.
    const int64_t copied = src0 < 0 ? 0 : clamp_to<int64_t>(min_of(q.copy, rows), 0, p.rows - src0);
    copy_rows<U>(in + src0 * row_units, out + out_off * row_units, copied, row_units);
    copy_rows<U>(nullptr, out + (out_off + copied) * row_units, rows - copied, row_units);
  }
  // The rows past every slot's: block k zeroes rows total + k, + gridDim.x, ...
  for (int64_t r = max_of<int64_t>(total, 0) + b; r < p.rows; r += gridDim.x) {
    copy_rows<U>(nullptr, out + r * row_units, 1, row_units);
  }
  if (b == 0 && threadIdx.x == 0) p.output_token_num[0] = static_cast<int32_t>(total);
}

template <typename Params>
cudaError_t launch_one_block(void (*kernel)(Params), const Params& p, cudaStream_t stream) {
  launch_dependent(kernel, dim3(1), dim3(scan_threads(p.batch)), stream, p);
  return FDSPEC_LAUNCH_STATUS(stream);
}

template <typename Params>
cudaError_t launch_per_slot(void (*kernel)(Params), const Params& p, cudaStream_t stream) {
  if (p.batch <= 0) return cudaSuccess;
  const int64_t blocks = (p.batch + kSlotThreads - 1) / kSlotThreads;
  launch_dependent(kernel, dim3(static_cast<unsigned>(blocks)), dim3(kSlotThreads), stream, p);
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace

cudaError_t mtp_preprocess_gpu(const MtpPreprocessParams& p, cudaStream_t stream) {
  return launch_one_block(mtp_preprocess_kernel, p, stream);
}

cudaError_t mtp_update_gpu(const MtpUpdateParams& p, cudaStream_t stream) {
  return launch_one_block(mtp_update_kernel, p, stream);
}

cudaError_t mtp_postprocess_gpu(const MtpPostprocessParams& p, cudaStream_t stream) {
  return launch_per_slot(mtp_postprocess_kernel, p, stream);
}

cudaError_t mtp_set_value_by_flags_gpu(const MtpSetValueByFlagsParams& p, cudaStream_t stream) {
  return launch_per_slot(mtp_set_value_by_flags_kernel, p, stream);
}

cudaError_t hidden_gather_gpu(const HiddenGatherParams& p, cudaStream_t stream) {
  // At least one block: it writes output_token_num and zeroes the rows when the batch is empty.
  const dim3 grid(static_cast<unsigned>(std::max<int64_t>(p.batch, 1)));
  const bool wide = p.row_bytes % 16 == 0 && reinterpret_cast<uintptr_t>(p.input) % 16 == 0 &&
                    reinterpret_cast<uintptr_t>(p.out) % 16 == 0;
  if (wide) {
    launch_dependent(hidden_gather_kernel<uint4>, grid, dim3(kGatherThreads), stream, p);
  } else {
    launch_dependent(hidden_gather_kernel<uint16_t>, grid, dim3(kGatherThreads), stream, p);
  }
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
