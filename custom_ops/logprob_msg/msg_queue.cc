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
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace fdspec {
namespace msgq {
namespace {

constexpr const char* kMsgmaxPath = "/proc/sys/kernel/msgmax";
constexpr long kLinuxDefaultMsgmax = 8192;  // used when /proc cannot be read

std::string errno_str(int e) {
  return std::string(std::strerror(e)) + " (errno " + std::to_string(e) + ")";
}

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
  if (errno != 0 || end == v || *end != '\0')
    return std::string(var) + " = '" + v + "' is not an integer";
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
    return std::string("ftok(\"") + kKeyPath + "\", " + std::to_string(queue_id) +
           ") failed: " + errno_str(errno) + "; the queue key is derived from " + kKeyPath +
           ", which must exist";
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

// Largest SysV message text the sender may use on this queue: a fragment larger than kernel.msgmax
// is refused (EINVAL), and one larger than the queue's capacity (msg_qbytes, from kernel.msgmnb)
// would block forever.
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
  return "kernel.msgmax = " + std::to_string(l.msgmax) +
         ", queue capacity msg_qbytes = " + std::to_string(l.qbytes) + " (from kernel.msgmnb)";
}

// Payload bytes per fragment: what the limit leaves after the fragment header, rounded down to 8
// bytes so that every frame of the in-place scheme stays aligned. 0 when the limit is too small.
size_t chunk_bytes(const Limits& l) {
  const size_t text = l.text();
  if (text < sizeof(FragmentHeader) + 8) return 0;
  return (text - sizeof(FragmentHeader)) / 8 * 8;
}

// ---- Sender state (one per process)
// ----------------------------------------------------------------
std::mutex g_send_mutex;
std::map<int, Limits> g_limits;  // by msqid: /proc and IPC_STAT are read once per queue
uint32_t g_next_message_id = 0;
SendStats g_last_send;

std::string send_error(int e, size_t text, const Limits& l) {
  std::string why =
      "msgsnd of a " + std::to_string(text) + "-byte fragment failed: " + errno_str(e);
  switch (e) {
    case EINVAL:
      return why + "; the fragment exceeds a kernel limit (" + limits_str(l) +
             ", lowered while sending?) or the queue was removed";
    case EIDRM:
      return why + "; the queue was removed while sending";
    case EACCES:
      return why + "; no write permission on the queue";
    case ENOMEM:
      return why + "; the kernel is out of memory";
    default:
      return why;
  }
}

// ---- Receiver state (one per queue key)
// ------------------------------------------------------------ One assembly per sender (mtype):
// while a message of one sender is incomplete, fragments of the others keep being taken off the
// queue. Waiting for one sender alone would let the others' fragments fill the queue, block that
// sender's next fragment, and drop its message on the fragment timeout.
struct Assembly {
  uint32_t id = 0;
  uint32_t count = 0;
  uint32_t next = 0;  // index of the next fragment expected
  uint64_t total = 0;
  uint64_t filled = 0;
  std::chrono::steady_clock::time_point last_progress;
  std::vector<uint8_t> data;
};

struct Orphan {  // the rest of a message whose first fragment was never seen: dropped silently
  long mtype;
  uint32_t id;
};

struct Receiver {
  std::vector<uint8_t> frame;                 // one SysV message: mtype + fragment header + chunk
  std::map<long, Assembly> partial;           // by sender
  std::deque<std::vector<uint8_t>> complete;  // whole messages not handed out yet, in arrival order
  std::vector<Orphan> orphans;                // at most one per sender
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
  Assembly& a = r.partial[mtype];
  a.id = h.message_id;
  a.count = h.count;
  a.next = 1;
  a.total = h.total_bytes;
  a.data.resize(a.total);
  std::memcpy(a.data.data(), r.frame.data() + kFramePrefix, chunk);
  a.filled = chunk;
  a.last_progress = std::chrono::steady_clock::now();
}

void forget_orphan(Receiver& r, long mtype) {
  r.orphans.erase(std::remove_if(r.orphans.begin(), r.orphans.end(),
                                 [&](const Orphan& o) { return o.mtype == mtype; }),
                  r.orphans.end());
}

bool is_orphan(const Receiver& r, long mtype, uint32_t id) {
  return std::any_of(r.orphans.begin(), r.orphans.end(),
                     [&](const Orphan& o) { return o.mtype == mtype && o.id == id; });
}

// Takes the fragment in r.frame (n text bytes, mtype) into the receiver's state. Returns an error
// for what it drops; a message it completes goes to r.complete, except a single-fragment message:
// then *whole is set and the message is read from r.frame in place (no copy).
std::string take_fragment(Receiver& r, ssize_t n, size_t max_bytes, bool* whole) {
  *whole = false;
  long mtype;
  std::memcpy(&mtype, r.frame.data(), sizeof(mtype));
  FragmentHeader h;
  size_t chunk = 0;
  std::string err = parse_fragment(r, n, max_bytes, &h, &chunk);
  auto open = r.partial.find(mtype);
  if (!err.empty()) {
    if (open == r.partial.end()) return err;
    const std::string lost = describe(mtype, open->second.id);
    r.partial.erase(open);
    return err + "; " + lost + " is dropped with it";
  }
  if (h.index == 0) {
    forget_orphan(r, mtype);
    std::string dropped;
    if (open != r.partial.end()) {
      const Assembly& a = open->second;
      dropped = "dropped incomplete " + describe(mtype, a.id) + " (fragment " +
                std::to_string(a.next) + " of " + std::to_string(a.count) +
                " missing); the next message of that sender follows";
      r.partial.erase(open);
    }
    if (h.count == 1) {
      if (chunk != h.total_bytes) {
        return "dropped a malformed single-fragment " + describe(mtype, h.message_id);
      }
      *whole = dropped.empty();
      const auto payload = r.frame.begin() + kFramePrefix;
      if (!*whole) r.complete.emplace_back(payload, payload + chunk);
    } else {
      begin_assembly(r, mtype, h, chunk);
    }
    return dropped;
  }
  if (open == r.partial.end()) {
    if (is_orphan(r, mtype, h.message_id)) return {};
    forget_orphan(r, mtype);
    r.orphans.push_back({mtype, h.message_id});
    return "dropped fragment " + std::to_string(h.index) + " of " + std::to_string(h.count) +
           " of " + describe(mtype, h.message_id) +
           ": its first fragment was never received here (taken by another receiver that stopped?)";
  }
  Assembly& a = open->second;
  const bool continues = h.message_id == a.id && h.index == a.next && h.count == a.count &&
                         h.total_bytes == a.total && a.filled + chunk <= a.total &&
                         (h.index + 1 < h.count || a.filled + chunk == a.total);
  if (!continues) {
    const std::string lost = describe(mtype, a.id) + " (fragment " + std::to_string(a.next) +
                             " of " + std::to_string(a.count) + " missing)";
    r.partial.erase(open);
    forget_orphan(r, mtype);
    r.orphans.push_back({mtype, h.message_id});
    return "dropped incomplete " + lost + " and an out-of-sequence fragment " +
           std::to_string(h.index) + " of message " + std::to_string(h.message_id);
  }
  std::memcpy(a.data.data() + a.filled, r.frame.data() + kFramePrefix, chunk);
  a.filled += chunk;
  a.last_progress = std::chrono::steady_clock::now();
  if (++a.next == a.count) {
    r.complete.push_back(std::move(a.data));
    r.partial.erase(open);
  }
  return {};
}

int64_t fragment_timeout_ms() {
  int64_t ms = kFragmentTimeoutMsDefault;
  if (!env_integer(kFragmentTimeoutEnv, kFragmentTimeoutMsDefault, &ms).empty() || ms < 0) {
    ms = kFragmentTimeoutMsDefault;
  }
  return ms;
}

}  // namespace

std::string queue_id_from_env(int64_t* queue_id) {
  return env_integer(kQueueIdEnv, kQueueIdDefault, queue_id);
}

std::string resolve_queue_id(int64_t attr, int64_t* queue_id) {
  if (attr < 0) return queue_id_from_env(queue_id);
  *queue_id = attr;
  return {};
}

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
  // Two attempts: a first fragment refused with EINVAL may mean that a limit was lowered since it
  // was cached; the limits are then read again and the message re-fragmented (nothing was sent
  // yet).
  for (int attempt = 0; attempt < 2; ++attempt) {
    const Limits limits = cached->second;
    const size_t chunk = chunk_bytes(limits);
    if (chunk == 0) {
      return "the kernel's message-queue limits (" + limits_str(limits) +
             ") leave no room for a fragment; raise them, e.g. sysctl -w kernel.msgmax=8192 "
             "kernel.msgmnb=16384 (then recreate the queue)";
    }
    const uint32_t count =
        static_cast<uint32_t>(std::max<size_t>(1, (payload_bytes + chunk - 1) / chunk));
    const uint32_t id = g_next_message_id++;
    uint64_t sent = 0;
    for (uint32_t f = 0; f < count; ++f) {
      // Frame f starts kFramePrefix bytes before its chunk: over the tail of chunk f - 1, already
      // sent.
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
        if (f > 0)
          why += "; " + std::to_string(f) + " of " + std::to_string(count) +
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
  const auto timeout = std::chrono::milliseconds(fragment_timeout_ms());

  int idle_polls = 0;
  while (r.complete.empty()) {
    // Blocking only while no message is half-assembled: the senders of those are sending now, and
    // their deadlines are checked between polls.
    const bool block = wait && r.partial.empty();
    // MSG_NOERROR: a foreign message too big for the buffer is consumed (truncated) and reported
    // rather than left to block the queue.
    const ssize_t n =
        msgrcv(q.msqid, r.frame.data(), text_cap, 0, (block ? 0 : IPC_NOWAIT) | MSG_NOERROR);
    if (n == -1) {
      const int e = errno;
      if (e == EIDRM || (e == EINVAL && !r.partial.empty())) {
        r.partial.clear();
        return "the queue (id " + std::to_string(queue_id) + ") was removed while waiting";
      }
      if (e != ENOMSG && e != EINTR) {
        const std::string why = "msgrcv failed: " + errno_str(e) +
                                (r.partial.empty() ? "" : "; incomplete messages dropped");
        r.partial.clear();
        return why;
      }
      if (r.partial.empty()) return {};  // nothing read; nothing lost
      const auto now = std::chrono::steady_clock::now();
      for (auto it = r.partial.begin(); it != r.partial.end(); ++it) {
        const Assembly& a = it->second;
        if (now - a.last_progress > timeout) {
          const std::string lost = "dropped " + describe(it->first, a.id) + ": fragment " +
                                   std::to_string(a.next) + " of " + std::to_string(a.count) +
                                   " did not arrive within " + std::to_string(timeout.count()) +
                                   " ms (" + kFragmentTimeoutEnv +
                                   "); its sender stopped mid-message";
          r.partial.erase(it);
          return lost;
        }
      }
      if (e == EINTR) return {};
      // Spin briefly (a sender is usually mid-send), then sleep so as not to steal its core. A
      // non-blocking receive stops after the spin: "no message yet", the fragments already read
      // stay in the receiver's state and the next receive continues the message (nothing is lost).
      if (!wait && idle_polls >= 64) return {};
      if (++idle_polls < 64) {
        sched_yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      continue;
    }
    idle_polls = 0;
    bool whole = false;
    err = take_fragment(r, n, max_bytes, &whole);
    if (!err.empty()) return err;
    if (whole) {
      *got = true;
      return consume(r.frame.data() + kFramePrefix,
                     static_cast<size_t>(n) - sizeof(FragmentHeader));
    }
  }
  std::vector<uint8_t> message = std::move(r.complete.front());
  r.complete.pop_front();
  *got = true;
  return consume(message.data(), message.size());
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
