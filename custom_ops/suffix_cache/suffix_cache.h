// suffix_cache: the global cache of suffix decoding (memory across requests), kernel layer (CPU
// implementation and CUDA launchers). No Paddle include. Contract: docs/contract/suffix.md, section
// "The global cache".
//
// The cache holds the responses (generated tokens, not prompts) of the last R requests, one row of
// a ring of R rows each: request number q (counted from 0 in the order requests begin, slot order
// within a step) owns row q mod R, so beginning request q evicts request q - R (first in, first
// out) and the memory is allocated once: R * width tokens. Tokens past a row's width are not
// cached.
//
// Per position the cache also keeps a 32-bit key of the G (= key_len) tokens ending there: the
// token itself when G = 1 (and it fits), else a hash. A query scans the keys of the occupied
// positions once per step for all slots at once (no per-slot pass over the cache), and every hit of
// a hashed key is verified against the stored tokens, so a hash collision costs time, never a wrong
// draft. With G = 1 the cache also counts each token id's occurrences (below V), and each pair of
// consecutive ids below F, so that the query knows before it scans which last tokens are rare
// enough to list and which need a longer match (of two tokens, or of three). And it keeps a filter
// of the cached lines (32 positions of a row): for each line, the bits of the one-, two- and
// three-token strings that end in it, so that the scan reads only the lines that can hold one of
// the step's contexts.
#pragma once

#include <cstdint>

#include "common/fdspec_common.h"
#include "suffix_match/suffix_match.h"

#ifdef FDSPEC_WITH_CUDA
#include <cuda_runtime_api.h>

#include "common/launch_plan.h"
#endif

namespace fdspec {

constexpr int kMaxSuffixCacheKeyLen = 8;  // G: tokens hashed into a position's key
constexpr int64_t kMaxSuffixCacheWidth =
    1 << 16;  // a row's width (offsets fit 16 bits of a candidate)
constexpr int64_t kMaxSuffixCacheRows = int64_t{1} << 30;
constexpr int64_t kMaxSuffixCacheVocab = int64_t{1} << 31;  // V: counted tokens are int32 keys
constexpr int64_t kMaxSuffixCachePairVocab = 1 << 15;       // F: pairs of ids below it are counted
constexpr int64_t kMaxSuffixCacheLinePlanes = 1 << 15;      // P: bits of a line's filter
constexpr int64_t kMinSuffixCacheLinePlanes = 32;
constexpr int kMaxSuffixCacheOccurrences =
    1024;  // M: the most occurrences a global match length may have
constexpr int kMinSuffixCacheOccurrences = 32;
constexpr int kMaxSuffixCacheBatch = 2048;  // slots a query serves (its per-block key table;
                                            // a queued hit packs the slot in 11 bits)
// The candidate lists of a querying slot, M entries each (the query's scratch `cand` has
// kSuffixCandLists * M columns): list 0 holds its group's occurrences of C[-G:] (at the group's
// rep, used while there are at most M), list j in 1 .. kSuffixMemberLists its own occurrences with
// match length >= G + j. The first scan fills them all, so the list of the shortest usable match
// length is complete after one pass unless that length exceeds G + kSuffixMemberLists (then a
// second scan refills the last list: docs/contract/suffix.md, "How the GPU computes it").
constexpr int kSuffixMemberLists = 4;
constexpr int kSuffixCandLists = 1 + kSuffixMemberLists;
// Columns of the per-slot query statistics (int32): the match-length histogram, then the fields.
// Rows of 276 columns, so that every row is 16-byte aligned: a slot's *scan descriptor*, the fields
// every block of the scan reads for every slot before it starts, is one aligned 32-byte sector read
// with two 16-byte loads (one request per slot and block instead of one per field: the grid's
// blocks all read the same few lines).
constexpr int kSuffixStatHist = 0;    // [0, 256): count of verified hits with l == index
constexpr int kSuffixStatDesc = 256;  // [256, 264): the scan descriptor:
constexpr int kSuffixStatCtx = 256;   //   c = |C| for a querying slot, 0 otherwise
constexpr int kSuffixStatN = 257;     //   N, the querying slot's history length
constexpr int kSuffixStatKey = 258;   //   the context's key (its last G tokens)
constexpr int kSuffixStatRep =
    259;  //   the slot's group: least querying slot with its last G tokens
constexpr int kSuffixStatKind = 260;   //   how the scan finds its hits (kSuffixKind*)
constexpr int kSuffixStatPrev = 261;   //   [261, 263): with c >= G + 2, the token before the
                                       //   context's last G (int64, low word first), else 0
constexpr int kSuffixStatPrev2 = 263;  //   kSuffixKindPairFrequent: the token C[-3] (an int32 id)
constexpr int kSuffixStatCount = 264;  // n_1 from the counts, -1: scanned
constexpr int kSuffixStatPairCount = 265;  // n_2 from the pair counts, -1: not counted
constexpr int kSuffixStatList = 266;       // the list the search reads (0: its rep's), -1 none
constexpr int kSuffixStatHits = 267;       // hits with l >= G: n_G, the occurrences of C[-G:]
constexpr int kSuffixStatLmin = 268;       // shortest match length the global search uses
constexpr int kSuffixStatGroup =
    269;  // a group's hits (occurrences of its last G tokens), at its rep
constexpr int kSuffixStatStored = 270;  // [270, 270 + kSuffixCandLists): entries offered to list j
constexpr int kSuffixStatRead =
    kSuffixStatStored + kSuffixCandLists;  // entries of its list the search
                                           // reads (prep2's; -1: read the list's count)
constexpr int kSuffixStatCols = (kSuffixStatRead + 1 + 3) / 4 * 4;
static_assert(kSuffixStatCols % 4 == 0 && kSuffixStatDesc % 8 == 0, "aligned descriptors");
// How the scan finds a querying slot's occurrences (its descriptor's kind), from n_1 =
// count(C[-1:]) and n_2 = count(C[-2:]) where the cache counts them (G = 1, ids below V, pairs of
// ids below F):
constexpr int kSuffixKindScanned = 0;   // not counted (G > 1, a hashed or large token): the scan
                                        // counts the group's hits, lists them, and finds members
                                        // through it
constexpr int kSuffixKindRare = 1;      // n_1 <= M: the group's hits are listed; nothing else (the
                                        // search measures their match lengths)
constexpr int kSuffixKindFrequent = 2;  // n_1 > M (n_2 <= M, or not counted): members are found by
                                        // their last two tokens and verified from l = 2 on
constexpr int kSuffixKindPairFrequent =
    3;  // n_1, n_2 > M: found by their last three tokens, verified
        // from l = 3 on (the l = 2 hits are n_2 minus those)
static_assert(kMaxSuffixTreeDepth <= 256, "match lengths are stored in 8 bits of a candidate");

// Slot states in cache_slots: the request number the slot writes to, or one of these.
constexpr int64_t kSuffixSlotFree = -1;  // the next decoding step begins a new cached response
constexpr int64_t kSuffixSlotDetached =
    -2;  // finished or evicted: nothing cached until its next request

struct SuffixCache {
  int64_t* tokens;   // [R, width] int64: row q mod R holds request q's response
  int32_t* keys;     // [R, width] int32: key of the G tokens ending at each position (off >= G - 1)
  int64_t* rows;     // [R, 2] int64: (request number or -1, cached length)
  int64_t num_rows;  // R >= 1
  int64_t width;     // 1 .. kMaxSuffixCacheWidth
  int key_len;       // G, 1 .. kMaxSuffixCacheKeyLen
  int32_t* counts;   // [V] int32 (G = 1): occurrences of each token t < V in the cached responses
  int64_t vocab;     // V (0: nothing counted; the binding's choice when R * width >= 2^31, where
                     // an int32 count could overflow)
  int32_t* pairs;    // [F, F] int32 (G = 1): occurrences of each pair (a, b) of ids below F
  int64_t pair_vocab;   // F (0: no pair counted; as V when R * width >= 2^31)
  uint32_t* lines;      // [P, suffix_line_words(R, width)] bits (int32 in Paddle): the line filter
  int64_t line_planes;  // P, 0 or a power of two (0: no filter, every line is scanned)
};

// ---- reading the state --------------------------------------------------------------------------
// Every value an op reads from the cache's state (which a caller, or a bug elsewhere, may have left
// in a state no op writes) goes through one of these where it is used, on the CPU and the GPU, so
// that any state gives a defined result and no access outside a tensor (docs/contract/suffix.md,
// "A state the ops did not write"). On a state the ops wrote they return the value unchanged.
constexpr int64_t kMaxSuffixCacheRequests = int64_t{1}
                                            << 39;  // request numbers: 40 bits of a candidate
constexpr int64_t kSuffixCounterLimit = int64_t{1} << 38;  // a counter at or past it reads as 0
constexpr int64_t kSuffixCounterMask =
    (int64_t{1} << 40) - 1;  // the GPU insert's tickets use the bits above

// A row's request number (rows[2 r]): outside [0, 2^39) the row is empty (-1).
FDSPEC_HD int64_t suffix_row_req(int64_t v) {
  return v >= 0 && v < kMaxSuffixCacheRequests ? v : -1;
}
// A row's cached length (rows[2 r + 1]) for its request number as suffix_row_req reads it: 0 for an
// empty row, else clamped to [0, width].
FDSPEC_HD int64_t suffix_row_len(int64_t req, int64_t len, int64_t width) {
  return req < 0 ? 0 : clamp_to<int64_t>(len, 0, width);
}
// The request counter: its low 40 bits, 0 when they are 2^38 or more, so that a call's request
// numbers (at most 2^22 of them) stay below 2^39.
FDSPEC_HD int64_t suffix_counter_base(int64_t v) {
  const int64_t low = v & kSuffixCounterMask;
  return low < kSuffixCounterLimit ? low : 0;
}

// ---- the line filter ----------------------------------------------------------------------------
// A line is kSuffixLineLen consecutive positions of a row, from offset G - 1 on (the scan's warp
// line: lane i reads position G - 1 + 32 j + i); row r's line j is line r * suffix_row_lines + j of
// the cache. Each line has a Bloom filter of P bits, stored bit-sliced: plane p is one bit per
// line, so the bits of every line for one item are one contiguous bitmap, and a query that asks
// which lines may hold one string reads kSuffixLineHashes planes at 4 bytes per 32 lines. The items
// of a position `off` are the strings through which the scan can hit there: its key (any G), and
// with G = 1 and a counted token (suffix_count_index) the pair (token before, key), and when that
// pair is counted (suffix_pair_index) the triple (key two before, token before, key). The insert
// sets a new position's bits, an eviction clears the row's lines in every plane, so the filter is a
// pure function of the cached responses and never misses a line that holds an item: the scan skips
// lines none of the step's items can be in, and computes exactly what a scan of every line would.
constexpr int kSuffixLineLen = 32;
constexpr int kSuffixLineHashes =
    5;  // bits per item (about 96 items in 2048 bits: 4e-4 false hits)

FDSPEC_HD int64_t suffix_row_lines(int64_t width) {
  return (width + kSuffixLineLen - 1) / kSuffixLineLen;
}
FDSPEC_HD int64_t suffix_line_words(int64_t rows, int64_t width) {
  return (rows * suffix_row_lines(width) + 31) / 32;
}
FDSPEC_HD int64_t suffix_line_of(int64_t off, int G) { return (off - (G - 1)) / kSuffixLineLen; }

// The items: 64-bit hashes of the strings, distinct per length (the seeds), from the values the
// scan compares (the key of a position, the int64 token before it, the key two before).
FDSPEC_HD uint64_t suffix_item1(int32_t key) {
  return suffix_mix64(0x243f6a8885a308d3ULL ^ static_cast<uint32_t>(key));
}
FDSPEC_HD uint64_t suffix_item2(int64_t before, int32_t key) {
  return suffix_mix64(suffix_mix64(0x13198a2e03707344ULL ^ static_cast<uint64_t>(before)) ^
                      static_cast<uint32_t>(key));
}
FDSPEC_HD uint64_t suffix_item3(int32_t key2, int64_t before, int32_t key) {
  return suffix_mix64(suffix_item2(before, key) ^
                      (0xa4093822299f31d0ULL + static_cast<uint32_t>(key2)));
}
// The planes of an item: double hashing over P (a power of two), the step odd so that the
// kSuffixLineHashes planes are distinct.
FDSPEC_HD uint32_t suffix_item_plane(uint64_t item, int j, int64_t P) {
  const uint32_t lo = static_cast<uint32_t>(item), step = static_cast<uint32_t>(item >> 32) | 1u;
  return (lo + static_cast<uint32_t>(j) * step) & static_cast<uint32_t>(P - 1);
}

// Where a position's key is counted in `counts`: with G = 1 the key of a token t in [0, V) is t
// itself, counted at t; other keys (hashed, larger tokens, G > 1) are not counted (-1). The insert,
// the ring's evictions and suffix_cache_evict keep the counts exact, so that the GPU query knows
// how often a context's last token occurs before it scans (docs/contract/suffix.md).
FDSPEC_HD int64_t suffix_count_index(int32_t key, const SuffixCache& c) {
  return c.key_len == 1 && key >= 0 && key < c.vocab ? key : -1;
}

// Where the pair (a, b) of consecutive tokens is counted in `pairs` (G = 1, both ids below F), else
// -1. Kept exact as `counts` is; the query reads n_2 = count(C[-2:]) from it before it scans, so a
// context whose last token is frequent needs no scan to learn whether its last two tokens are.
FDSPEC_HD int64_t suffix_pair_index(int64_t a, int64_t b, const SuffixCache& c) {
  return c.key_len == 1 && a >= 0 && a < c.pair_vocab && b >= 0 && b < c.pair_vocab
             ? a * c.pair_vocab + b
             : -1;
}

// The items of position `off` of a row whose tokens and keys are t and k (written up to off): up
// to three, into items[]; returns how many. The same function sets the bits at the insert (CPU and
// GPU), so the filter holds exactly what the scan can look for (docs in the section above).
FDSPEC_HD int suffix_line_items(const int64_t* t, const int32_t* k, int64_t off,
                                const SuffixCache& c, uint64_t* items) {
  const int G = c.key_len;
  if (off < G - 1) return 0;
  int n = 0;
  items[n++] = suffix_item1(k[off]);
  if (G == 1 && off >= 1 && suffix_count_index(k[off], c) >= 0) {  // a frequent token's members
    items[n++] = suffix_item2(t[off - 1], k[off]);
    if (off >= 2 && suffix_pair_index(t[off - 1], t[off], c) >= 0) {  // a frequent pair's
      items[n++] = suffix_item3(k[off - 2], t[off - 1], k[off]);
    }
  }
  return n;
}
// The word of `lines` that holds line `li` of the cache (r * suffix_row_lines + j) in plane p; the
// line's bit in it is li & 31.
FDSPEC_HD int64_t suffix_line_word(const SuffixCache& c, uint32_t plane, int64_t li) {
  return static_cast<int64_t>(plane) * suffix_line_words(c.num_rows, c.width) + (li >> 5);
}
// Calls or_word(word, bit) for every bit of the line filter that position `off` of row r sets (its
// items' planes in its line; the row's tokens and keys written up to off): the insert's marking,
// one definition for the CPU (plain ORs) and the GPU (atomic ORs).
template <typename OrWord>
FDSPEC_HD void suffix_mark_position(const SuffixCache& c, int64_t r, int64_t off, OrWord or_word) {
  uint64_t items[3];
  const int n = suffix_line_items(c.tokens + r * c.width, c.keys + r * c.width, off, c, items);
  const int64_t li = r * suffix_row_lines(c.width) + suffix_line_of(off, c.key_len);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < kSuffixLineHashes; ++j) {
      or_word(suffix_line_word(c, suffix_item_plane(items[i], j, c.line_planes), li),
              1u << (li & 31));
    }
  }
}
// Calls and_word(word, mask) for the words of one plane that hold row r's lines, the mask clearing
// exactly those lines' bits (a row's lines may share a word with its neighbours').
template <typename AndWord>
FDSPEC_HD void suffix_row_line_masks(int64_t r, int64_t width, AndWord and_word) {
  const int64_t Lr = suffix_row_lines(width);
  for (int64_t li = r * Lr, end = (r + 1) * Lr; li < end;) {
    const int64_t stop = ((li >> 5) + 1) * 32 < end ? ((li >> 5) + 1) * 32 : end;
    const int n = static_cast<int>(stop - li);
    const uint32_t m = (n == 32 ? 0xffffffffu : ((1u << n) - 1u)) << (li & 31);
    and_word(li >> 5, ~m);
    li = stop;
  }
}

struct SuffixCacheInsertParams {
  const int64_t* token_ids_all;     // [>= B, W] int64 (the layout of suffix_match)
  int64_t token_ids_stride;         // W
  const int64_t* prompt_lens;       // [B] int64
  const int64_t* step_idx;          // [B] int64
  const int32_t* seq_lens_encoder;  // [B] int32: > 0 prefill
  const int32_t* seq_lens_decoder;  // [B] int32: 0 empty
  int64_t* slots;                   // [>= B] int64, in place: slot states
  int64_t* counter;                 // [1] int64, in place: requests begun so far
  int64_t batch;                    // B
  SuffixCache cache;
};

struct SuffixCacheQueryParams {
  SuffixMatchParams m;  // the local op's inputs and outputs (its walk runs last)
  SuffixCache cache;    // read only
  int32_t* source;      // [>= B] int32, out: 0 the local draft won, 1 the global one
  int64_t* cand;        // [>= B, kSuffixCandLists * M] int64 scratch: candidate lists
  int32_t* stat;        // [>= B + 1, kSuffixStatCols] int32 scratch
  uint32_t* line_mask;  // [suffix_line_words(R, width)] scratch: the lines the scans read
  int max_occurrences;  // M
};

// The key of the G tokens t[0 .. G-1]. With G = 1 and a token in [0, 2^31) it is the token itself:
// equal keys then mean equal tokens, and the scan needs no token read to confirm a hit
// (suffix_cache_key_exact). Otherwise SplitMix64 steps over the tokens (suffix_mix64), the high
// half kept, with the sign bit set when G = 1 so that no hashed key equals an exact one.
FDSPEC_HD int32_t suffix_cache_key(const int64_t* t, int G) {
  if (G == 1 && t[0] >= 0 && t[0] <= INT32_MAX) return static_cast<int32_t>(t[0]);
  uint64_t h = 0x9e3779b97f4a7c15ULL;
  for (int j = 0; j < G; ++j) h = suffix_mix64(h ^ static_cast<uint64_t>(t[j]));
  const int32_t k = static_cast<int32_t>(h >> 32);
  return G == 1 ? static_cast<int32_t>(static_cast<uint32_t>(k) | 0x80000000u) : k;
}
// Whether key (of G tokens) is the token itself: equal exact keys are equal tokens.
FDSPEC_HD bool suffix_cache_key_exact(int32_t key, int G) { return G == 1 && key >= 0; }

// A verified occurrence: request number (40 bits), offset of its last token (16), match length (8).
// Ordering candidates by value orders them by (request number, offset): the tie rule's "earliest".
FDSPEC_HD int64_t suffix_cand_pack(int64_t q, int64_t off, int l) {
  return (q << 24) | (off << 8) | static_cast<int64_t>(l);
}
FDSPEC_HD int64_t suffix_cand_req(int64_t c) { return c >> 24; }
FDSPEC_HD int64_t suffix_cand_off(int64_t c) { return (c >> 8) & 0xffff; }
FDSPEC_HD int suffix_cand_len(int64_t c) { return static_cast<int>(c & 0xff); }

// A closing slot: empty this step (not prefill, seq_lens_decoder == 0) while its state is still a
// request (the one that finished at the previous step). Its row still holds that request,
// prompt_lens and step_idx included, after the runner's update: the tokens accepted at its last
// step are appended before the slot is freed (Arctic adds them after verification; the op sees them
// one call later).
FDSPEC_HD bool suffix_is_closing(int32_t enc, int32_t dec, int64_t state) {
  return enc <= 0 && dec == 0 && state >= 0;
}

// Decoding slots (the kinds of suffix_match, docs/contract/ngram.md) begin a request if free, then
// append their new tokens; closing slots append their last tokens, then are free; prefill and other
// empty slots free their state (their previous response, if any, stays cached).
void suffix_cache_insert_cpu(const SuffixCacheInsertParams& p);
// finished[b] != 0 detaches slot b (its response stays cached; nothing more is added until the slot
// prefills or empties).
void suffix_cache_finish_cpu(const int32_t* finished, int64_t* slots, int64_t batch);
// Evicts every cached response but the newest `keep` (keep >= 0; 0 empties the cache): rows of
// requests numbered below counter - keep are cleared. Slots writing to them detach at their next
// insert. Eviction also happens on its own as requests begin (the ring, first in first out).
void suffix_cache_evict_cpu(const SuffixCache& cache, const int64_t* counter, int64_t keep);
// suffix_match's local search, then the global search from the same context, the winner per slot
// (local if its score >= the global's), then suffix_match's budget walk on the winners.
void suffix_cache_query_cpu(const SuffixCacheQueryParams& p);
// A decode step's two calls in one: the insert, then the query (same inputs, same cache).
void suffix_cache_step_cpu(const SuffixCacheInsertParams& ins, const SuffixCacheQueryParams& q);

#ifdef FDSPEC_WITH_CUDA
cudaError_t suffix_cache_insert_gpu(const SuffixCacheInsertParams& p, cudaStream_t stream);
cudaError_t suffix_cache_finish_gpu(const int32_t* finished, int64_t* slots, int64_t batch,
                                    cudaStream_t stream);
cudaError_t suffix_cache_query_gpu(const SuffixCacheQueryParams& p, cudaStream_t stream);
// The global search's forms (launch_plan.h) and the dynamic shared memory per block of the query's
// scan over `batch` slots (the launch fails where the device has less).
SuffixSearchForms suffix_cache_search_forms();
size_t suffix_cache_scan_smem(int64_t batch);
// The largest batch whose query fits the current device's shared memory per block (as the host
// believes it: launch_plan.h): kMaxSuffixCacheBatch on sm_80 / sm_90, 1474 on sm_86 / sm_89.
int64_t suffix_cache_max_batch(const DeviceLimits& dev);
cudaError_t suffix_cache_max_batch_gpu(int64_t* max_batch);
// The insert, then the query, as the two calls one after the other, but faster: with nothing
// between them on the stream, the query's first kernel reads the step's inputs (which the insert
// does not write) beside the insert, before it waits for the insert's end.
cudaError_t suffix_cache_step_gpu(const SuffixCacheInsertParams& ins,
                                  const SuffixCacheQueryParams& q, cudaStream_t stream);
cudaError_t suffix_cache_evict_gpu(const SuffixCache& cache, const int64_t* counter, int64_t keep,
                                   cudaStream_t stream);
#ifdef FDSPEC_PROFILE
// Profile build only (common/profiler.cuh): the global search's stage clocks of its last launch
// over `blocks` slots, and the first scan's per-warp phases since the last call.
void suffix_cache_profile_print(int64_t blocks, double clock_khz);
void suffix_cache_scan_profile_print(double clock_khz);
#endif
#endif

}  // namespace fdspec
