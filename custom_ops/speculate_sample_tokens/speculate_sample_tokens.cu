// speculate_sample_tokens: CUDA implementation (docs/contract/sampling.md,
// docs/design/sampling.md). No Paddle include.
//
// A row is taken by a cluster of `parts` blocks (sm_90+), each owning a contiguous slice of it. The
// slice is read from global memory once, into shared memory when it fits; every later pass reads
// it there. Pass 1 finds the row's maximum (an order-preserving key with the lowest id). Pass 2
// weighs every entry (the integer weights of the header), adds each weight to a histogram of 641
// buckets of t, and keeps the entries of the heaviest buckets (relative weight above ~2^-10) in a
// small list. The blocks add up the cluster's histograms and lists through distributed shared
// memory, then every block takes the same decisions: the top-k bucket, the top-p bucket, the drawn
// bucket (scans of the histogram), and the exact entry inside each (from the list; or, when a
// bucket is not in the list, a radix refinement on the 64-bit order over the slice). All sums are
// of integers, so the token equals the CPU's whatever the order of the additions.
#include "speculate_sample_tokens/speculate_sample_tokens.h"

#include <cooperative_groups.h>

#include <algorithm>

#include "common/cuda_utils.cuh"
#include "common/logit_cuda.cuh"

namespace fdspec {
namespace {

namespace cg = cooperative_groups;

// 256 threads and at most 128 registers: two blocks (a slice each) per SM.
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kBucketsPerThread = (kSampleBuckets + kThreads - 1) / kThreads;
constexpr int kListCap = 512;  // candidate entries of a cluster; more and the slow path decides
static_assert(kThreads >= 256, "the radix refinement takes one digit per thread");
// Buckets kept in the list: t above about -10, weights above ~1/1000 of the largest. A top-p set
// of a language model's row almost always ends there.
constexpr int kCandBuckets = 10 * kSampleBucketsPerUnit;
constexpr int kMaxParts = 8;  // the portable cluster size
constexpr int kSliceBytesMax =
    76 * 1024;                     // slice in shared memory: two blocks per SM with the rest
constexpr int kUnroll = 4;         // global vectors in flight per thread
constexpr int kManyRowsPerSm = 4;  // from this many rows per SM the launch plan favours occupancy
constexpr unsigned kFull = 0xffffffffu;
constexpr uint64_t kWeightMask = (uint64_t{1} << 48) - 1;

struct Entry {
  uint64_t ord;
  uint64_t wb;  // weight | bucket << 48
};
__device__ __forceinline__ uint64_t entry_w(const Entry& e) { return e.wb & kWeightMask; }
__device__ __forceinline__ int entry_bucket(const Entry& e) { return static_cast<int>(e.wb >> 48); }

// A 64-bit sum kept as two 32-bit words, added to with 32-bit shared atomics (a 64-bit shared
// atomic add is a compare-and-swap loop): the low word's atomic returns the old value, and a carry
// out of it goes to the high word with the weight's own high bits. Exact, in any order.
__device__ __forceinline__ void add_split(uint32_t* lo_word, uint32_t* hi_word, uint64_t w) {
  const uint32_t lo = static_cast<uint32_t>(w);
  const uint32_t old = atomicAdd(lo_word, lo);
  const uint32_t hi = static_cast<uint32_t>(w >> 32) + (old + lo < old ? 1u : 0u);
  if (hi != 0) atomicAdd(hi_word, hi);
}

// The bucket masses of a block's histogram as three 32-bit words, mass = w0 + w1 2^16 + w2 2^32.
// A shared-memory slice (at most 76 KB: fewer than 2^16 entries) adds its weight's 16-bit digits
// with atomics whose result is not used (fire and forget; no digit sum can overflow its word); a
// global slice (any length) adds with add_split into w0 (low) and w2 (high), w1 staying 0.
__device__ __forceinline__ void add_digits(uint32_t* w0, uint32_t* w1, uint32_t* w2, uint64_t w) {
  atomicAdd(w0, static_cast<uint32_t>(w & 0xFFFFu));
  const uint32_t d1 = static_cast<uint32_t>((w >> 16) & 0xFFFFu),
                 d2 = static_cast<uint32_t>(w >> 32);
  if (d1 != 0) atomicAdd(w1, d1);
  if (d2 != 0) atomicAdd(w2, d2);
}
static_assert(kSliceBytesMax / 2 < 65536, "a shared slice's digit sums must fit 32 bits");

// f(q) for the blocks q < parts of the cluster, unrolled so that the remote reads of all blocks are
// in flight together (a loop on `parts` waits for each block's answer in turn).
template <typename F>
__device__ __forceinline__ void for_parts(int parts, F f) {
#pragma unroll
  for (int q = 0; q < kMaxParts; ++q) {
    if (q < parts) f(q);
  }
}

struct Shared {
  uint32_t hist_w0[kSampleBuckets];  // bucket masses in three words (add_digits)
  uint32_t hist_w1[kSampleBuckets];
  uint32_t hist_w2[kSampleBuckets];
  uint32_t hist_cnt[kSampleBuckets];
  uint64_t tot_mass[kSampleBuckets];
  uint32_t tot_cnt[kSampleBuckets];
  Entry list[kListCap];    // this block's entries; after the merge, a group's
  Entry merged[kListCap];  // the cluster's entries; in the weighing pass, the warps' queues
  uint32_t dlo[256];       // radix refinement (slow path): digit masses, split
  uint32_t dhi[256];
  uint32_t dcnt[256];
  uint64_t red[kWarps];
  uint64_t block_max;  // read by the cluster
  uint64_t block_tot;  // read by the cluster
  uint32_t list_n;     // read by the cluster (may exceed kListCap)
  uint32_t merged_n;
  uint32_t group_n;
  bool list_ok;  // every entry of the candidate buckets is in `merged`
  int cross_bucket;
  uint64_t cross_above;
  uint64_t res_ord, res_cnt, res_mass;
  int digit;
  uint32_t digit_cnt;
};

__device__ __forceinline__ void cluster_barrier(int parts) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (parts > 1) {
    cg::this_cluster().sync();
    return;
  }
#endif
  __syncthreads();
}

// The same field in block q of the cluster.
template <typename T>
__device__ __forceinline__ T* in_block(T* ptr, int q, int parts) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (parts > 1) return cg::this_cluster().map_shared_rank(ptr, q);
#endif
  return ptr;
}

__device__ __forceinline__ uint64_t block_max_u64(uint64_t v, uint64_t* red) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v = max(v, __shfl_xor_sync(kFull, v, d));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  uint64_t r = red[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) r = max(r, red[w]);
  __syncthreads();
  return r;
}

// Exclusive prefix of v over the threads in order, and the block's total.
__device__ __forceinline__ uint64_t block_excl_scan(uint64_t v, uint64_t* red, uint64_t* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint64_t incl = v;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const uint64_t y = __shfl_up_sync(kFull, incl, d);
    if (lane >= d) incl += y;
  }
  if (lane == 31) red[warp] = incl;
  __syncthreads();
  uint64_t before = 0, tot = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    before += w < warp ? red[w] : 0;
    tot += red[w];
  }
  __syncthreads();
  *total = tot;
  return before + incl - v;
}

// The bucket b where the running sum of val(0), val(1), ... passes target (excl <= target < excl +
// val(b)), into sh.cross_bucket / sh.cross_above. target is below the total. Each thread takes a
// run of kBucketsPerThread buckets.
template <typename F>
__device__ __forceinline__ void bucket_cross(Shared& sh, F val, uint64_t target) {
  const int b0 = kBucketsPerThread * threadIdx.x;
  uint64_t v[kBucketsPerThread], mine = 0;
#pragma unroll
  for (int i = 0; i < kBucketsPerThread; ++i) {
    v[i] = b0 + i < kSampleBuckets ? val(b0 + i) : 0;
    mine += v[i];
  }
  uint64_t tot;
  uint64_t ex = block_excl_scan(mine, sh.red, &tot);
  if (ex <= target && target < ex + mine) {
#pragma unroll
    for (int i = 0; i < kBucketsPerThread; ++i) {
      if (ex <= target && target < ex + v[i]) {
        sh.cross_bucket = b0 + i;
        sh.cross_above = ex;
      }
      ex += v[i];
    }
  }
  __syncthreads();
}

template <typename F>
__device__ __forceinline__ uint64_t bucket_sum(Shared& sh, F val) {
  const int b0 = kBucketsPerThread * threadIdx.x;
  uint64_t mine = 0;
#pragma unroll
  for (int i = 0; i < kBucketsPerThread; ++i) mine += b0 + i < kSampleBuckets ? val(b0 + i) : 0;
  uint64_t tot;
  block_excl_scan(mine, sh.red, &tot);
  return tot;
}

// Among the entries of sh.merged in bucket b with ord >= lb, in the order ord descending (or id
// ascending with by_id), the one where the running weight (1 per entry with count_w) passes
// target. Into sh.res_*: its ord, and the count and mass of the group up to and including it.
__device__ void resolve_in_list(Shared& sh, int b, uint64_t lb, bool by_id, bool count_w,
                                uint64_t target) {
  if (threadIdx.x == 0) sh.group_n = 0;
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < sh.merged_n; i += kThreads) {
    const Entry e = sh.merged[i];
    if (entry_bucket(e) == b && e.ord >= lb) sh.list[atomicAdd(&sh.group_n, 1u)] = e;
  }
  __syncthreads();
  const uint32_t m = sh.group_n;
  for (uint32_t i = threadIdx.x; i < m; i += kThreads) {
    const Entry e = sh.list[i];
    uint64_t pc = 0, pm = 0;
    for (uint32_t j = 0; j < m; ++j) {
      const Entry o = sh.list[j];
      const bool before = by_id ? sample_ord_id(o.ord) < sample_ord_id(e.ord) : o.ord > e.ord;
      pc += before ? 1 : 0;
      pm += before ? entry_w(o) : 0;
    }
    const uint64_t pre = count_w ? pc : pm, w = count_w ? 1 : entry_w(e);
    if (pre <= target && target < pre + w) {
      sh.res_ord = e.ord;
      sh.res_cnt = pc + 1;
      sh.res_mass = pm + entry_w(e);
    }
  }
  __syncthreads();
}

template <LogitsDType D, int kVecBytes, bool kSmem>
struct RowPass {
  using Storage = typename Logit<D>::Storage;
  static constexpr int kElems = kVecBytes / static_cast<int>(sizeof(Storage));
  static constexpr int kSmemElems = 16 / static_cast<int>(sizeof(Storage));

  const Storage* global_row;  // the whole row
  const Storage* slice;       // shared memory slice (kSmem)
  int64_t lo, hi;             // this block's ids
  int64_t n_smem;             // slice entries in shared memory, padded to 16 bytes

  __device__ __forceinline__ float at(int64_t id) const {
    return Logit<D>::to_float(kSmem ? slice[id - lo] : global_row[id]);
  }

  // f(id, x) for every entry of the slice (padding entries: NaN), in vectors.
  template <typename F>
  __device__ __forceinline__ void for_each(F f) const {
    if constexpr (kSmem) {
      union Pack {
        uint4 vec;
        Storage e[kSmemElems];
      };
      const uint4* v = reinterpret_cast<const uint4*>(slice);
      const int64_t nv = n_smem / kSmemElems;
      for (int64_t vi = threadIdx.x; vi < nv; vi += kThreads) {
        Pack pk;
        pk.vec = v[vi];
#pragma unroll
        for (int j = 0; j < kSmemElems; ++j)
          f(lo + vi * kSmemElems + j, Logit<D>::to_float(pk.e[j]));
      }
    } else {
      using Vec = typename VecOf<kVecBytes>::type;
      union Pack {
        Vec vec;
        Storage e[kElems];
      };
      const Vec* v = reinterpret_cast<const Vec*>(global_row + lo);
      const int64_t nv = (hi - lo) / kElems;
      for (int64_t base = 0; base < nv; base += int64_t{kThreads} * kUnroll) {
        Pack pk[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int64_t vi = base + u * kThreads + threadIdx.x;
          if (vi < nv) pk[u].vec = v[vi];
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int64_t vi = base + u * kThreads + threadIdx.x;
          if (vi < nv) {
#pragma unroll
            for (int j = 0; j < kElems; ++j)
              f(lo + vi * kElems + j, Logit<D>::to_float(pk[u].e[j]));
          }
        }
      }
    }
  }
};

// Asynchronous copies global -> shared (sm_80+): every copy of a thread in flight at once, no
// registers held, so the load of a slice runs at the SM's share of the bandwidth.
template <int kBytes>
__device__ __forceinline__ void copy_async(void* smem, const void* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  if constexpr (kBytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(gmem), "n"(kBytes)
                 : "memory");
  }
#endif
}

__device__ __forceinline__ void copy_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most `pending` (0 .. 3, a constant after unrolling) of this thread's committed
// groups are in flight: the earlier groups' data is then visible to this thread.
__device__ __forceinline__ void copy_async_wait(int pending) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  switch (pending) {
    case 3:
      asm volatile("cp.async.wait_group 3;\n" ::: "memory");
      break;
    case 2:
      asm volatile("cp.async.wait_group 2;\n" ::: "memory");
      break;
    case 1:
      asm volatile("cp.async.wait_group 1;\n" ::: "memory");
      break;
    default:
      asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  }
#endif
}
constexpr int kLoadGroups =
    4;  // the slice's copies in groups: the maximum of one overlaps the next

// A NaN of the dtype: pads a shared-memory slice to whole vectors (weight 0, never the maximum of a
// row that has a real entry, whose ids are lower).
template <LogitsDType D>
__device__ __forceinline__ typename Logit<D>::Storage padding_logit() {
  if constexpr (D == LogitsDType::kFloat32) {
    return __uint_as_float(0x7FC00000u);
  } else if constexpr (D == LogitsDType::kFloat16) {
    return uint16_t{0x7E00};
  } else {
    return uint16_t{0x7FC0};
  }
}

// The cluster's lists into sh.merged (after a cluster barrier that follows the lists' writes;
// ends with one, after which the lists may be reused).
__device__ void merge_lists(Shared& sh, int parts) {
  uint32_t raw[kMaxParts];
  for_parts(parts, [&](int q) { raw[q] = *in_block(&sh.list_n, q, parts); });
  uint32_t off = 0;
  uint64_t total = 0;
  for_parts(parts, [&](int q) {
    const uint32_t nq = min(raw[q], static_cast<uint32_t>(kListCap));
    const Entry* lq = in_block(sh.list, q, parts);
    for (uint32_t i = threadIdx.x; i < nq && off + i < kListCap; i += kThreads)
      sh.merged[off + i] = lq[i];
    off = min(off + nq, static_cast<uint32_t>(kListCap));
    total += raw[q];
  });
  if (threadIdx.x == 0) {
    sh.merged_n = off;
    sh.list_ok = total <= kListCap;
  }
  cluster_barrier(parts);
}

struct RowState {
  SampleRowParams rp;
  float M;
  int parts;
};

// resolve_in_list's result for a bucket whose entries are not (all) in the list: a radix descent
// on the 64-bit order, 8 bits a pass over the slice, until the entries left fit in the list.
template <typename Pass>
__device__ void resolve_slow(Shared& sh, const Pass& ps, const RowState& st, int b, uint64_t lb,
                             bool count_w, uint64_t target) {
  uint64_t prefix = 0, acc_c = 0, acc_m = 0;
  int fixed = 0;  // leading bits of ord fixed by `prefix`
  const auto member = [&](int64_t id, float x, uint64_t* ord, uint64_t* w) {
    const float t = sample_t(x, st.M, st.rp.c);
    *w = sample_weight(t);
    if (*w < st.rp.min_weight || sample_bucket(t) != b) return false;
    *ord = sample_ord(sample_key(x), static_cast<uint32_t>(id));
    return *ord >= lb && (fixed == 0 || (*ord >> (64 - fixed)) == prefix);
  };
  for (;;) {
    for (int i = threadIdx.x; i < 256; i += kThreads) {
      sh.dlo[i] = 0;
      sh.dhi[i] = 0;
      sh.dcnt[i] = 0;
    }
    __syncthreads();
    ps.for_each([&](int64_t id, float x) {
      uint64_t ord, w;
      if (!member(id, x, &ord, &w)) return;
      const int d = static_cast<int>((ord >> (56 - fixed)) & 255);
      atomicAdd(&sh.dcnt[d], 1u);
      add_split(&sh.dlo[d], &sh.dhi[d], w);
    });
    cluster_barrier(st.parts);
    // Digit d's cluster totals in thread d, then a scan from the top digit down.
    uint64_t c = 0, m = 0;
    const int d = 255 - static_cast<int>(threadIdx.x);
    if (threadIdx.x < 256) {
      for (int q = 0; q < st.parts; ++q) {
        c += in_block(sh.dcnt, q, st.parts)[d];
        m += (static_cast<uint64_t>(in_block(sh.dhi, q, st.parts)[d]) << 32) +
             in_block(sh.dlo, q, st.parts)[d];
      }
    }
    uint64_t tot;
    const uint64_t wv = count_w ? c : m;
    const uint64_t ex = block_excl_scan(threadIdx.x < 256 ? wv : 0, sh.red, &tot);
    const uint64_t exc = block_excl_scan(threadIdx.x < 256 ? c : 0, sh.red, &tot);
    const uint64_t exm = block_excl_scan(threadIdx.x < 256 ? m : 0, sh.red, &tot);
    if (threadIdx.x < 256 && ex <= target && target < ex + wv) {
      sh.digit = d;
      sh.digit_cnt = static_cast<uint32_t>(c);
      sh.res_cnt = exc;
      sh.res_mass = exm;
      sh.cross_above = ex;
    }
    cluster_barrier(st.parts);  // remote digit counts read before they are zeroed again
    prefix = (prefix << 8) | static_cast<uint64_t>(sh.digit);
    fixed += 8;
    target -= sh.cross_above;
    acc_c += sh.res_cnt;
    acc_m += sh.res_mass;
    const uint32_t left = sh.digit_cnt;
    __syncthreads();
    if (left <= kListCap) break;
  }
  if (threadIdx.x == 0) sh.list_n = 0;
  __syncthreads();
  ps.for_each([&](int64_t id, float x) {
    uint64_t ord, w;
    if (!member(id, x, &ord, &w)) return;
    const uint32_t i = atomicAdd(&sh.list_n, 1u);
    if (i < kListCap) sh.list[i] = Entry{ord, w | (static_cast<uint64_t>(b) << 48)};
  });
  cluster_barrier(st.parts);
  merge_lists(sh, st.parts);
  resolve_in_list(sh, b, lb, false, count_w, target);
  if (threadIdx.x == 0) {
    sh.res_cnt += acc_c;
    sh.res_mass += acc_m;
    sh.list_ok = false;  // `merged` now holds this group, not the candidate buckets
  }
  __syncthreads();
}

// The drawn entry of bucket b (ord >= lb) for a bucket not in the list: the running mass in id
// order over the cluster's slices (each thread a contiguous run of its block's slice), found by the
// thread whose run holds it, which writes the token.
template <typename Pass>
__device__ void draw_slow(Shared& sh, const Pass& ps, const RowState& st, int b, uint64_t lb,
                          uint64_t u, int part, int64_t* out) {
  const int64_t len = ps.hi - ps.lo;
  const int64_t per = ceil_div<int64_t>(len, kThreads);
  const int64_t first = ps.lo + min(len, per * threadIdx.x);
  const int64_t last = ps.lo + min(len, per * (threadIdx.x + 1));
  const auto weight = [&](int64_t id) -> uint64_t {
    const float x = ps.at(id);
    const float t = sample_t(x, st.M, st.rp.c);
    const uint64_t w = sample_weight(t);
    if (w < st.rp.min_weight || sample_bucket(t) != b) return 0;
    return sample_ord(sample_key(x), static_cast<uint32_t>(id)) >= lb ? w : 0;
  };
  uint64_t mine = 0;
  for (int64_t id = first; id < last; ++id) mine += weight(id);
  uint64_t block_tot;
  const uint64_t ex = block_excl_scan(mine, sh.red, &block_tot);
  if (threadIdx.x == 0) sh.block_tot = block_tot;
  cluster_barrier(st.parts);
  uint64_t before = 0;
  for (int q = 0; q < part; ++q) before += *in_block(&sh.block_tot, q, st.parts);
  cluster_barrier(st.parts);
  uint64_t cum = before + ex;
  if (cum <= u && u < cum + mine) {
    for (int64_t id = first; id < last; ++id) {
      cum += weight(id);
      if (u < cum) {
        *out = id;
        break;
      }
    }
  }
}

template <typename Pass>
__device__ void resolve(Shared& sh, const Pass& ps, const RowState& st, int b, uint64_t lb,
                        bool count_w, uint64_t target) {
  if (sh.list_ok && b < kCandBuckets) {
    resolve_in_list(sh, b, lb, false, count_w, target);
  } else {
    resolve_slow(sh, ps, st, b, lb, count_w, target);
  }
}

// The weighing pass over a shared-memory slice. Most entries of a language model's row lie below
// 2^-40 of the maximum (no weight): a cheap test rejects them, and a warp queues the others (x and
// id) in its ring of sh.merged, weighing 32 at a time with every lane busy, so that the long path
// (the polynomial, the integer weight, the histogram atomics) is neither divergent nor taken for
// entries without weight. The result is the same as weighing every entry where it stands: the
// histogram sums are of integers and the list's order does not matter (merge, resolve_in_list).
constexpr int kRing = kListCap / kWarps;  // 64: a warp's queue
static_assert(kRing >= 64, "a ring holds 31 queued entries and a full warp's 32 more");

template <LogitsDType D, typename Pass, typename F>
__device__ __forceinline__ void weigh_queued(Shared& sh, const Pass& ps, const RowState& st,
                                             F weigh) {
  using Storage = typename Pass::Storage;
  constexpr int kE = Pass::kSmemElems;
  union Pack {
    uint4 vec;
    Storage e[kE];
  };
  const unsigned lane = threadIdx.x & 31u;
  const unsigned lanes_below = (1u << lane) - 1u;
  Entry* ring = sh.merged + (threadIdx.x >> 5) * kRing;
  const uint4* v = reinterpret_cast<const uint4*>(ps.slice);
  const int64_t nv = ps.n_smem / kE;
  uint32_t head = 0, queued = 0;  // warp-uniform
  const auto take = [&](uint32_t slot) {
    const Entry e = ring[slot % kRing];
    __syncwarp();  // every lane has read its slot before the ring is written again
    weigh(static_cast<int64_t>(e.wb), bits_as_float(static_cast<uint32_t>(e.ord)));
  };
  // Warp-uniform trip count: vector vi = base + lane, the same vectors as ps.for_each's.
  for (int64_t base = threadIdx.x - lane; base < nv; base += kThreads) {
    const int64_t vi = base + lane;
    Pack pk;
    pk.vec = vi < nv ? v[vi] : make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int j = 0; j < kE; ++j) {
      const float x = Logit<D>::to_float(pk.e[j]);
      const bool keep = vi < nv && sample_t(x, st.M, st.rp.c) >= -40.0f;  // padding: NaN
      const unsigned mask = __ballot_sync(kFull, keep);
      if (keep) {
        const uint32_t slot = head + queued + __popc(mask & lanes_below);
        ring[slot % kRing] = Entry{float_as_bits(x), static_cast<uint64_t>(ps.lo + vi * kE + j)};
      }
      queued += __popc(mask);
      if (queued >= 32) {
        __syncwarp();
        take(head + lane);
        head += 32;
        queued -= 32;
      }
    }
  }
  __syncwarp();
  if (lane < queued) {
    const Entry e = ring[(head + lane) % kRing];
    weigh(static_cast<int64_t>(e.wb), bits_as_float(static_cast<uint32_t>(e.ord)));
  }
}

template <LogitsDType D, int kVecBytes, bool kSmem>
__global__ void __launch_bounds__(kThreads, 2)
    sample_tokens_kernel(SampleTokensParams p, int parts) {
  using Pass = RowPass<D, kVecBytes, kSmem>;
  using Storage = typename Pass::Storage;
  extern __shared__ __align__(16) unsigned char dyn_smem[];
  __shared__ Shared sh;

  // `parts` consecutive blocks share a row; with more than one they form a cluster (sm_90+).
  const int part = static_cast<int>(blockIdx.x % parts);
  const int64_t r = blockIdx.x / parts;
  if (r >= sample_valid_rows(p)) {  // the whole cluster takes this branch
    if (part == 0 && threadIdx.x == 0) p.sampled_tokens[r] = kSamplePadToken;
    return;
  }
  RowState st;
  st.rp = sample_row_params(p, r);
  st.parts = parts;
  const int64_t V = p.vocab;
  const int64_t per = ceil_div<int64_t>(ceil_div<int64_t>(V, parts), 8) * 8;
  Pass ps;
  ps.global_row = static_cast<const Storage*>(p.logits) + r * V;
  ps.slice = reinterpret_cast<const Storage*>(dyn_smem);
  ps.lo = min(V, per * part);
  ps.hi = min(V, ps.lo + per);
  ps.n_smem = ceil_div<int64_t>(ps.hi - ps.lo, Pass::kSmemElems) * Pass::kSmemElems;

  for (int i = threadIdx.x; i < kSampleBuckets; i += kThreads) {
    sh.hist_w0[i] = 0;
    sh.hist_w1[i] = 0;
    sh.hist_w2[i] = 0;
    sh.hist_cnt[i] = 0;
  }
  if (threadIdx.x == 0) sh.list_n = 0;

  // Pass 1: the slice into shared memory, and its maximum (first occurrence per thread: the lowest
  // id).
  uint32_t best_key = 0;
  int64_t best_id = -1;
  const auto see = [&](int64_t id, float x) {
    const uint32_t k = sample_key(x);
    if (best_id < 0 || k > best_key) {
      best_key = k;
      best_id = id;
    }
  };
  if constexpr (kSmem) {
    using Vec = typename VecOf<kVecBytes>::type;
    constexpr int kElems = Pass::kElems;
    const Vec* src = reinterpret_cast<const Vec*>(ps.global_row + ps.lo);
    Vec* dst = reinterpret_cast<Vec*>(dyn_smem);
    const int64_t nv = (ps.hi - ps.lo) / kElems;
    Storage* slice = reinterpret_cast<Storage*>(dyn_smem);
    for (int64_t i = (ps.hi - ps.lo) + threadIdx.x; i < ps.n_smem; i += kThreads)
      slice[i] = padding_logit<D>();
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if constexpr (kVecBytes >= 4) {
      // Every copy in flight, in kLoadGroups groups; each thread then takes the maximum of its own
      // vectors group by group as they land (its ids in increasing order), no block barrier needed.
      union Pack {
        Vec vec;
        Storage e[kElems];
      };
      const int64_t chunk =
          ceil_div<int64_t>(ceil_div<int64_t>(nv, kLoadGroups), kThreads) * kThreads;
#pragma unroll
      for (int g = 0; g < kLoadGroups; ++g) {
        const int64_t end = min(nv, (g + 1) * chunk);
        for (int64_t vi = g * chunk + threadIdx.x; vi < end; vi += kThreads)
          copy_async<kVecBytes>(dst + vi, src + vi);
        copy_async_commit();
      }
#pragma unroll
      for (int g = 0; g < kLoadGroups; ++g) {
        copy_async_wait(kLoadGroups - 1 - g);
        const int64_t end = min(nv, (g + 1) * chunk);
        for (int64_t vi = g * chunk + threadIdx.x; vi < end; vi += kThreads) {
          Pack pk;
          pk.vec = dst[vi];
#pragma unroll
          for (int j = 0; j < kElems; ++j)
            see(ps.lo + vi * kElems + j, Logit<D>::to_float(pk.e[j]));
        }
      }
    } else
#endif
    {
      union Pack {
        Vec vec;
        Storage e[kElems];
      };
      for (int64_t base = 0; base < nv; base += int64_t{kThreads} * kUnroll) {
        Pack pk[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int64_t vi = base + u * kThreads + threadIdx.x;
          if (vi < nv) pk[u].vec = src[vi];
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int64_t vi = base + u * kThreads + threadIdx.x;
          if (vi < nv) {
            dst[vi] = pk[u].vec;
#pragma unroll
            for (int j = 0; j < kElems; ++j)
              see(ps.lo + vi * kElems + j, Logit<D>::to_float(pk[u].e[j]));
          }
        }
      }
    }
  } else {
    ps.for_each(see);
  }
  const uint64_t mine = best_id < 0 ? 0 : sample_ord(best_key, static_cast<uint32_t>(best_id));
  const uint64_t block_best = block_max_u64(mine, sh.red);
  if (threadIdx.x == 0) sh.block_max = block_best;
  cluster_barrier(parts);
  uint64_t best = 0;
  for_parts(parts, [&](int q) { best = max(best, *in_block(&sh.block_max, q, parts)); });
  st.M = sample_key_to_float(static_cast<uint32_t>(best >> 32));

  if (st.rp.greedy || !(st.M >= -FLT_MAX && st.M <= FLT_MAX)) {
    if (part == 0 && threadIdx.x == 0) p.sampled_tokens[r] = sample_ord_id(best);
    cluster_barrier(parts);  // no block leaves while another may read its shared memory
    return;
  }

  // Pass 2: weights, the histogram of their buckets, the list of the heaviest entries. The bucket
  // counts serve top-k only.
  const bool counting = st.rp.top_k > 0;
  // One entry with weight: its bucket's count and mass, and the list if it is heavy.
  const auto weigh = [&](int64_t id, float x, bool digits) {
    const float t = sample_t(x, st.M, st.rp.c);
    const uint64_t w = sample_weight(t);
    if (w < st.rp.min_weight) return;
    const int b = sample_bucket(t);
    if (counting) atomicAdd(&sh.hist_cnt[b], 1u);
    if (digits) {
      add_digits(&sh.hist_w0[b], &sh.hist_w1[b], &sh.hist_w2[b], w);
    } else {
      add_split(&sh.hist_w0[b], &sh.hist_w2[b], w);
    }
    // Past the cap the list is useless (the slow path decides): stop counting, so that a broad row
    // does not queue every entry on one counter.
    if (b < kCandBuckets && *reinterpret_cast<volatile uint32_t*>(&sh.list_n) <= kListCap) {
      const uint32_t i = atomicAdd(&sh.list_n, 1u);
      if (i < kListCap)
        sh.list[i] = Entry{sample_ord(sample_key(x), static_cast<uint32_t>(id)),
                           w | (static_cast<uint64_t>(b) << 48)};
    }
  };
  if constexpr (kSmem) {
    weigh_queued<D>(sh, ps, st, [&](int64_t id, float x) { weigh(id, x, true); });
  } else {
    ps.for_each([&](int64_t id, float x) {
      if (sample_t(x, st.M, st.rp.c) >= -40.0f) weigh(id, x, false);
    });
  }
  cluster_barrier(parts);
  // The cluster's totals: block q adds up its share of the buckets from every block's histogram,
  // then each block copies the other shares from their owners (fewer remote reads than every block
  // adding up every bucket).
  const int share = (kSampleBuckets + parts - 1) / parts;
  for (int i = part * share + threadIdx.x; i < min(kSampleBuckets, (part + 1) * share);
       i += kThreads) {
    uint64_t m = 0, c = 0;
    for_parts(parts, [&](int q) {
      m += (static_cast<uint64_t>(in_block(sh.hist_w2, q, parts)[i]) << 32) +
           (static_cast<uint64_t>(in_block(sh.hist_w1, q, parts)[i]) << 16) +
           in_block(sh.hist_w0, q, parts)[i];
      if (counting) c += in_block(sh.hist_cnt, q, parts)[i];
    });
    sh.tot_mass[i] = m;
    sh.tot_cnt[i] = static_cast<uint32_t>(c);
  }
  merge_lists(sh, parts);  // its closing barrier also publishes each block's share of tot_*
  for (int i = threadIdx.x; i < kSampleBuckets; i += kThreads) {
    const int owner = i / share;
    if (owner != part) {
      sh.tot_mass[i] = in_block(sh.tot_mass, owner, parts)[i];
      if (counting) sh.tot_cnt[i] = in_block(sh.tot_cnt, owner, parts)[i];
    }
  }
  __syncthreads();

  // top-k: the bucket of the k-th entry and the entry itself (count order).
  const uint64_t total_cnt =
      counting ? bucket_sum(sh, [&](int b) -> uint64_t { return sh.tot_cnt[b]; }) : 0;
  int bk = kSampleBuckets;
  uint64_t lb_a = 0, mass_bk = 0, mass_a;
  if (st.rp.top_k > 0 && static_cast<uint64_t>(st.rp.top_k) < total_cnt) {
    bucket_cross(sh, [&](int b) -> uint64_t { return sh.tot_cnt[b]; }, st.rp.top_k - 1);
    bk = sh.cross_bucket;
    const uint64_t need = st.rp.top_k - 1 - sh.cross_above;
    resolve(sh, ps, st, bk, 0, true, need);
    lb_a = sh.res_ord;
    mass_bk = sh.res_mass;
  }
  const auto mass_in_a = [&](int b) -> uint64_t {
    return b < bk ? sh.tot_mass[b] : (b == bk ? mass_bk : 0);
  };
  mass_a = bucket_sum(sh, mass_in_a);

  // top-p: the shortest prefix of A reaching ceil(p mass(A)).
  const uint64_t target = sample_topp_target(mass_a, st.rp.p24) - 1;
  bucket_cross(sh, mass_in_a, target);
  const int bp = sh.cross_bucket;
  const uint64_t above_p = sh.cross_above;
  resolve(sh, ps, st, bp, bp == bk ? lb_a : 0, false, target - above_p);
  const uint64_t lb_s = sh.res_ord, mass_bp = sh.res_mass;
  const uint64_t mass_s = above_p + mass_bp;

  // The draw: a bucket by the histogram, then the entry by id inside it.
  const uint64_t u = sample_draw_in(st.rp, mass_s);
  bucket_cross(
      sh, [&](int b) -> uint64_t { return b < bp ? sh.tot_mass[b] : (b == bp ? mass_bp : 0); }, u);
  const int bd = sh.cross_bucket;
  const uint64_t ud = u - sh.cross_above;
  const uint64_t lb_d = bd == bp ? lb_s : 0;
  if (sh.list_ok && bd < kCandBuckets) {
    resolve_in_list(sh, bd, lb_d, true, false, ud);
    if (part == 0 && threadIdx.x == 0) p.sampled_tokens[r] = sample_ord_id(sh.res_ord);
  } else {
    draw_slow(sh, ps, st, bd, lb_d, ud, part, p.sampled_tokens + r);
  }
  cluster_barrier(parts);  // no block leaves while another may read its shared memory
}

template <LogitsDType D>
int vec_bytes(const SampleTokensParams& p) {
  const int elem = D == LogitsDType::kFloat32 ? 4 : 2;
  const uint64_t mix =
      static_cast<uint64_t>(p.vocab * elem) | reinterpret_cast<uintptr_t>(p.logits);
  for (int w = 16; w > elem; w /= 2) {
    if (mix % w == 0) return w;
  }
  return elem;
}

template <LogitsDType D, int kVecBytes, bool kSmem>
cudaError_t launch(const SampleTokensParams& p, int parts, size_t dyn, cudaStream_t stream) {
  const auto kernel = sample_tokens_kernel<D, kVecBytes, kSmem>;
  const cudaError_t serr = allow_dynamic_smem(kernel, dyn);
  if (serr != cudaSuccess) return serr;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(p.rows * parts));
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = dyn;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  if (parts > 1) {
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = static_cast<unsigned>(parts);
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, p, parts);
  if (err == cudaSuccess) err = FDSPEC_LAUNCH_STATUS(stream);
  if (err != cudaSuccess && launch_refusal() == nullptr) {
    launch_refusal() =
        parts > 1 ? "the runtime refused the cluster launch" : "the runtime refused the launch";
  }
  return err;
}

// The launch shape: `parts` blocks per row in a cluster where the kernel's image and the device
// have clusters (the smallest of 1, 2, 4, 8 that brings a slice under kSliceBytesMax, or 2 for many
// float32 rows, unless the caller chose), and the slice in shared memory where it fits the device's
// per-block limit beside the static part; otherwise every pass reads global memory.
template <LogitsDType D, int kVecBytes>
cudaError_t launch_planned(const SampleTokensParams& p, int parts, bool force_global,
                           cudaStream_t stream) {
  DeviceFacts dev;
  cudaError_t err = current_device_facts(&dev);
  if (err != cudaSuccess) return err;
  KernelFeatures f;
  err = kernel_features(sample_tokens_kernel<D, kVecBytes, true>, &f);
  if (err != cudaSuccess) return err;
  const int64_t elem = logits_dtype_size(D);
  const auto slice_bytes = [&](int q) {
    return ceil_div<int64_t>(ceil_div<int64_t>(p.vocab, q), 8) * 8 * elem;
  };
  if (parts <= 0) {
    parts = 1;
    while (parts < kMaxParts && slice_bytes(parts) > kSliceBytesMax) parts *= 2;
    // Rows enough to fill every SM several times over keep it busy without short rows: 2-block
    // clusters reading global memory then beat shared slices (more blocks resident per SM) on
    // float32 rows of every kind measured; bfloat16 rows with a top-k do not
    // (docs/design/sampling.md).
    if (D == LogitsDType::kFloat32 && parts > 2 && p.rows >= kManyRowsPerSm * int64_t{dev.sms}) {
      parts = 2;
      force_global = true;
    }
  }
  // The grid must stay within 2^31 - 1 blocks.
  if (!f.clusters || p.rows > INT32_MAX / kMaxParts) parts = 1;
  parts = std::min(parts, kMaxParts);
  const int64_t dyn = ceil_div<int64_t>(slice_bytes(parts), 16) * 16;
  // The slice beside the static part within the device's opt-in limit; allow_dynamic_smem then
  // opts in from the first byte past 48 KB of the two together.
  const bool smem =
      !force_global && dyn <= kSliceBytesMax &&
      dynamic_smem_refusal(static_cast<size_t>(dyn), sizeof(Shared), dev.smem_optin) == nullptr;
  return smem ? launch<D, kVecBytes, true>(p, parts, static_cast<size_t>(dyn), stream)
              : launch<D, kVecBytes, false>(p, parts, 0, stream);
}

template <LogitsDType D>
cudaError_t dispatch_vec(const SampleTokensParams& p, int parts, bool force_global,
                         cudaStream_t stream) {
  switch (vec_bytes<D>(p)) {
    case 16:
      return launch_planned<D, 16>(p, parts, force_global, stream);
    case 8:
      return launch_planned<D, 8>(p, parts, force_global, stream);
    case 4:
      return launch_planned<D, 4>(p, parts, force_global, stream);
    default:
      if constexpr (D == LogitsDType::kFloat32) {
        return launch_planned<D, 4>(p, parts, force_global, stream);
      } else {
        return launch_planned<D, 2>(p, parts, force_global, stream);
      }
  }
}

}  // namespace

cudaError_t sample_tokens_gpu(const SampleTokensParams& p, cudaStream_t stream, int parts,
                              bool force_global) {
  launch_refusal() = nullptr;
  if (p.rows <= 0) return cudaSuccess;
  switch (p.dtype) {
    case LogitsDType::kFloat16:
      return dispatch_vec<LogitsDType::kFloat16>(p, parts, force_global, stream);
    case LogitsDType::kBFloat16:
      return dispatch_vec<LogitsDType::kBFloat16>(p, parts, force_global, stream);
    default:
      return dispatch_vec<LogitsDType::kFloat32>(p, parts, force_global, stream);
  }
}

}  // namespace fdspec
