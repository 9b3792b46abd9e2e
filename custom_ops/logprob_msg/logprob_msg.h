// Logprob messages (docs/contract/transport.md): the one definition of the limits, of the receive
// layout that upstream's token processor reads, and of the wire format that the sender ops write
// and the receiver op reads. Host code only: no Paddle, no CUDA include (the bindings copy GPU
// inputs to the host).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/fdspec_common.h"

namespace fdspec {
namespace logprob_msg {

// ---- Limits (upstream's MAX_BSZ, MAX_DRAFT_TOKEN_NUM, K)
// -------------------------------------------
constexpr int64_t kMaxBsz = 512;        // slots per message
constexpr int64_t kMaxDraftTokens = 6;  // token rows per slot
constexpr int64_t kTopK =
    kMaxLogprobTopK;  // top-k logprobs per token: what the logprob path computes
static_assert(kTopK == 20, "upstream's receive layout has K = 20 columns after the token's own");
constexpr int64_t kColumns = kTopK + 1;  // column 0: the token itself, then its top-k
constexpr int64_t kSlotCells = kMaxDraftTokens * kColumns;

// ---- Receive layout (speculate_get_output_topk writes it in place)
// --------------------------------- output_tokens: [0] stop flag, [1] flag word, [2] batch, [3 + i]
// token count of slot i, then token k of row j of slot i at kTokensOffset + i * kSlotCells + j *
// kColumns + k. output_scores: the same cell at i * kSlotCells + j * kColumns + k; output_ranks: i
// * 6 + j.
constexpr int64_t kStopFlagIndex = 0;
constexpr int64_t kFlagWordIndex = 1;
constexpr int64_t kBatchIndex = 2;
constexpr int64_t kCountsOffset = 3;
constexpr int64_t kTokensOffset = kCountsOffset + kMaxBsz;
constexpr int64_t kOutputTokensLen = kTokensOffset + kMaxBsz * kSlotCells;
constexpr int64_t kOutputScoresLen = kMaxBsz * kSlotCells;
constexpr int64_t kOutputRanksLen = kMaxBsz * kMaxDraftTokens;
static_assert(kOutputTokensLen == 3 + 512 + 512 * 6 * 21,
              "output_tokens length of docs/contract/transport.md");

// [0] when no message was read (upstream's value; INFERENCE_MSG_ID may therefore not be 2).
constexpr int64_t kNoMessage = -2;
// The filler of every cell of the batch's slots that the message does not carry: receivers never
// see data of an earlier message. Same values as the logprob padding rows of
// docs/contract/logprobs.md.
constexpr int64_t kFillToken = -1;
constexpr float kFillScore = 0.0f;
constexpr int64_t kFillRank = 0;

// ---- Flag word [1] = (message_flag & 0xFF) | (columns << 8)
// ------------------------------------------
constexpr int kFlagBits = 8;
constexpr int32_t kFlagMask = 0xFF;
constexpr int32_t kColumnsMask = 0xFFFF;  // 16 bits of columns (bits 8..23)
constexpr int32_t kMessageFlagTarget = 3;
constexpr int32_t kMessageFlagDraft = 4;
// The count a preempted slot reports (upstream's PREEMPTED_TOKEN_ID), in both save ops.
constexpr int32_t kPreemptedCount = -9;
static_assert(kColumns <= kColumnsMask, "the column count must fit the flag word");

constexpr int32_t pack_flag_word(int32_t message_flag, int32_t columns) {
  return (message_flag & kFlagMask) | ((columns & kColumnsMask) << kFlagBits);
}
constexpr int32_t flag_of(int32_t word) { return word & kFlagMask; }
constexpr int32_t columns_of(int32_t word) { return (word >> kFlagBits) & kColumnsMask; }

// ---- Wire format of one message
// ------------------------------------------------------------------ Only what the step produced
// travels, so the size grows with the content (not with kMaxBsz):
//
//   WireHeader                      16 bytes
//   int32  counts[batch]            the count of each slot as the receiver reports it in [3 + i]
//   int32  tokens[R][M]             R = sum over slots of rows(count), M = columns; row order =
//   slot float  scores[R][M]               order, then token order inside the slot int32  ranks[R]
//
// rows(count) = count clamped to [0, kMaxDraftTokens]: negative counts (preempted: -9) carry no
// row. Token ids and ranks travel as int32 (as upstream's layout); the senders reject values
// outside it. Every field is 4-byte aligned, so the receiver reads the arrays in place.
constexpr uint32_t kWireMagic = 0x31504c46u;  // "FLP1": format version 1
static_assert(sizeof(float) == 4 && sizeof(int32_t) == 4, "4-byte fields on the wire");

struct WireHeader {
  uint32_t magic;
  int32_t stop_flag;  // +-INFERENCE_MSG_ID
  int32_t flag_word;  // pack_flag_word(message_flag, M)
  int32_t batch;      // slots that follow, <= kMaxBsz
};
static_assert(sizeof(WireHeader) == 16, "wire header layout");

constexpr int64_t rows_of(int64_t count) {
  return count < 0 ? 0 : (count > kMaxDraftTokens ? kMaxDraftTokens : count);
}
constexpr size_t wire_bytes(int64_t batch, int64_t rows, int64_t columns) {
  return sizeof(WireHeader) + sizeof(int32_t) * static_cast<size_t>(batch) +
         static_cast<size_t>(rows) *
             (static_cast<size_t>(columns) * (sizeof(int32_t) + sizeof(float)) + sizeof(int32_t));
}
// The largest message: every slot full, every column. The receiver's buffers are sized from it.
constexpr size_t kMaxWireBytes = wire_bytes(kMaxBsz, kMaxBsz* kMaxDraftTokens, kColumns);
static_assert(kMaxWireBytes == 16 + 4 * 512 + 3072 * (21 * 8 + 4), "largest message size");

// ---- Sender
// ------------------------------------------------------------------------------------------
enum class SaveMode {
  // speculate_save_output_topk: slot i sends token_num_per_batch[i] rows starting at row
  // cu_batch_token_offset[i] of every input (0 while its chunked prefill runs; the count -9 and no
  // row when preempted).
  kAcceptedTokens,
  // mtp_save_first_token_with_topk: token_num_per_batch[i] + 1 rows (0 during chunked prefill or
  // when
  // token_num is 0; the count -9 and no row when preempted); row 0 has the full top-k, the other
  // rows
  // only their token id (filler elsewhere). Tokens come from sampled_token_ids[i, j].
  kFirstTokenWithDrafts,
};

// Host pointers of one save call. N = sampled rows, R = logprob rows, M = columns.
struct SaveParams {
  SaveMode mode;
  const int64_t* sampled_token_ids;      // kAcceptedTokens: [N]; kFirstTokenWithDrafts: [>= B, D]
  int64_t sampled_numel;                 // N, or rows * D
  int64_t sampled_stride;                // D (kFirstTokenWithDrafts only)
  const int64_t* logprob_token_ids;      // [R, M]: column 0 is ignored (the sampled token is sent)
  const float* logprob_scores;           // [R, M]
  const int64_t* logprob_ranks;          // [R]
  int64_t logprob_rows;                  // R
  int64_t columns;                       // M, 1 .. kColumns
  const int32_t* token_num_per_batch;    // [B]
  const int32_t* cu_batch_token_offset;  // [>= B]: first row of slot i
  const int32_t* seq_lens_decoder;       // [B]: < prompt_lens marks a chunked prefill (count 0)
  const int64_t* prompt_lens;            // [B]
  const int32_t* preempted_idx;  // [B]: 1 marks a preempted slot (upstream's last_preempted_idx)
  int64_t batch;                 // B, 1 .. kMaxBsz
  int32_t stop_flag;             // +-INFERENCE_MSG_ID
  int32_t message_flag;          // 0 .. 255
};

// Writes the message of `p` at `out` (capacity `capacity` >= kMaxWireBytes) and returns its size in
// `*bytes`. Returns an empty string, or the reason the inputs cannot be sent (a count beyond
// kMaxDraftTokens, a row outside a tensor, an id outside int32), in which case nothing is sent.
std::string pack_message(const SaveParams& p, uint8_t* out, size_t capacity, size_t* bytes);

// ---- Receiver
// ----------------------------------------------------------------------------------------
struct ReceiveBuffers {
  int64_t* tokens;  // [kOutputTokensLen]
  float* scores;    // [kOutputScoresLen]
  int64_t* ranks;   // [kOutputRanksLen]
};

// Checks the whole message first (nothing is written when it is malformed; the error says why),
// then fills [0], [1], [2], [3 + i] and the complete 6 x 21 block and 6 ranks of every slot i <
// batch: the message's cells where it has them, the filler elsewhere. Slots >= batch are left as
// they are.
std::string unpack_message(const uint8_t* msg, size_t bytes, const ReceiveBuffers& out);

// [0] = kNoMessage, [1] = [2] = 0 (upstream's "read none").
void mark_no_message(const ReceiveBuffers& out);

}  // namespace logprob_msg
}  // namespace fdspec

// For the Python side (ctypes: fastdeploy_spec/transport/layout.py), so that it reads the layout
// from this header and nowhere else, by name: fills names[i], values[i] for i < min(n, count) and
// returns count, the number of entries (logprob_msg.cc lists them; n = 0 asks for the count alone).
extern "C" int fdspec_logprob_layout(const char** names, int64_t* values, int n);
