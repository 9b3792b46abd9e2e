// Logprob messages: packing on the sender, checking and unpacking into the receive layout on the
// receiver. The wire format and the layout are defined in logprob_msg.h.
#include "logprob_msg/logprob_msg.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace fdspec {
namespace logprob_msg {
namespace {

// The wire buffer is raw bytes: fields are read and written through memcpy, which compilers turn
// into plain loads and stores, so no access breaks the aliasing rules whatever the buffer's origin.
inline void store_i32(uint8_t* p, int32_t v) { std::memcpy(p, &v, sizeof(v)); }
inline void store_f32(uint8_t* p, float v) { std::memcpy(p, &v, sizeof(v)); }
inline int32_t load_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline bool fits_i32(int64_t v) {
  return v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max();
}

std::string at(const char* name, int64_t i) {
  return std::string(name) + "[" + std::to_string(i) + "]";
}

// The count that slot i reports to the receiver ([3 + i]); rows_of(count) rows follow on the wire.
int64_t slot_count(const SaveParams& p, int64_t i) {
  const bool prefilling = p.seq_lens_decoder[i] < p.prompt_lens[i];
  const int64_t token_num = p.token_num_per_batch[i];
  if (p.preempted_idx[i] == 1) return kPreemptedCount;
  if (p.mode == SaveMode::kAcceptedTokens) return prefilling ? 0 : token_num;
  return (prefilling || token_num == 0) ? 0 : token_num + 1;
}

// Checks that the rows slot i sends lie inside the inputs; returns the reason when they do not.
std::string check_slot_rows(const SaveParams& p, int64_t i, int64_t rows) {
  const int64_t first = p.cu_batch_token_offset[i];
  const std::string where = at("cu_batch_token_offset", i) + " = " + std::to_string(first);
  if (p.mode == SaveMode::kAcceptedTokens) {
    if (first < 0 || first + rows > p.sampled_numel || first + rows > p.logprob_rows) {
      return "slot " + std::to_string(i) + " sends rows " + where + " .. +" + std::to_string(rows) +
             ", outside sampled_token_ids (" + std::to_string(p.sampled_numel) +
             " rows) or the logprob tensors (" + std::to_string(p.logprob_rows) + " rows)";
    }
    return {};
  }
  if (rows > p.sampled_stride || (i + 1) * p.sampled_stride > p.sampled_numel) {
    return "slot " + std::to_string(i) + " sends " + std::to_string(rows) +
           " tokens but sampled_token_ids has " + std::to_string(p.sampled_stride) +
           " columns (and " +
           std::to_string(p.sampled_numel / std::max<int64_t>(p.sampled_stride, 1)) + " rows)";
  }
  if (first < 0 || first >= p.logprob_rows) {
    return "slot " + std::to_string(i) + " reads logprob row " + where +
           ", outside the logprob tensors (" + std::to_string(p.logprob_rows) + " rows)";
  }
  return {};
}

}  // namespace

std::string pack_message(const SaveParams& p, uint8_t* out, size_t capacity, size_t* bytes) {
  if (p.batch < 1 || p.batch > kMaxBsz) {
    return "batch " + std::to_string(p.batch) +
           " must be in [1, MAX_BSZ = " + std::to_string(kMaxBsz) + "]";
  }
  if (p.columns < 1 || p.columns > kColumns) {
    return "logprob_token_ids has " + std::to_string(p.columns) + " columns; 1 .. " +
           std::to_string(kColumns) + " (K + 1) are supported";
  }
  if (p.message_flag < 0 || p.message_flag > kFlagMask) {
    return "message_flag " + std::to_string(p.message_flag) +
           " must be in [0, 255] (8 bits of [1])";
  }

  // Pass 1: counts, and every bound, before a byte of payload is written.
  const int64_t B = p.batch;
  const int64_t M = p.columns;
  uint8_t* counts = out + sizeof(WireHeader);
  int64_t total_rows = 0;
  for (int64_t i = 0; i < B; ++i) {
    const int64_t count = slot_count(p, i);
    if (count > kMaxDraftTokens || !fits_i32(count)) {
      return "slot " + std::to_string(i) + " has " + std::to_string(count) + " tokens (from " +
             at("token_num_per_batch", i) +
             "); at most MAX_DRAFT_TOKENS = " + std::to_string(kMaxDraftTokens) + " fit a slot";
    }
    const int64_t rows = rows_of(count);
    if (rows > 0) {
      std::string err = check_slot_rows(p, i, rows);
      if (!err.empty()) return err;
    }
    store_i32(counts + 4 * i, static_cast<int32_t>(count));
    total_rows += rows;
  }
  const size_t size = wire_bytes(B, total_rows, M);
  if (size > capacity) return "internal error: message larger than its buffer";

  // Pass 2: the rows, in slot order.
  uint8_t* tok = counts + 4 * B;
  uint8_t* score = tok + 4 * total_rows * M;
  uint8_t* rank = score + 4 * total_rows * M;
  for (int64_t i = 0; i < B; ++i) {
    const int64_t rows = rows_of(load_i32(counts + 4 * i));
    const int64_t first = p.cu_batch_token_offset[i];
    for (int64_t j = 0; j < rows; ++j) {
      const bool full_row = p.mode == SaveMode::kAcceptedTokens || j == 0;
      const int64_t lp_row = p.mode == SaveMode::kAcceptedTokens ? first + j : first;
      const int64_t token = p.mode == SaveMode::kAcceptedTokens
                                ? p.sampled_token_ids[first + j]
                                : p.sampled_token_ids[i * p.sampled_stride + j];
      if (!fits_i32(token)) return "sampled token " + std::to_string(token) + " does not fit int32";
      // A row is converted in a local array with a branch-free range check, so that the loop
      // vectorises; scores are float32 on both sides and are copied as they are.
      int32_t row_ids[kColumns];
      row_ids[0] = static_cast<int32_t>(token);
      if (full_row) {
        const int64_t* ids = p.logprob_token_ids + lp_row * M;
        bool in_range = true;
        for (int64_t k = 1; k < M; ++k) {
          in_range &= fits_i32(ids[k]);
          row_ids[k] = static_cast<int32_t>(ids[k]);
        }
        if (!in_range) return at("logprob_token_ids", lp_row) + " holds an id outside int32";
        const int64_t r = p.logprob_ranks[lp_row];
        if (!fits_i32(r)) return at("logprob_ranks", lp_row) + " does not fit int32";
        std::memcpy(score, p.logprob_scores + lp_row * M, 4 * M);
        store_i32(rank, static_cast<int32_t>(r));
      } else {
        std::fill(row_ids + 1, row_ids + M, static_cast<int32_t>(kFillToken));
        for (int64_t k = 0; k < M; ++k) store_f32(score + 4 * k, kFillScore);
        store_i32(rank, static_cast<int32_t>(kFillRank));
      }
      std::memcpy(tok, row_ids, 4 * M);
      tok += 4 * M;
      score += 4 * M;
      rank += 4;
    }
  }

  const WireHeader h{kWireMagic, p.stop_flag,
                     pack_flag_word(p.message_flag, static_cast<int32_t>(M)),
                     static_cast<int32_t>(B)};
  std::memcpy(out, &h, sizeof(h));
  *bytes = size;
  return {};
}

std::string unpack_message(const uint8_t* msg, size_t bytes, const ReceiveBuffers& out) {
  WireHeader h;
  if (bytes < sizeof(h)) return "malformed message: " + std::to_string(bytes) + " bytes";
  std::memcpy(&h, msg, sizeof(h));
  if (h.magic != kWireMagic) return "malformed message: not a fastdeploy_spec logprob message";
  const int64_t B = h.batch;
  const int64_t M = columns_of(h.flag_word);
  if (B < 0 || B > kMaxBsz) return "malformed message: batch " + std::to_string(B) + " > MAX_BSZ";
  if (M < 1 || M > kColumns) {
    return "malformed message: " + std::to_string(M) + " top-k columns in [1] (at most " +
           std::to_string(kColumns) + ")";
  }
  if (bytes < sizeof(h) + 4 * static_cast<size_t>(B)) return "malformed message: truncated counts";
  const uint8_t* counts = msg + sizeof(h);
  int64_t total_rows = 0;
  for (int64_t i = 0; i < B; ++i) {
    const int64_t count = load_i32(counts + 4 * i);
    if (count > kMaxDraftTokens) return "malformed message: slot count above MAX_DRAFT_TOKENS";
    total_rows += rows_of(count);
  }
  if (bytes != wire_bytes(B, total_rows, M)) {
    return "malformed message: " + std::to_string(bytes) + " bytes, its header announces " +
           std::to_string(wire_bytes(B, total_rows, M));
  }

  out.tokens[kStopFlagIndex] = h.stop_flag;
  out.tokens[kFlagWordIndex] = pack_flag_word(flag_of(h.flag_word), static_cast<int32_t>(M));
  out.tokens[kBatchIndex] = B;
  const uint8_t* tok = counts + 4 * B;
  const uint8_t* score = tok + 4 * total_rows * M;
  const uint8_t* rank = score + 4 * total_rows * M;
  for (int64_t i = 0; i < B; ++i) {
    const int64_t count = load_i32(counts + 4 * i);
    const int64_t rows = rows_of(count);
    out.tokens[kCountsOffset + i] = count;
    int64_t* slot_tokens = out.tokens + kTokensOffset + i * kSlotCells;
    float* slot_scores = out.scores + i * kSlotCells;
    int64_t* slot_ranks = out.ranks + i * kMaxDraftTokens;
    for (int64_t j = 0; j < rows; ++j) {
      int64_t* t = slot_tokens + j * kColumns;
      float* s = slot_scores + j * kColumns;
      for (int64_t k = 0; k < M; ++k) t[k] = load_i32(tok + 4 * k);
      std::memcpy(s, score, 4 * M);
      std::fill(t + M, t + kColumns, kFillToken);
      std::fill(s + M, s + kColumns, kFillScore);
      slot_ranks[j] = load_i32(rank);
      tok += 4 * M;
      score += 4 * M;
      rank += 4;
    }
    std::fill(slot_tokens + rows * kColumns, slot_tokens + kSlotCells, kFillToken);
    std::fill(slot_scores + rows * kColumns, slot_scores + kSlotCells, kFillScore);
    std::fill(slot_ranks + rows, slot_ranks + kMaxDraftTokens, kFillRank);
  }
  return {};
}

void mark_no_message(const ReceiveBuffers& out) {
  out.tokens[kStopFlagIndex] = kNoMessage;
  out.tokens[kFlagWordIndex] = 0;
  out.tokens[kBatchIndex] = 0;
}

}  // namespace logprob_msg
}  // namespace fdspec

namespace {

struct LayoutEntry {
  const char* name;  // the field of fastdeploy_spec.transport.Layout it fills
  int64_t value;
};

using namespace fdspec::logprob_msg;
constexpr LayoutEntry kLayoutEntries[] = {
    {"max_bsz", kMaxBsz},
    {"max_draft_tokens", kMaxDraftTokens},
    {"k", kTopK},
    {"tokens_offset", kTokensOffset},
    {"no_message", kNoMessage},
    {"flag_target", kMessageFlagTarget},
    {"flag_draft", kMessageFlagDraft},
    {"preempted_count", kPreemptedCount},
    {"fill_token", kFillToken},
    {"fill_rank", kFillRank},
    {"flag_bits", kFlagBits},
    {"flag_mask", kFlagMask},
    {"columns_mask", kColumnsMask},
};
// The Python Layout has exactly these 13 fields (it refuses a library that names others); the
// receive lengths it derives (tokens, scores, ranks) hold only while the offsets are these.
static_assert(sizeof(kLayoutEntries) / sizeof(kLayoutEntries[0]) == 13,
              "a layout entry was added or removed: update fastdeploy_spec/transport/layout.py");
static_assert(kTokensOffset == kCountsOffset + kMaxBsz &&
                  kOutputScoresLen == kMaxBsz * kSlotCells &&
                  kOutputRanksLen == kMaxBsz * kMaxDraftTokens,
              "Layout.tokens_len, scores_len and ranks_len derive the receive lengths this way");

}  // namespace

extern "C" int fdspec_logprob_layout(const char** names, int64_t* values, int n) {
  const int count = static_cast<int>(sizeof(kLayoutEntries) / sizeof(kLayoutEntries[0]));
  for (int i = 0; i < n && i < count; ++i) {
    names[i] = kLayoutEntries[i].name;
    values[i] = kLayoutEntries[i].value;
  }
  return count;
}
