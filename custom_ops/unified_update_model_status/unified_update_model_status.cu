// unified_update_model_status: CUDA implementation (rule in unified_update_model_status.h).
//
// G lanes per slot (slot_lanes.cuh): every load the slot's rule needs leaves in one round trip (its
// state, its row of W tokens, the end tokens), a group ballot finds the first token that ends the
// slot, and the accepted tokens go to token_ids_all as one coalesced store per group. One launch
// computes has_running_seqs too: one block (__syncthreads_or), or one thread-block cluster whose
// blocks OR into block 0's shared memory (sm_90), or past a cluster a grid after a 1-byte memset.
#include "unified_update_model_status/unified_update_model_status.h"

#include <cooperative_groups.h>

#include "common/cuda_utils.cuh"
#include "speculate_common/slot_lanes.cuh"

namespace fdspec {
namespace {

constexpr int kGridThreads = 256;
constexpr int kMaxCluster = 8;  // the portable cluster size

// The slot rule of unified_update_slot, by the G lanes of the slot; returns whether the slot still
// runs (the same in every lane of the group). Every lane of the warp calls it.
__device__ __forceinline__ bool update_slot_lanes(const UnifiedUpdateModelStatusParams& p, int lg) {
  const SlotLanes g = slot_lanes(lg);
  const int64_t b = g.slot;
  const bool valid = b < p.rows;
  const int64_t W = p.width, E = p.num_end_tokens;
  // One round trip: the end tokens, the slot's state and its first G columns.
  const int64_t ends = warp_end_tokens(p.end_tokens, E);
  bool stop = true, paused = false;
  int32_t len = 0, enc = 0, dec = 0;
  int64_t s = 0, max_dec = 0, plen = -1;
  if (valid) {
    stop = p.stop_flags[b];
    paused = p.is_paused[b];
    len = p.step_output_len[b];
    enc = p.seq_lens_encoder[b];
    dec = p.seq_lens_decoder[b];
    s = p.step_idx[b];
    max_dec = p.max_dec_len[b];
    plen = p.prompt_lens[b];
  }
  const int64_t end0 = __shfl_sync(kFullWarp, ends, 0);
  const bool running = valid && !stop && !paused;
  const int64_t n0 = running ? clamp_to<int64_t>(len, 0, W) : 0;
  int64_t* out = p.step_output_ids + b * W;
  const int64_t L = p.token_ids_stride;
  const bool row_ok = plen >= 0 && plen < L;
  const int64_t room = L - plen;
  int64_t cut = -1;  // the first token that ends the slot
  for (int64_t c0 = 0; c0 < W; c0 += int64_t{1} << lg) {
    const int64_t k = c0 + g.lane;
    int64_t token = valid && k < W ? out[k] : 0;
    const bool in = k < n0;
    const bool eos = warp_is_end_token(token, ends, p.end_tokens, E);
    const bool at_max = add_sat(s, k + 1) >= max_dec;
    const unsigned hits = group_ballot(g, in && (eos || at_max));
    if (cut < 0 && hits != 0) cut = c0 + __ffs(static_cast<int>(hits)) - 1;
    const int64_t n = cut >= 0 ? cut + 1 : n0;
    if (in && k < n) {
      if (k == cut && !eos && E > 0) {
        token = end0;
        out[k] = token;
      }
      if (row_ok && s >= -k && s < room - k) p.token_ids_all[b * L + plen + s + k] = token;
      if (k == n - 1) p.step_input_ids[b * W] = token;
    }
  }
  if (g.lane == 0 && valid) {
    if (running) {
      const int64_t n = cut >= 0 ? cut + 1 : n0;
      if (enc > 0) {
        p.seq_lens_decoder[b] =
            static_cast<int32_t>(min_of<int64_t>(int64_t{dec} + enc, INT32_MAX));
        p.seq_lens_encoder[b] = 0;
      } else if (dec > 0) {
        p.seq_lens_decoder[b] = static_cast<int32_t>(min_of<int64_t>(int64_t{dec} + n, INT32_MAX));
      }
      if (cut >= 0) p.stop_flags[b] = true;
      p.step_output_len[b] = static_cast<int32_t>(n);
      p.step_idx[b] = add_sat(s, n);
    } else if (b < p.batch) {
      p.stop_flags[b] = true;
      p.seq_lens_encoder[b] = 0;
      p.seq_lens_decoder[b] = 0;
      p.seq_lens_this_time[b] = 0;
      p.step_output_len[b] = 0;
    }
  }
  return running && cut < 0;
}

// The whole batch in one block: __syncthreads_or gives has_running_seqs.
__global__ void __launch_bounds__(1024)
    update_one_block_kernel(UnifiedUpdateModelStatusParams p, int lg) {
  wait_for_primary_grid();
  allow_dependent_launch();
  const bool running = update_slot_lanes(p, lg);
  const int any = __syncthreads_or(running);
  if (threadIdx.x == 0) p.has_running_seqs[0] = any != 0;
}

// One cluster of up to kMaxCluster blocks: each block with a running slot sets block 0's shared
// flag, which block 0 writes out after the cluster barrier. The barrier's first phase (block 0's
// flag cleared) is arrived at on entry, so that waiting on it at the end costs nothing.
__global__ void __launch_bounds__(1024)
    update_cluster_kernel(UnifiedUpdateModelStatusParams p, int lg) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  __shared__ int cluster_any;
  const cg::cluster_group cluster = cg::this_cluster();
  wait_for_primary_grid();
  allow_dependent_launch();
  if (threadIdx.x == 0) cluster_any = 0;
  auto cleared = cluster.barrier_arrive();
  const bool running = update_slot_lanes(p, lg);
  const int any = __syncthreads_or(running);
  cluster.barrier_wait(std::move(cleared));
  if (any != 0 && threadIdx.x == 0) *cluster.map_shared_rank(&cluster_any, 0) = 1;
  cluster.sync();
  if (cluster.block_rank() == 0 && threadIdx.x == 0) p.has_running_seqs[0] = cluster_any != 0;
#endif
}

// Any batch: has_running_seqs was cleared on the stream before; a block with a running slot sets
// it (every writer writes the same value).
__global__ void __launch_bounds__(kGridThreads)
    update_grid_kernel(UnifiedUpdateModelStatusParams p, int lg) {
  wait_for_primary_grid();
  allow_dependent_launch();
  const bool running = update_slot_lanes(p, lg);
  if (__syncthreads_or(running) != 0 && threadIdx.x == 0) p.has_running_seqs[0] = true;
}

struct UpdateShape {
  UpdateForm form = UpdateForm::kGrid;
  int lg = 0;
  int threads = kGridThreads;
  int64_t blocks = 1;
  bool fits = false;
};

// The launch of `form` (kAuto: the rule in the header) for this batch; fits = false where a forced
// form cannot take it.
cudaError_t update_shape(const UnifiedUpdateModelStatusParams& p, UpdateForm form,
                         UpdateShape* sh) {
  *sh = UpdateShape{};
  sh->lg = slot_lanes_log2(p.width);
  const int64_t lanes = max_of<int64_t>(p.rows, 0) << sh->lg;
  KernelFeatures f;
  const cudaError_t err = kernel_features(update_cluster_kernel, &f);
  if (err != cudaSuccess) return err;
  const bool cluster_ok = f.clusters && lanes <= int64_t{kMaxCluster} * 1024;
  if (form == UpdateForm::kAuto) {
    form = lanes <= kUpdateOneBlockLanes ? UpdateForm::kOneBlock
           : cluster_ok                  ? UpdateForm::kCluster
                                         : UpdateForm::kGrid;
  }
  sh->form = form;
  if (form == UpdateForm::kOneBlock) {
    sh->fits = lanes <= 1024;
    sh->threads = static_cast<int>(max_of<int64_t>(32, ceil_div<int64_t>(lanes, 32) * 32));
  } else if (form == UpdateForm::kCluster) {
    sh->fits = cluster_ok;
    sh->threads = 256;  // the smallest block that keeps the cluster within kMaxCluster blocks
    while (sh->threads < 1024 && lanes > int64_t{kMaxCluster} * sh->threads) sh->threads *= 2;
    sh->blocks = max_of<int64_t>(1, ceil_div<int64_t>(lanes, sh->threads));
  } else {
    sh->fits = true;
    sh->blocks = max_of<int64_t>(1, ceil_div<int64_t>(lanes, kGridThreads));
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t unified_update_form_fits(const UnifiedUpdateModelStatusParams& p, UpdateForm form,
                                     bool* fits) {
  UpdateShape sh;
  const cudaError_t err = update_shape(p, form, &sh);
  *fits = err == cudaSuccess && sh.fits;
  return err;
}

cudaError_t unified_update_model_status_gpu(const UnifiedUpdateModelStatusParams& p,
                                            cudaStream_t stream, UpdateForm form) {
  UpdateShape sh;
  cudaError_t err = update_shape(p, form, &sh);
  if (err != cudaSuccess) return err;
  if (!sh.fits) return cudaErrorInvalidConfiguration;
  if (sh.form == UpdateForm::kOneBlock) {
    err = launch_dependent(update_one_block_kernel, dim3(1), dim3(sh.threads), stream, p, sh.lg);
  } else if (sh.form == UpdateForm::kCluster) {
    KernelFeatures f;
    err = kernel_features(update_cluster_kernel, &f);
    if (err != cudaSuccess) return err;
    cudaLaunchAttribute attrs[2] = {};
    attrs[0].id = cudaLaunchAttributeClusterDimension;
    attrs[0].val.clusterDim.x = static_cast<unsigned>(sh.blocks);
    attrs[0].val.clusterDim.y = attrs[0].val.clusterDim.z = 1;
    unsigned n = 1;
    if (f.pdl) {
      attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attrs[n].val.programmaticStreamSerializationAllowed = 1;
      ++n;
    }
    const cudaLaunchConfig_t cfg = {dim3(static_cast<unsigned>(sh.blocks)),
                                    dim3(static_cast<unsigned>(sh.threads)),
                                    0,
                                    stream,
                                    attrs,
                                    n};
    err = cudaLaunchKernelEx(&cfg, update_cluster_kernel, p, sh.lg);
  } else {
    err = cudaMemsetAsync(p.has_running_seqs, 0, sizeof(bool), stream);
    if (err != cudaSuccess) return err;
    err = launch_dependent(update_grid_kernel, dim3(static_cast<unsigned>(sh.blocks)),
                           dim3(kGridThreads), stream, p, sh.lg);
  }
  if (err != cudaSuccess) return err;
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace fdspec
