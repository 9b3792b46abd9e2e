// suffix_cache: the cache's state as one workspace of bytes, and its layout, computed here and
// nowhere else from the configured bounds (the binding, the Paddle-free harness and bench, and the
// Python SuffixCache through the op suffix_cache_layout). No Paddle include. Contract:
// docs/contract/suffix.md, "The ops".
#pragma once

#include <cstdint>
#include <string>

#include "suffix_cache/suffix_cache.h"

namespace fdspec {

// The bounds a cache is allocated for, in the order of the ops' `cache_config` attribute.
struct SuffixCacheConfig {
  int64_t rows;             // R, 1 .. kMaxSuffixCacheRows: cached responses
  int64_t width;            // 1 .. kMaxSuffixCacheWidth: tokens of one response cached
  int64_t slots;            // S >= 1: the largest batch of a call
  int64_t key_len;          // G, 1 .. kMaxSuffixCacheKeyLen
  int64_t max_occurrences;  // M, kMinSuffixCacheOccurrences .. kMaxSuffixCacheOccurrences
  int64_t vocab;            // V, 1 .. kMaxSuffixCacheVocab: token ids counted (G = 1)
  int64_t pair_vocab;       // F, 0 .. kMaxSuffixCachePairVocab: pairs of ids counted (G = 1)
  int64_t line_planes;      // P, 0 or a power of two in [32, 32768]: bits of a line's filter
};
constexpr int kSuffixCacheConfigFields = 8;

// The parts of the state, in the order they lie in it.
enum SuffixCachePart : int {
  kSuffixPartTokens,    // int64 [R, width]
  kSuffixPartKeys,      // int32 [R, width]
  kSuffixPartRows,      // int64 [R, 2]
  kSuffixPartCounts,    // int32 [V] (G = 1; [1] otherwise)
  kSuffixPartPairs,     // int32 [F, F] (G = 1; [1, 1] otherwise)
  kSuffixPartLines,     // int32 [P, suffix_line_words(R, width)]
  kSuffixPartSlots,     // int64 [S]
  kSuffixPartCounter,   // int64 [1]
  kSuffixPartCand,      // int64 [S, kSuffixCandLists * M]: query scratch
  kSuffixPartStat,      // int32 [S + 1, kSuffixStatCols]: query scratch (16-byte rows)
  kSuffixPartLineMask,  // int32 [suffix_line_words(R, width)]: query scratch
  kSuffixParts
};
constexpr int64_t kSuffixPartAlign = 256;  // every part starts on a 256-byte boundary

struct SuffixCacheLayout {
  int64_t offset[kSuffixParts];  // bytes from the state's start
  int64_t bytes[kSuffixParts];
  int64_t total;       // the state's size in bytes
  int64_t line_bytes;  // bytes per line of 32 cached positions (tokens, keys, filter)
};

// "" if the configuration is valid, else what is wrong with it, naming the bound.
std::string suffix_cache_config_error(const SuffixCacheConfig& c);
// The layout of a valid configuration.
SuffixCacheLayout suffix_cache_layout(const SuffixCacheConfig& c);

// The kernels' view of a state at `base` (16-byte aligned), laid out by suffix_cache_layout(c).
struct SuffixCacheStateView {
  SuffixCache cache;
  int64_t* slots;
  int64_t* counter;
  int64_t* cand;
  int32_t* stat;
  uint32_t* line_mask;
  int max_occurrences;
};
SuffixCacheStateView suffix_cache_state_view(const SuffixCacheConfig& c, uint8_t* base);

// The state of an empty cache (host bytes of suffix_cache_layout(c).total): every row empty, every
// slot free, tokens -1, everything else 0.
void suffix_cache_state_init(const SuffixCacheConfig& c, uint8_t* base);

}  // namespace fdspec
