// suffix_cache: the state's layout (suffix_cache_state.h; docs/contract/suffix.md, "The ops").
#include "suffix_cache/suffix_cache_state.h"

#include <cstring>

namespace fdspec {
namespace {

std::string outside(const char* name, int64_t v, const std::string& range) {
  return std::string(name) + " must be " + range + ", got " + std::to_string(v);
}

// The elements of the counts and the pair counts: V and F * F with G = 1, one each otherwise.
int64_t count_elems(const SuffixCacheConfig& c) { return c.key_len == 1 ? c.vocab : 1; }
int64_t pair_dim(const SuffixCacheConfig& c) { return c.key_len == 1 ? c.pair_vocab : 1; }

}  // namespace

std::string suffix_cache_config_error(const SuffixCacheConfig& c) {
  if (c.rows < 1 || c.rows > kMaxSuffixCacheRows) return outside("rows", c.rows, "in [1, 2^30]");
  if (c.width < 1 || c.width > kMaxSuffixCacheWidth)
    return outside("width", c.width, "in [1, 65536]");
  if (c.slots < 1 || c.slots > kMaxSuffixCacheRows)
    return outside("slots", c.slots, "in [1, 2^30]");
  if (c.key_len < 1 || c.key_len > kMaxSuffixCacheKeyLen) {
    return outside("key_len", c.key_len, "in [1, " + std::to_string(kMaxSuffixCacheKeyLen) + "]");
  }
  if (c.max_occurrences < kMinSuffixCacheOccurrences ||
      c.max_occurrences > kMaxSuffixCacheOccurrences) {
    return outside("max_occurrences", c.max_occurrences, "in [32, 1024]");
  }
  if (c.vocab < 1 || c.vocab > kMaxSuffixCacheVocab)
    return outside("vocab_size", c.vocab, "in [1, 2^31]");
  if (c.pair_vocab < 0 || c.pair_vocab > kMaxSuffixCachePairVocab) {
    return outside("pair_vocab", c.pair_vocab, "in [0, 32768]");
  }
  const int64_t P = c.line_planes;
  if (P != 0 &&
      (P < kMinSuffixCacheLinePlanes || P > kMaxSuffixCacheLinePlanes || (P & (P - 1)) != 0)) {
    return outside("line_planes", P, "0 or a power of two in [32, 32768]");
  }
  return "";
}

SuffixCacheLayout suffix_cache_layout(const SuffixCacheConfig& c) {
  const int64_t positions = c.rows * c.width, words = suffix_line_words(c.rows, c.width);
  SuffixCacheLayout l{};
  l.bytes[kSuffixPartTokens] = 8 * positions;
  l.bytes[kSuffixPartKeys] = 4 * positions;
  l.bytes[kSuffixPartRows] = 16 * c.rows;
  l.bytes[kSuffixPartCounts] = 4 * count_elems(c);
  l.bytes[kSuffixPartPairs] = 4 * pair_dim(c) * pair_dim(c);
  l.bytes[kSuffixPartLines] = 4 * c.line_planes * words;
  l.bytes[kSuffixPartSlots] = 8 * c.slots;
  l.bytes[kSuffixPartCounter] = 8;
  l.bytes[kSuffixPartCand] = 8 * c.slots * kSuffixCandLists * c.max_occurrences;
  l.bytes[kSuffixPartStat] = 4 * (c.slots + 1) * kSuffixStatCols;
  l.bytes[kSuffixPartLineMask] = 4 * words;
  int64_t at = 0;
  for (int p = 0; p < kSuffixParts; ++p) {
    l.offset[p] = at;
    at += (l.bytes[p] + kSuffixPartAlign - 1) / kSuffixPartAlign * kSuffixPartAlign;
  }
  l.total = at;
  l.line_bytes = kSuffixLineLen * 12 + c.line_planes / 8;
  return l;
}

SuffixCacheStateView suffix_cache_state_view(const SuffixCacheConfig& c, uint8_t* base) {
  const SuffixCacheLayout l = suffix_cache_layout(c);
  auto at = [&](int part) { return base + l.offset[part]; };
  // Counts that could overflow an int32 (2^31 cached positions or more) are not kept.
  const bool counted = c.rows * c.width < (int64_t{1} << 31);
  SuffixCacheStateView v;
  v.cache =
      SuffixCache{reinterpret_cast<int64_t*>(at(kSuffixPartTokens)),
                  reinterpret_cast<int32_t*>(at(kSuffixPartKeys)),
                  reinterpret_cast<int64_t*>(at(kSuffixPartRows)),
                  c.rows,
                  c.width,
                  static_cast<int>(c.key_len),
                  reinterpret_cast<int32_t*>(at(kSuffixPartCounts)),
                  counted ? count_elems(c) : 0,
                  pair_dim(c) > 0 ? reinterpret_cast<int32_t*>(at(kSuffixPartPairs)) : nullptr,
                  counted ? pair_dim(c) : 0,
                  c.line_planes > 0 ? reinterpret_cast<uint32_t*>(at(kSuffixPartLines)) : nullptr,
                  c.line_planes};
  v.slots = reinterpret_cast<int64_t*>(at(kSuffixPartSlots));
  v.counter = reinterpret_cast<int64_t*>(at(kSuffixPartCounter));
  v.cand = reinterpret_cast<int64_t*>(at(kSuffixPartCand));
  v.stat = reinterpret_cast<int32_t*>(at(kSuffixPartStat));
  v.line_mask = reinterpret_cast<uint32_t*>(at(kSuffixPartLineMask));
  v.max_occurrences = static_cast<int>(c.max_occurrences);
  return v;
}

void suffix_cache_state_init(const SuffixCacheConfig& c, uint8_t* base) {
  const SuffixCacheLayout l = suffix_cache_layout(c);
  std::memset(base, 0, static_cast<size_t>(l.total));
  const SuffixCacheStateView v = suffix_cache_state_view(c, base);
  for (int64_t i = 0; i < c.rows * c.width; ++i) v.cache.tokens[i] = -1;
  for (int64_t r = 0; r < c.rows; ++r) v.cache.rows[2 * r] = -1;
  for (int64_t s = 0; s < c.slots; ++s) v.slots[s] = kSuffixSlotFree;
}

}  // namespace fdspec
