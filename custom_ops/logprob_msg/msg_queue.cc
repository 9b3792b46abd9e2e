// System V message-queue transport: fragmentation on the sender, reassembly on the receiver.
// The protocol and its rules are described in msg_queue.h.
#include "logprob_msg/msg_queue.h"

#include <sched.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace fdspec {
namespace msgq {
namespace {

constexpr const char* kMsgmaxPath = "/proc/sys/kernel/msgmax";
constexpr long kLinuxDefaultMsgmax = 8192;  // used when /proc cannot be read

std::string errno_str(int e) { return std::string(std::strerror(e)) + " (errno " + std::to_string(e) + ")"; }

// Strict integer parse of an environment variable: unset or empty gives `dflt`, garbage an error.
std::string env_integer(const char* var, int64_t dflt, int64_t* value) {
  const char* v = std::getenv(var);
  if (v == nullptr || *v == '\0') {
    *value = dflt;
    return {};
  }
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v, &end, 10);
  if (errno != 0 || end == v || *end != '\0') return std::string(var) + " = '" + v + "' is not an integer";
  *value = x;
  return {};
}

struct Queue {
  key_t key;
  int msqid;
};

std::string open_queue(int64_t queue_id, Queue* q) {
  // ftok() uses the low 8 bits of the id (upstream's naming, kept so both name the same queue).
  q->key = ftok(kKeyPath, static_cast<int>(queue_id));
  if (q->key == -1) {
    return std::string("ftok(\"") + kKeyPath + "\", " + std::to_string(queue_id) + ") failed: " +
           errno_str(errno) + "; the queue key is derived from " + kKeyPath + ", which must exist";
  }
  q->msqid = msgget(q->key, IPC_CREAT | 0666);
  if (q->msqid == -1) {
    const int e = errno;
    std::string why = "msgget(queue id " + std::to_string(queue_id) + ") failed: " + errno_str(e);
    if (e == ENOSPC) why += "; the system-wide number of queues (sysctl kernel.msgmni) is reached";
    if (e == EACCES) why += "; the queue exists and belongs to a user without access for this one";
    return why;
  }
  return {};
}

long read_msgmax() {
  long v = kLinuxDefaultMsgmax;
  if (FILE* f = std::fopen(kMsgmaxPath, "r")) {
    if (std::fscanf(f, "%ld", &v) != 1) v = kLinuxDefaultMsgmax;
    std::fclose(f);
  }
  return v;
}

// Largest SysV message text the sender may use on this queue: a fragment larger than kernel.msgmax is
// refused (EINVAL), and one larger than the queue's capacity (msg_qbytes, from kernel.msgmnb) would
// block forever.
struct Limits {
  long msgmax = 0;
  long qbytes = 0;
  size_t text() const { return static_cast<size_t>(std::min(msgmax, qbytes)); }
};

std::string read_limits(int msqid, Limits* l) {
  msqid_ds ds;
  if (msgctl(msqid, IPC_STAT, &ds) == -1) return "msgctl(IPC_STAT) failed: " + errno_str(errno);
  l->msgmax = read_msgmax();
  l->qbytes = static_cast<long>(ds.msg_qbytes);
  return {};
}

std::string limits_str(const Limits& l) {
  return "kernel.msgmax = " + std::to_string(l.msgmax) + ", queue capacity msg_qbytes = " +
         std::to_string(l.qbytes) + " (from kernel.msgmnb)";
}

// Payload bytes per fragment: what the limit leaves after the fragment header, rounded down to 8 bytes
// so that every frame of the in-place scheme stays aligned. 0 when the limit is too small.
size_t chunk_bytes(const Limits& l) {
  const size_t text = l.text();
  if (text < sizeof(FragmentHeader) + 8) return 0;
  return (text - sizeof(FragmentHeader)) / 8 * 8;
}

// ---- Sender state (one per process) ----------------------------------------------------------------
std::mutex g_send_mutex;
std::map<int, Limits> g_limits;  // by msqid: /proc and IPC_STAT are read once per queue
uint32_t g_next_message_id = 0;
SendStats g_last_send;

std::string send_error(int e, size_t text, const Limits& l) {
  std::string why = "msgsnd of a " + std::to_string(text) + "-byte fragment failed: " + errno_str(e);
  switch (e) {
    case EINVAL:
      return why + "; the fragment exceeds a kernel limit (" + limits_str(l) +
             ", lowered while sending?) or the queue was removed";
    case EIDRM: return why + "; the queue was removed while sending";
    case EACCES: return why + "; no write permission on the queue";
    case ENOMEM: return why + "; the kernel is out of memory";
    default: return why;
  }
}

// ---- Receiver state (one per queue key) ------------------------------------------------------------
struct Assembly {
  bool active = false;
  long mtype = 0;
  uint32_t id = 0;
  uint32_t count = 0;
  uint32_t next = 0;  // index of the next fragment expected
  uint64_t total = 0;
  uint64_t filled = 0;
  std::vector<uint8_t> data;
};

struct Receiver {
  std::vector<uint8_t> frame;  // one SysV message: mtype + fragment header + chunk
  Assembly asm_;
  bool discarding = false;  // the rest of an orphaned message is dropped without a second error
  long discard_mtype = 0;
  uint32_t discard_id = 0;
};

std::mutex g_recv_mutex;
std::map<key_t, Receiver> g_receivers;

std::string describe(long mtype, uint32_t id) {
  return "message " + std::to_string(id) + " of sender pid " + std::to_string(mtype);
}

// Checks the fragment in r.frame (n text bytes). Returns its header or an error.
std::string parse_fragment(const Receiver& r, ssize_t n, size_t max_bytes, FragmentHeader* h,
                           size_t* chunk) {
  long mtype;
  std::memcpy(&mtype, r.frame.data(), sizeof(mtype));
  if (static_cast<size_t>(n) < sizeof(FragmentHeader)) {
    return "dropped a " + std::to_string(n) + "-byte message from mtype " + std::to_string(mtype) +
           " that is not a fastdeploy_spec fragment (another program uses this queue key?)";
  }
  std::memcpy(h, r.frame.data() + sizeof(long), sizeof(*h));
  *chunk = static_cast<size_t>(n) - sizeof(FragmentHeader);
  const bool ok = h->magic == kFragmentMagic && h->count >= 1 && h->index < h->count &&
                  h->total_bytes <= max_bytes && *chunk <= h->total_bytes;
  if (!ok) {
    return "dropped a malformed fragment from mtype " + std::to_string(mtype) +
           " (another program uses this queue key, or a sender of another version?)";
  }
  return {};
}

void begin_assembly(Receiver& r, long mtype, const FragmentHeader& h, size_t chunk) {
  Assembly& a = r.asm_;
  a.active = true;
  a.mtype = mtype;
  a.id = h.message_id;
  a.count = h.count;
  a.next = 1;
  a.total = h.total_bytes;
  a.data.resize(std::max<size_t>(a.data.size(), a.total));
  std::memcpy(a.data.data(), r.frame.data() + kFramePrefix, chunk);
  a.filled = chunk;
}

int64_t fragment_timeout_ms() {
  int64_t ms = kFragmentTimeoutMsDefault;
  if (!env_integer(kFragmentTimeoutEnv, kFragmentTimeoutMsDefault, &ms).empty() || ms < 0) {
    ms = kFragmentTimeoutMsDefault;
  }
  return ms;
}

}  // namespace

std::string queue_id_from_env(int64_t* queue_id) { return env_integer(kQueueIdEnv, kQueueIdDefault, queue_id); }

std::string msg_id_from_env(int32_t* msg_id) {
  int64_t v = 0;
  std::string err = env_integer(kMsgIdEnv, kMsgIdDefault, &v);
  if (!err.empty()) return err;
  if (v <= 0 || v == 2 || v > INT32_MAX) {
    return std::string(kMsgIdEnv) + " = " + std::to_string(v) +
           " must be a positive int32 other than 2 (the stop flag is +-" + kMsgIdEnv +
           "; -2 means 'no message')";
  }
  *msg_id = static_cast<int32_t>(v);
  return {};
}

std::string send_message(int64_t queue_id, uint8_t* buf, size_t payload_bytes, SendStats* stats) {
  std::lock_guard<std::mutex> lock(g_send_mutex);
  Queue q;
  std::string err = open_queue(queue_id, &q);
  if (!err.empty()) return err;
  auto cached = g_limits.find(q.msqid);
  if (cached == g_limits.end()) {
    Limits l;
    err = read_limits(q.msqid, &l);
    if (!err.empty()) return err;
    cached = g_limits.emplace(q.msqid, l).first;
  }

  const long mtype = static_cast<long>(getpid());
  // Two attempts: a first fragment refused with EINVAL may mean that a limit was lowered since it was
  // cached; the limits are then read again and the message re-fragmented (nothing was sent yet).
  for (int attempt = 0; attempt < 2; ++attempt) {
    const Limits limits = cached->second;
    const size_t chunk = chunk_bytes(limits);
    if (chunk == 0) {
      return "the kernel's message-queue limits (" + limits_str(limits) +
             ") leave no room for a fragment; raise them, e.g. sysctl -w kernel.msgmax=8192 "
             "kernel.msgmnb=16384 (then recreate the queue)";
    }
    const uint32_t count = static_cast<uint32_t>(std::max<size_t>(1, (payload_bytes + chunk - 1) / chunk));
    const uint32_t id = g_next_message_id++;
    uint64_t sent = 0;
    for (uint32_t f = 0; f < count; ++f) {
      // Frame f starts kFramePrefix bytes before its chunk: over the tail of chunk f - 1, already sent.
      uint8_t* frame = buf + static_cast<size_t>(f) * chunk;
      const size_t this_chunk = std::min(chunk, payload_bytes - static_cast<size_t>(f) * chunk);
      const FragmentHeader h{kFragmentMagic, id, f, count, payload_bytes};
      std::memcpy(frame, &mtype, sizeof(mtype));
      std::memcpy(frame + sizeof(long), &h, sizeof(h));
      const size_t text = sizeof(FragmentHeader) + this_chunk;
      int rc;
      do {  // a signal during a blocked send: retry, the message must not be lost
        rc = msgsnd(q.msqid, frame, text, 0);
      } while (rc == -1 && errno == EINTR);
      if (rc == -1) {
        const int e = errno;
        if (e == EINVAL && f == 0 && attempt == 0) {
          Limits fresh;
          if (read_limits(q.msqid, &fresh).empty() && fresh.text() != limits.text()) {
            cached->second = fresh;
            break;
          }
        }
        std::string why = send_error(e, text, limits);
        if (f > 0) why += "; " + std::to_string(f) + " of " + std::to_string(count) +
                          " fragments were sent: the receiver drops that message with an error";
        return why;
      }
      sent += text;
      if (f + 1 == count) {
        g_last_send.bytes = sent;
        g_last_send.fragments = count;
        if (stats != nullptr) *stats = g_last_send;
        return {};
      }
    }
  }
  return "msgsnd kept refusing the first fragment (EINVAL) after the limits were re-read (" +
         limits_str(cached->second) + ")";
}

std::string receive_message(int64_t queue_id, bool wait, size_t max_bytes, const Consumer& consume,
                            bool* got) {
  *got = false;
  std::lock_guard<std::mutex> lock(g_recv_mutex);
  Queue q;
  std::string err = open_queue(queue_id, &q);
  if (!err.empty()) return err;
  Receiver& r = g_receivers[q.key];
  const size_t text_cap = sizeof(FragmentHeader) + max_bytes;
  if (r.frame.size() < sizeof(long) + text_cap) r.frame.resize(sizeof(long) + text_cap);
  Assembly& a = r.asm_;

  // MSG_NOERROR: a foreign message too big for the buffer is consumed (truncated) and reported rather
  // than left to block the queue.
  auto receive = [&](long type, int flags) { return msgrcv(q.msqid, r.frame.data(), text_cap, type, flags | MSG_NOERROR); };

  while (!a.active) {
    const ssize_t n = receive(0, wait ? 0 : IPC_NOWAIT);
    if (n == -1) {
      const int e = errno;
      if (e == ENOMSG || e == EINTR) return {};  // nothing read; nothing lost
      if (e == EIDRM) return "the queue (id " + std::to_string(queue_id) + ") was removed while waiting";
      return "msgrcv failed: " + errno_str(e);
    }
    FragmentHeader h;
    size_t chunk = 0;
    err = parse_fragment(r, n, max_bytes, &h, &chunk);
    if (!err.empty()) return err;
    long mtype;
    std::memcpy(&mtype, r.frame.data(), sizeof(mtype));
    if (h.index != 0) {
      if (r.discarding && r.discard_mtype == mtype && r.discard_id == h.message_id) continue;
      r.discarding = true;
      r.discard_mtype = mtype;
      r.discard_id = h.message_id;
      return "dropped fragment " + std::to_string(h.index) + " of " + std::to_string(h.count) + " of " +
             describe(mtype, h.message_id) +
             ": its first fragment was never received here (taken by another receiver that stopped?)";
    }
    if (h.count == 1) {
      if (chunk != h.total_bytes) return "dropped a malformed single-fragment " + describe(mtype, h.message_id);
      *got = true;
      return consume(r.frame.data() + kFramePrefix, chunk);
    }
    begin_assembly(r, mtype, h, chunk);
  }

  // The rest of a started message: its sender is sending it now, so poll for it with a deadline
  // measured from the last fragment that arrived.
  const auto timeout = std::chrono::milliseconds(fragment_timeout_ms());
  auto last_progress = std::chrono::steady_clock::now();
  int idle_polls = 0;
  while (a.next < a.count) {
    const ssize_t n = receive(a.mtype, IPC_NOWAIT);
    if (n == -1) {
      const int e = errno;
      if (e != ENOMSG && e != EINTR) {
        a.active = false;
        return "msgrcv failed while reassembling " + describe(a.mtype, a.id) + " (dropped): " + errno_str(e);
      }
      if (std::chrono::steady_clock::now() - last_progress > timeout) {
        a.active = false;
        return "dropped " + describe(a.mtype, a.id) + ": fragment " + std::to_string(a.next) + " of " +
               std::to_string(a.count) + " did not arrive within " + std::to_string(timeout.count()) +
               " ms (" + kFragmentTimeoutEnv + "); its sender stopped mid-message";
      }
      // Spin briefly (the sender is usually mid-send), then sleep so as not to steal its core.
      if (++idle_polls < 64) {
        sched_yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      continue;
    }
    idle_polls = 0;
    FragmentHeader h;
    size_t chunk = 0;
    err = parse_fragment(r, n, max_bytes, &h, &chunk);
    if (!err.empty()) {
      a.active = false;
      return err + "; " + describe(a.mtype, a.id) + " is dropped with it";
    }
    const bool continues = h.message_id == a.id && h.index == a.next && h.count == a.count &&
                           h.total_bytes == a.total && a.filled + chunk <= a.total &&
                           (h.index + 1 < h.count || a.filled + chunk == a.total);
    if (!continues) {
      const std::string lost = describe(a.mtype, a.id) + " (fragment " + std::to_string(a.next) + " of " +
                               std::to_string(a.count) + " missing)";
      a.active = false;
      if (h.index == 0) {
        begin_assembly(r, a.mtype, h, chunk);
        return "dropped incomplete " + lost + "; the next message of that sender follows";
      }
      r.discarding = true;
      r.discard_mtype = a.mtype;
      r.discard_id = h.message_id;
      return "dropped incomplete " + lost + " and an out-of-sequence fragment " + std::to_string(h.index) +
             " of message " + std::to_string(h.message_id);
    }
    std::memcpy(a.data.data() + a.filled, r.frame.data() + kFramePrefix, chunk);
    a.filled += chunk;
    ++a.next;
    last_progress = std::chrono::steady_clock::now();
  }
  a.active = false;
  if (a.filled != a.total) return "dropped a malformed " + describe(a.mtype, a.id) + " (size mismatch)";
  *got = true;
  return consume(a.data.data(), a.total);
}

}  // namespace msgq
}  // namespace fdspec

namespace {

// Looks up an existing queue without creating it: 0 found, 1 absent, -errno.
int find_queue(int64_t queue_id, int* msqid) {
  const key_t key = ftok(fdspec::msgq::kKeyPath, static_cast<int>(queue_id));
  if (key == -1) return -errno;
  *msqid = msgget(key, 0);
  if (*msqid == -1) return errno == ENOENT ? 1 : -errno;
  return 0;
}

}  // namespace

extern "C" int fdspec_msg_queue_id_from_env(int64_t* queue_id) {
  return fdspec::msgq::queue_id_from_env(queue_id).empty() ? 0 : -EINVAL;
}

extern "C" int fdspec_msg_queue_remove(int64_t queue_id) {
  int msqid = -1;
  const int rc = find_queue(queue_id, &msqid);
  if (rc != 0) return rc;
  return msgctl(msqid, IPC_RMID, nullptr) == -1 ? -errno : 0;
}

extern "C" int fdspec_msg_queue_stat(int64_t queue_id, int64_t* out) {
  int msqid = -1;
  const int rc = find_queue(queue_id, &msqid);
  if (rc != 0) return rc;
  msqid_ds ds;
  if (msgctl(msqid, IPC_STAT, &ds) == -1) return -errno;
  out[0] = static_cast<int64_t>(ds.msg_qnum);
  out[1] = static_cast<int64_t>(ds.__msg_cbytes);
  out[2] = static_cast<int64_t>(ds.msg_qbytes);
  return 0;
}

extern "C" int fdspec_msg_queue_last_send(int64_t* out) {
  std::lock_guard<std::mutex> lock(fdspec::msgq::g_send_mutex);
  out[0] = static_cast<int64_t>(fdspec::msgq::g_last_send.bytes);
  out[1] = static_cast<int64_t>(fdspec::msgq::g_last_send.fragments);
  return 0;
}
