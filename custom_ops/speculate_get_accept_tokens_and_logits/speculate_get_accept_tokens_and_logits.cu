// speculate_get_accept_tokens_and_logits and speculate_compute_cu_batch_offset: CUDA implementation
// (docs/contract/logprobs.md). No Paddle include.
//
// The gather is a byte copy (the three logits dtypes differ only in row size). Its grid is
// (slot x accepted index, row chunk): a block copies one chunk of one accepted row, so the work
// spreads over every SM whatever the mix of slots, and blocks of unused indices exit at once. For
// batches up to kFusedOffsetMaxBatch the whole op is one kernel: each block sums the clamped accept
// counts of the slots before its own (<= 4 L2 reads a thread) while its source loads are in flight;
// the block of index 0, chunk 0 of each slot also writes the slot's offset. Larger batches first
// run the one-block offset scan, then the gather reads the offsets. Design:
// docs/design/logprobs.md.
#include "speculate_get_accept_tokens_and_logits/speculate_get_accept_tokens_and_logits.h"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "common/cuda_utils.cuh"

namespace fdspec {
namespace {

constexpr int kScanThreads = 1024;
constexpr int kGatherThreads = 256;
constexpr int kGatherUnroll =
    4;  // vectors in flight per thread: 16 KiB a block with 16-byte vectors
constexpr int64_t kFusedOffsetMaxBatch = 1024;

__global__ void __launch_bounds__(kScanThreads) cu_batch_offset_kernel(CuBatchOffsetParams p) {
  using Scan = cub::BlockScan<int64_t, kScanThreads>;
  __shared__ typename Scan::TempStorage tmp;
  if (threadIdx.x == 0) p.cu_batch_token_offset[0] = 0;
  int64_t carry = 0;
  for (int64_t base = 0; base < p.batch; base += kScanThreads) {
    const int64_t b = base + threadIdx.x;
    const int64_t a = b < p.batch ? clamped_accept(p.accept_num[b], p.max_accept) : 0;
    int64_t inclusive, chunk_total;
    Scan(tmp).InclusiveSum(a, inclusive, chunk_total);
    if (b < p.batch) p.cu_batch_token_offset[b + 1] = saturate_offset(carry + inclusive);
    carry += chunk_total;
    __syncthreads();  // tmp is reused by the next chunk
  }
}

template <int kVecBytes, bool kFusedOffsets>
__global__ void __launch_bounds__(kGatherThreads) accept_gather_kernel(AcceptTokensLogitsParams p) {
  using Vec = typename VecOf<kVecBytes>::type;
  using Reduce = cub::BlockReduce<int64_t, kGatherThreads>;
  __shared__ typename Reduce::TempStorage reduce_tmp;
  __shared__ int64_t shared_offset;

  const int64_t stride = p.accept_stride;
  const int64_t b = blockIdx.x / stride;
  const int64_t i = blockIdx.x % stride;
  const int64_t n = clamped_accept(p.accept_num[b], stride);
  const int64_t rows = p.seq_lens_encoder[b] > 0 ? min_of<int64_t>(n, 1) : n;
  const bool writes_offset = kFusedOffsets && i == 0 && blockIdx.y == 0;
  const bool writes_token = i < n && blockIdx.y == 0;
  const bool copies = i < rows;
  if (!copies && !writes_token && !writes_offset) return;  // uniform over the block

  const int64_t src_row = static_cast<int64_t>(p.cu_seqlens_q_output[b]) + i;
  const bool src_ok = copies && src_row >= 0 && src_row < p.in_rows;
  const int64_t begin =
      static_cast<int64_t>(blockIdx.y) * kGatherThreads * kVecBytes * kGatherUnroll;
  Vec v[kGatherUnroll];
  if (src_ok) {
    const unsigned char* src = p.logits + src_row * p.row_bytes;
#pragma unroll
    for (int u = 0; u < kGatherUnroll; ++u) {
      const int64_t at =
          begin + (static_cast<int64_t>(u) * kGatherThreads + threadIdx.x) * kVecBytes;
      if (at < p.row_bytes) v[u] = *reinterpret_cast<const Vec*>(src + at);
    }
  }

  int64_t offset;
  if (kFusedOffsets) {
    int64_t before = 0;
    for (int64_t j = threadIdx.x; j < b; j += kGatherThreads)
      before += clamped_accept(p.accept_num[j], stride);
    before = Reduce(reduce_tmp).Sum(before);
    if (threadIdx.x == 0) shared_offset = before;
    __syncthreads();
    offset = shared_offset;
    if (writes_offset && threadIdx.x == 0) {
      p.cu_batch_token_offset[b + 1] = saturate_offset(offset + n);
      if (b == 0) p.cu_batch_token_offset[0] = 0;
    }
  } else {
    offset = p.cu_batch_token_offset[b];
  }

  const int64_t dst_row = offset + i;
  if (dst_row >= p.out_rows) return;  // the caller's N is smaller than the accepted total: dropped
  if (writes_token && threadIdx.x == 0) p.token_ids[dst_row] = p.accept_tokens[b * stride + i];
  if (src_ok) {
    unsigned char* dst = p.target_logits + dst_row * p.row_bytes;
#pragma unroll
    for (int u = 0; u < kGatherUnroll; ++u) {
      const int64_t at =
          begin + (static_cast<int64_t>(u) * kGatherThreads + threadIdx.x) * kVecBytes;
      if (at < p.row_bytes) *reinterpret_cast<Vec*>(dst + at) = v[u];
    }
  }
}

// Widest vector (bytes) that divides the row and both base addresses: rows of a float32 vocabulary
// that is a multiple of 4 (bf16/fp16: 8) copy in 16-byte vectors.
int gather_vec_bytes(const AcceptTokensLogitsParams& p) {
  const uint64_t mix = static_cast<uint64_t>(p.row_bytes) | reinterpret_cast<uintptr_t>(p.logits) |
                       reinterpret_cast<uintptr_t>(p.target_logits);
  for (int w = 16; w > 2; w /= 2) {
    if (mix % w == 0) return w;
  }
  return 2;
}

template <int kVecBytes, bool kFused>
cudaError_t launch_gather(const AcceptTokensLogitsParams& p, cudaStream_t stream) {
  constexpr int64_t kChunkBytes = int64_t{kGatherThreads} * kVecBytes * kGatherUnroll;
  const dim3 grid(static_cast<unsigned>(p.batch * p.accept_stride),
                  static_cast<unsigned>(ceil_div<int64_t>(p.row_bytes, kChunkBytes)));
  accept_gather_kernel<kVecBytes, kFused><<<grid, kGatherThreads, 0, stream>>>(p);
  return FDSPEC_LAUNCH_STATUS(stream);
}

template <bool kFused>
cudaError_t dispatch_gather(const AcceptTokensLogitsParams& p, cudaStream_t stream) {
  switch (gather_vec_bytes(p)) {
    case 16:
      return launch_gather<16, kFused>(p, stream);
    case 8:
      return launch_gather<8, kFused>(p, stream);
    case 4:
      return launch_gather<4, kFused>(p, stream);
    default:
      return launch_gather<2, kFused>(p, stream);
  }
}

}  // namespace

cudaError_t compute_cu_batch_offset_gpu(const CuBatchOffsetParams& p, cudaStream_t stream) {
  if (p.batch <= 0) {  // B = 0 still writes cu[0] = 0 (the valid-row count of an empty batch)
    return cudaMemsetAsync(p.cu_batch_token_offset, 0, sizeof(int32_t), stream);
  }
  cu_batch_offset_kernel<<<1, kScanThreads, 0, stream>>>(p);
  return FDSPEC_LAUNCH_STATUS(stream);
}

cudaError_t get_accept_tokens_and_logits_gpu(const AcceptTokensLogitsParams& p,
                                             cudaStream_t stream) {
  if (p.batch <= 0) {  // nothing to gather; the offsets still say so: cu[0] = 0
    return compute_cu_batch_offset_gpu({p.cu_batch_token_offset, p.accept_num, 0, p.accept_stride},
                                       stream);
  }
  if (p.batch <= kFusedOffsetMaxBatch) return dispatch_gather<true>(p, stream);
  const cudaError_t err = compute_cu_batch_offset_gpu(
      {p.cu_batch_token_offset, p.accept_num, p.batch, p.accept_stride}, stream);
  return err != cudaSuccess ? err : dispatch_gather<false>(p, stream);
}

}  // namespace fdspec
