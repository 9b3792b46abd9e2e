// suffix_cache: the launch sequence of the global cache's kernels (docs/contract/suffix.md, "The
// global cache"). No Paddle include. Design, and the ordering rules between launches that every
// "before the wait" comment points to: docs/design/suffix_cache.md.
//
// Insert: one kernel, a block per slot: request numbers in slot order, a taken row's old response
// out of the counts, pair counts and line filter, the new tokens, their keys, counts and filter
// bits in. Query, per step, for all slots at once: suffix_match's local search (beside prep and the
// first scan when B <= SMs); prep (each slot's key, group and counted frequency) with the line mask
// beside it; the scan of the selected cache lines (a warp per unit of lines, a shared table of the
// groups' keys, member hits queued and verified 32 at a time, the candidate lists filled); prep2
// (each slot's shortest usable match length and its list); a second scan only for very frequent
// suffixes; the search (suffix_draft.cuh's core on the slot's candidates, the winner against the
// local draft); the budget walk, or each search block's own finish when the budget cannot bind.
// Determinism: every result is a count or a minimum, so every rank with the same tokens drafts the
// same.
//
// The kernels, a stage per header, all compiled into this one translation unit: device.cuh (what
// they share), insert.cuh (insert, finish, evict), prep.cuh (prep and the line filter),
// scan_parts.cuh and scan.cuh (the scans), prep2.cuh, search.cuh, profile.cuh (profile build).
#include "suffix_cache/suffix_cache.h"

#include "suffix_cache/suffix_cache_insert.cuh"
#include "suffix_cache/suffix_cache_prep.cuh"
#include "suffix_cache/suffix_cache_scan.cuh"
#include "suffix_cache/suffix_cache_prep2.cuh"
#include "suffix_cache/suffix_cache_search.cuh"
#include "suffix_cache/suffix_cache_profile.cuh"

namespace fdspec {
namespace {

// The bounds the kernels index with (suffix_cache.h), checked first by every launcher: the binding
// checks them by name before; a direct caller of this layer (a harness, a bench) gets
// cudaErrorInvalidValue rather than a launch outside them.
bool cache_bounds_ok(const SuffixCache& c) {
  const int64_t P = c.line_planes;
  return c.num_rows >= 1 && c.num_rows <= kMaxSuffixCacheRows && c.width >= 1 &&
         c.width <= kMaxSuffixCacheWidth && c.key_len >= 1 && c.key_len <= kMaxSuffixCacheKeyLen &&
         P >= 0 && P <= kMaxSuffixCacheLinePlanes && (P & (P - 1)) == 0;
}
bool insert_params_ok(const SuffixCacheInsertParams& p) {
  return cache_bounds_ok(p.cache) && p.token_ids_stride >= 0;
}
bool query_params_ok(const SuffixCacheQueryParams& q) {
  return cache_bounds_ok(q.cache) && q.m.batch <= kMaxSuffixCacheBatch && q.max_occurrences >= 1 &&
         q.max_occurrences <= kMaxSuffixCacheOccurrences;
}

}  // namespace

cudaError_t suffix_cache_insert_gpu(const SuffixCacheInsertParams& p, cudaStream_t stream) {
  if (!insert_params_ok(p)) return cudaErrorInvalidValue;
  if (p.batch <= 0) return cudaSuccess;
  // Every kernel of the insert and the query is a programmatic dependent of the work before it
  // (cuda_utils.cuh) and waits for it before it reads what it writes, so each one's launch is
  // hidden behind its predecessor's run, where an ordinary launch left a gap of about a microsecond
  // and a half.
  // With no more slots than rows no request of a call can lose its row to another.
  const cudaError_t err =
      launch_dependent(insert_kernel, dim3(static_cast<unsigned>(p.batch)), dim3(kInsertThreads),
                       stream, p, fast_divisor(p.cache.num_rows), p.batch > p.cache.num_rows);
  if (err != cudaSuccess) return err;
  return FDSPEC_LAUNCH_STATUS(stream);
}

cudaError_t suffix_cache_finish_gpu(const int32_t* finished, int64_t* slots, int64_t batch,
                                    cudaStream_t stream) {
  if (batch <= 0) return cudaSuccess;
  finish_kernel<<<static_cast<unsigned>((batch + kFinishThreads - 1) / kFinishThreads),
                  kFinishThreads, 0, stream>>>(finished, slots, batch);
  return FDSPEC_LAUNCH_STATUS(stream);
}

cudaError_t suffix_cache_evict_gpu(const SuffixCache& cache, const int64_t* counter, int64_t keep,
                                   cudaStream_t stream) {
  if (!cache_bounds_ok(cache) || keep < 0) return cudaErrorInvalidValue;
  const unsigned grid = static_cast<unsigned>(min_of<int64_t>(cache.num_rows, kEvictMaxBlocks));
  evict_kernel<<<grid, kEvictThreads, 0, stream>>>(cache, counter, keep);
  return FDSPEC_LAUNCH_STATUS(stream);
}

namespace {

uint32_t scan_table_size(int64_t B) {
  uint32_t table_size = kMinScanTable;
  while (table_size < kScanTableLoad * static_cast<uint64_t>(B) && table_size < kMaxScanTable) {
    table_size *= 2;
  }
  while (table_size < 2 * static_cast<uint64_t>(B)) table_size *= 2;
  return table_size;
}

}  // namespace

SuffixSearchForms suffix_cache_search_forms() {
  return {suffix_gpu::kCandCapLarge, kSearchSmem<suffix_gpu::kCandCapLarge>,
          suffix_gpu::kCandCapSmall, kSearchSmem<suffix_gpu::kCandCapSmall>};
}

size_t suffix_cache_scan_smem(int64_t batch) {
  return scan_layout(batch, scan_table_size(batch), batch <= kAggSlots)
      .bytes();  // the first scan's, the larger
}

int64_t suffix_cache_max_batch(const DeviceLimits& dev) {
  int64_t b = kMaxSuffixCacheBatch;  // the scan's bytes grow with the batch
  while (b > 0 && suffix_cache_scan_smem(b) > static_cast<size_t>(dev.smem_optin)) --b;
  return b;
}

cudaError_t suffix_cache_max_batch_gpu(int64_t* max_batch) {
  DeviceFacts dev;
  const cudaError_t err = current_device_facts(&dev);
  if (err == cudaSuccess) *max_batch = suffix_cache_max_batch(dev);
  return err;
}

namespace {

// The query's kernels; after_insert: the kernel before them on the stream is the insert's
// (query_prep_kernel).
cudaError_t launch_query(const SuffixCacheQueryParams& q, bool after_insert, cudaStream_t stream) {
  if (!query_params_ok(q)) return cudaErrorInvalidValue;
  const int64_t B = q.m.batch;
  if (B <= 0) return cudaSuccess;
  // The local search (suffix_match's, which lets its dependents launch at its start) and the global
  // prep and first scan are independent. Where the local search leaves SMs free (B <= SMs: a block
  // per slot), the first scan runs beside it as its programmatic dependent and waits for it only
  // before it exits, so that everything after the scan sees both; prep goes first (the scan reads
  // what it writes: the local search waits for prep before it lets the scan launch). At B > SMs the
  // local search fills the GPU and the scan beside it only slows both, so larger batches keep the
  // kernels in sequence.
  DeviceFacts dev;
  cudaError_t err = current_device_facts(&dev);
  if (err != cudaSuccess) return err;
  const bool beside = B <= dev.sms;
  // Beside the local search the kernels are programmatic dependents, each waiting for the one
  // before it first (their launches hidden behind their predecessors' runs); after it, where the
  // local search has filled the GPU, ordinary launches (dependents measured slower there).
  auto launch = [&](auto kernel, unsigned grid, size_t smem, auto... args) -> cudaError_t {
    if (beside)
      return launch_dependent_smem(kernel, dim3(grid), dim3(kThreads), smem, stream, args...);
    kernel<<<grid, kThreads, smem, stream>>>(args...);
    return cudaGetLastError();
  };
  if (!beside) {
    err = suffix_search_gpu(q.m, stream);
    if (err != cudaSuccess) return err;
  }
  // Prep, and with the line filter the filter's blocks beside it (a block per 32 words of the
  // mask).
  const int64_t words = suffix_line_words(q.cache.num_rows, q.cache.width);
  const bool filtered = q.cache.line_planes > 0;
  err = launch(query_prep_kernel, static_cast<unsigned>(B + (filtered ? (words + 31) / 32 : 0)),
               filtered ? sizeof(uint64_t) * B : 0, q, after_insert);
  if (err != cudaSuccess) return err;
  // The local search between prep and the first scan.
  const bool local_beside = beside;
  if (local_beside) {
    err = suffix_search_gpu(q.m, stream);
    if (err != cudaSuccess) return err;
  }
  // The scans' tables: powers of two, sparse while they stay small (at least 1024 entries, 8 per
  // slot up to 2048), and always with room for two entries per slot (a probe must find a free
  // one). Every cached position probes the groups' table and every hit the members', so sparse
  // tables pay, until their shared memory costs resident blocks (hence the cap kMaxScanTable).
  const uint32_t table_size = scan_table_size(B);
  const size_t smem1 = scan_layout(B, table_size, B <= kAggSlots).bytes();
  const size_t smem2 = scan_layout(B, table_size, false).bytes();
  err = allow_dynamic_smem(query_scan_kernel, smem1);
  if (err != cudaSuccess) return err;
  // One wave of the scan's blocks at most: the lines the mask selects are spread over the whole
  // cache, so every block has some, and each block pays its set-up (tables, descriptors) once.
  // Beside the local search, at most kScanBesideBlocks per SM, which leaves its blocks room.
  int per_sm = 0;
  err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, query_scan_kernel, kThreads, smem1);
  if (err != cudaSuccess) return err;
  per_sm = max_of(beside ? min_of(per_sm, kScanBesideBlocks) : per_sm, 1);
  const int64_t wave = int64_t{per_sm} * dev.sms;
  const int task_lines =
      words * (32 / kScanTaskLines) / kWarps >= wave ? kScanTaskLines : kScanTaskLinesSmall;
  const bool block_units = words <= kBlockUnitWordsPerSlot * B;
  const int64_t task_blocks = (words * (32 / task_lines) + kWarps - 1) / kWarps;
  const unsigned grid = static_cast<unsigned>(min_of<int64_t>(task_blocks, wave));
  const FastDivisor row_lines = fast_divisor(suffix_row_lines(q.cache.width));
  // The first scan reads prep's output once the local search, which waits for prep first, lets it
  // launch. With B > SMs (the local search already ran) it is an ordinary launch after prep.
  if (local_beside) {
    err = launch_dependent_smem(query_scan_kernel, dim3(grid), dim3(kThreads), smem1, stream, q, 1,
                                table_size, task_lines, block_units, row_lines);
    if (err != cudaSuccess) return err;
  } else {
    query_scan_kernel<<<grid, kThreads, smem1, stream>>>(q, 1, table_size, task_lines, block_units,
                                                         row_lines);
  }
  err = launch(query_prep2_kernel, static_cast<unsigned>((B + kWarps - 1) / kWarps), 0, q);
  if (err != cudaSuccess) return err;
  const unsigned grid2 =
      beside ? static_cast<unsigned>(min_of<int64_t>(grid, kScan2BesideBlocks * dev.sms)) : grid;
  err =
      launch(query_scan_kernel, grid2, smem2, q, 2, table_size, task_lines, block_units, row_lines);
  if (err != cudaSuccess) return err;
  const bool alone = suffix_budget_never_binds(q.m);
  static_assert(suffix_gpu::kThreads == kThreads, "one block size");
  auto search = [&](auto kernel, size_t smem) -> cudaError_t {
    const cudaError_t e = allow_dynamic_smem(kernel, smem);
    if (e != cudaSuccess) return e;
    return launch(kernel, static_cast<unsigned>(B), smem, q, fast_divisor(q.cache.num_rows), alone);
  };
  // The search's form that fits the device (suffix_cache_search_forms).
  constexpr int kLarge = suffix_gpu::kCandCapLarge, kSmall = suffix_gpu::kCandCapSmall;
  switch (suffix_search_cand_cap(suffix_cache_search_forms(), dev)) {
    case kLarge:
      err = search(query_search_kernel<kLarge>, kSearchSmem<kLarge>);
      break;
    case kSmall:
      err = search(query_search_kernel<kSmall>, kSearchSmem<kSmall>);
      break;
    default:
      return cudaErrorInvalidConfiguration;  // below 66 KB per block: no supported GPU
  }
  if (err != cudaSuccess) return err;
  if (!alone) {
    err = suffix_walk_gpu(q.m, stream);
    if (err != cudaSuccess) return err;
  }
  return FDSPEC_LAUNCH_STATUS(stream);
}

}  // namespace

cudaError_t suffix_cache_query_gpu(const SuffixCacheQueryParams& q, cudaStream_t stream) {
  return launch_query(q, false, stream);
}

// The insert and the query as one launch sequence: the query's prep reads the step's inputs while
// the insert still runs (docs/design/suffix_cache.md), so the step is a little faster than the two
// calls.
cudaError_t suffix_cache_step_gpu(const SuffixCacheInsertParams& ins,
                                  const SuffixCacheQueryParams& q, cudaStream_t stream) {
  const cudaError_t err = suffix_cache_insert_gpu(ins, stream);
  if (err != cudaSuccess) return err;
  return launch_query(q, true, stream);
}

}  // namespace fdspec
