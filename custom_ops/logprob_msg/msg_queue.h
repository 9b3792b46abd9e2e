// System V message-queue transport of the logprob messages (docs/contract/transport.md). Host code;
// no Paddle include.
//
// A message of any size up to the receiver's maximum travels as one or more fragments, each one
// SysV message of at most min(kernel.msgmax, the queue's capacity) bytes, so default kernel limits
// (msgmax 8192) carry the largest logprob message. Nothing is dropped silently: a send that cannot
// succeed, and a message that cannot be reassembled, are errors that say why.
//
// Fragments of one message share its id and carry their index and the fragment count. A sender
// sends with mtype = its pid, holding a process-wide lock for the whole message, so the fragments
// of one message follow each other in the queue among that sender's messages. The receiver takes
// fragments of any sender and assembles one message per sender at a time, so fragments of different
// sender processes never mix, and a sender blocked on a queue filled by another's fragments is
// never starved (the receiver keeps draining them); messages are handed out in the order they
// complete. Reassembly rules (the receiver's decision, documented for callers):
//   * a fragment that does not continue its sender's message being assembled (another message id, a
//   skipped
//     index) ends that message: it is dropped and the receive raises an error naming it; a first
//     fragment that arrived that way starts the next message, which the next receive continues;
//   * a fragment whose beginning was never seen (an orphan: index > 0, e.g. after a receiver that
//   died
//     mid-message) is dropped with an error, and the later fragments of that message silently;
//   * a message whose next fragment does not arrive within the fragment timeout is dropped with an
//     error (its sender stopped mid-message).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace fdspec {
namespace msgq {

constexpr const char* kQueueIdEnv = "INFERENCE_MSG_QUEUE_ID";  // default 1
constexpr int64_t kQueueIdDefault = 1;
constexpr const char* kMsgIdEnv = "INFERENCE_MSG_ID";  // the magnitude of the stop flag, default 1
constexpr int64_t kMsgIdDefault = 1;
// Milliseconds the receiver waits for the next fragment of a message it has started.
constexpr const char* kFragmentTimeoutEnv = "FDSPEC_MSG_FRAGMENT_TIMEOUT_MS";
constexpr int64_t kFragmentTimeoutMsDefault = 10000;
// Path given to ftok() with the queue id, as upstream: ids equal modulo 256 name the same queue.
constexpr const char* kKeyPath = "/dev/shm";

constexpr uint32_t kFragmentMagic = 0x31474652u;  // "RFG1": fragment format version 1

// Follows the SysV mtype in every fragment.
struct FragmentHeader {
  uint32_t magic;
  uint32_t message_id;   // per sender process, incremented per message
  uint32_t index;        // 0 .. count - 1
  uint32_t count;        // fragments of the message (>= 1)
  uint64_t total_bytes;  // bytes of the whole message
};
static_assert(sizeof(FragmentHeader) == 24, "fragment header layout");

// Headroom the sender reserves in front of a payload: the mtype and a fragment header. A multiple
// of 8 keeps every frame (and its mtype) 8-byte aligned when the fragment size is a multiple of 8
// too.
constexpr size_t kFramePrefix = sizeof(long) + sizeof(FragmentHeader);
static_assert(kFramePrefix % 8 == 0, "frames must stay 8-byte aligned");

// INFERENCE_MSG_QUEUE_ID (default 1). Returns an error for a value that is not an integer.
std::string queue_id_from_env(int64_t* queue_id);
// The queue an op call uses: its queue_id attribute when >= 0 (a private queue), else the
// environment.
constexpr int64_t kQueueIdFromEnv = -1;
std::string resolve_queue_id(int64_t attr, int64_t* queue_id);
// INFERENCE_MSG_ID (default 1): a positive int32 other than 2 (-2 means "no message").
std::string msg_id_from_env(int32_t* msg_id);

struct SendStats {
  uint64_t bytes = 0;      // SysV message text bytes of the last message, fragment headers included
  uint32_t fragments = 0;  // SysV messages it took
};

// Sends the `payload_bytes` bytes at buf + kFramePrefix to queue `queue_id` (created if absent),
// blocking while the queue is full. `buf` is scratch: fragment headers are written over payload
// bytes already sent. Returns an empty string on success, else the cause (naming kernel.msgmax /
// kernel.msgmnb / kernel.msgmni when a kernel limit is the cause).
std::string send_message(int64_t queue_id, uint8_t* buf, size_t payload_bytes, SendStats* stats);

// Receives one whole message of at most `max_bytes` from queue `queue_id` (created if absent) and
// hands it to `consume` (under the receiver's lock, so concurrent receives cannot clobber it).
// `wait` blocks until a whole message is there (a signal ends the wait with no message). Without
// `wait` the call returns at once (after a spin of a few microseconds when a message is half-read):
// with no whole message it reports none, and keeps the fragments of an unfinished message for the
// next call, which goes on assembling it (the fragment timeout still applies across calls). Sets
// `*got` when a message was read; returns the transport's error, else consume's.
using Consumer = std::function<std::string(const uint8_t* payload, size_t bytes)>;
std::string receive_message(int64_t queue_id, bool wait, size_t max_bytes, const Consumer& consume,
                            bool* got);

}  // namespace msgq
}  // namespace fdspec

// C entry points for Python tools and tests (ctypes), so that they name queues exactly as the ops
// do. Each returns 0 on success, 1 when the queue does not exist, -errno on failure.
extern "C" {
// *queue_id = INFERENCE_MSG_QUEUE_ID or its default; -EINVAL when it is not an integer.
int fdspec_msg_queue_id_from_env(int64_t* queue_id);
int fdspec_msg_queue_remove(int64_t queue_id);
// out[0] messages queued, out[1] bytes queued, out[2] the queue's capacity (msg_qbytes).
int fdspec_msg_queue_stat(int64_t queue_id, int64_t* out);
// out[0] bytes and out[1] fragments of the last message this process sent.
int fdspec_msg_queue_last_send(int64_t* out);
}
