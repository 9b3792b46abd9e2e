// Shared pieces of the Paddle-free kernel harnesses in tests/cuda/ (GPU launcher against the CPU
// implementation of one op, at the kernel layer). Arguments of each harness:
//   (none)          the full grid
//   quick           a small grid, for compute-sanitizer (racecheck runs ~100x slower)
//   --cpu-selftest  (alone or with quick) no GPU needed: "device" buffers are host memory and the
//                   launch runs the CPU implementation, so the generators, buffer sizes, parameter
//                   assembly and the comparison run end to end (also under AddressSanitizer); then
//                   the same grid again with one output value perturbed after each launch, to prove
//                   that the comparison catches a single wrong value.
// Exit status: 0 all equal, 1 a mismatch (or a selftest failure), 2 a CUDA error or a bad argument.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                           \
    }                                                                                         \
  } while (0)

namespace harness {

struct Mode {
  bool quick = false;
  bool selftest = false;
};

inline Mode parse_mode(int argc, char** argv) {
  Mode m;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "quick") {
      m.quick = true;
    } else if (a == "--cpu-selftest") {
      m.selftest = true;
    } else {
      std::fprintf(stderr, "usage: %s [--cpu-selftest] [quick]\n", argv[0]);
      std::exit(2);
    }
  }
  return m;
}

// The self-test's switches: host memory instead of device memory, and whether the harness's launch
// perturbs its output after running the CPU implementation.
struct SelfTest {
  bool host_backend = false;
  bool perturb = false;
  bool perturbed = false;  // set by the launch of the current case when it changed a value
};

inline SelfTest& selftest() {
  static SelfTest s;
  return s;
}

// Device memory (host memory in the self-test), freed on scope exit so that memcheck's leak check
// sees every allocation released before cudaDeviceReset.
class DevBuf {
 public:
  DevBuf() = default;
  explicit DevBuf(size_t bytes) : bytes_(bytes) {
    const size_t n = bytes ? bytes : 1;
    if (selftest().host_backend) {
      p_ = std::malloc(n);
      if (p_ == nullptr) std::exit(2);
    } else {
      CHECK(cudaMalloc(&p_, n));
    }
  }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  DevBuf(DevBuf&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(o.bytes_) {}
  DevBuf& operator=(DevBuf&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~DevBuf() {
    if (p_ == nullptr) return;
    if (selftest().host_backend) {
      std::free(p_);
    } else {
      CHECK(cudaFree(p_));
    }
  }
  unsigned char* bytes() const { return static_cast<unsigned char*>(p_); }
  size_t size() const { return bytes_; }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// A copy between host and "device" memory (host memory in the self-test).
inline void copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return;
  if (selftest().host_backend) {
    std::memcpy(dst, src, bytes);
    return;
  }
  CHECK(cudaMemcpy(dst, src, bytes, kind));
  // From pageable memory cudaMemcpy may return before the DMA has landed, and the harnesses launch
  // on a non-blocking stream, which does not wait for the legacy stream's copies.
  if (kind == cudaMemcpyHostToDevice) CHECK(cudaDeviceSynchronize());
}
inline void copy_to_device(void* dst, const void* src, size_t bytes) {
  copy(dst, src, bytes, cudaMemcpyHostToDevice);
}
inline void copy_to_host(void* dst, const void* src, size_t bytes) {
  copy(dst, src, bytes, cudaMemcpyDeviceToHost);
}

// A device copy of a host vector, allocated to its exact size (memcheck then sees a read or write
// one element past the end) and fully initialised (initcheck then flags reads of memory the op was
// not given).
template <class T>
class DevVec {
 public:
  DevVec() = default;
  explicit DevVec(const std::vector<T>& v) : buf_(v.size() * sizeof(T)), n_(v.size()) { upload(v); }
  T* ptr() const { return reinterpret_cast<T*>(buf_.bytes()); }
  T* data() const { return ptr(); }  // as std::vector, for code over host and device copies
  size_t size() const { return n_; }
  void upload(const std::vector<T>& v) {
    if (v.size() != n_) {
      std::fprintf(stderr, "DevVec::upload: %zu elements into a buffer of %zu\n", v.size(), n_);
      std::exit(2);
    }
    copy_to_device(ptr(), v.data(), n_ * sizeof(T));
  }
  std::vector<T> download() const {
    std::vector<T> v(n_);
    copy_to_host(v.data(), ptr(), n_ * sizeof(T));
    return v;
  }

 private:
  DevBuf buf_;
  size_t n_ = 0;
};

// A case's vectors listed once, as an X-macro FIELDS(X) calling X(type, name) for each:
// HARNESS_VECTORS(FIELDS) declares them (std::vector) in the host struct; HARNESS_MIRROR(Dev, Host,
// FIELDS), inside struct Dev, their device copies (DevVec, allocated and filled from a Host),
// upload(const Host&), and download(Host like = {}), which returns `like` with every vector read
// back (templates, so that a harness using neither gets no unused-function warning);
// HARNESS_SAME_VECTORS(Host, FIELDS) an operator== over the vectors.
#define HARNESS_VEC_(T, n) std::vector<T> n;
#define HARNESS_DEVVEC_(T, n) ::harness::DevVec<T> n;
#define HARNESS_ALLOC_(T, n) n = ::harness::DevVec<T>(h.n);
#define HARNESS_UPLOAD_(T, n) n.upload(h.n);
#define HARNESS_DOWNLOAD_(T, n) h.n = n.download();
#define HARNESS_EQ_(T, n) &&n == o.n
#define HARNESS_VECTORS(FIELDS) FIELDS(HARNESS_VEC_)
// clang-format off
#define HARNESS_MIRROR(Dev, Host, FIELDS)                 \
  FIELDS(HARNESS_DEVVEC_)                                 \
  explicit Dev(const Host& h) { FIELDS(HARNESS_ALLOC_) }  \
  template <class H = Host>                               \
  void upload(const H& h) { FIELDS(HARNESS_UPLOAD_) }     \
  template <class H = Host>                               \
  H download(H h = H()) const {                           \
    FIELDS(HARNESS_DOWNLOAD_)                             \
    return h;                                             \
  }
// clang-format on
// HARNESS_UPLOAD_FROM(FIELDS), inside a struct with such DevVec members among others, uploads
// each from the vectors of a host struct named `h` in scope.
#define HARNESS_UPLOAD_FROM(FIELDS) FIELDS(HARNESS_UPLOAD_)
#define HARNESS_SAME_VECTORS(Host, FIELDS) \
  bool operator==(const Host& o) const { return true FIELDS(HARNESS_EQ_); }

// A stream (none in the self-test, whose launches run on the host).
class Stream {
 public:
  Stream() {
    if (!selftest().host_backend) CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    if (s_ != nullptr) CHECK(cudaStreamDestroy(s_));
  }
  cudaStream_t get() const { return s_; }
  void sync() const {
    if (s_ != nullptr) CHECK(cudaStreamSynchronize(s_));
  }

 private:
  cudaStream_t s_ = nullptr;
};

// Captures what `enqueue(stream)` launches into a CUDA graph (global capture mode: any call that is
// not capturable fails), instantiated for replays. In the self-test a replay calls `enqueue` again.
class Graph {
 public:
  Graph(cudaStream_t stream, std::function<cudaError_t(cudaStream_t)> enqueue) {
    if (selftest().host_backend) {
      host_enqueue_ = std::move(enqueue);
      return;
    }
    cudaGraph_t g;
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    CHECK(enqueue(stream));
    CHECK(cudaStreamEndCapture(stream, &g));
    CHECK(cudaGraphInstantiateWithFlags(&exec_, g, 0));
    CHECK(cudaGraphDestroy(g));
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph() {
    if (exec_ != nullptr) CHECK(cudaGraphExecDestroy(exec_));
  }
  void replay(cudaStream_t stream) const {
    if (host_enqueue_) {
      CHECK(host_enqueue_(stream));
    } else {
      CHECK(cudaGraphLaunch(exec_, stream));
    }
  }

 private:
  cudaGraphExec_t exec_ = nullptr;
  std::function<cudaError_t(cudaStream_t)> host_enqueue_;
};

// Launches `launch(stream)` eagerly, or captures it into a graph and replays that once.
template <class Launch>
void launch_once(cudaStream_t stream, bool graph, Launch&& launch) {
  if (graph) {
    const Graph g(stream, launch);
    g.replay(stream);
  } else {
    CHECK(launch(stream));
  }
}

// A harness launcher: `gpu(p, stream)`, or in the self-test `cpu(p)` in its place and then, in the
// perturbed pass, `perturb(p)`, which changes one output value and returns true (false when it
// found nothing to change).
template <class Params, class Gpu, class Cpu, class Perturb>
cudaError_t launch_or_emulate(const Params& p, cudaStream_t stream, Gpu&& gpu, Cpu&& cpu,
                              Perturb&& perturb) {
  auto& st = selftest();
  if (!st.host_backend) return gpu(p, stream);
  cpu(p);
  if (st.perturb && perturb(p)) st.perturbed = true;
  return cudaSuccess;
}

// In the perturbed self-test pass, after the CPU implementation ran in place of a launch: changes
// one output value, alternately a length's low bit and a cell the op may not have written.
template <class Length, class Cell>
void perturb(Length& length, Cell& cell) {
  auto& st = selftest();
  if (!st.perturb) return;
  static int turn = 0;
  if (++turn % 2) {
    length ^= 1;
  } else {
    cell += 1;
  }
  st.perturbed = true;
}

// Gives each vector n elements (the per-slot arrays of a generated case).
template <class... Vecs>
void resize_all(size_t n, Vecs&... v) {
  (v.resize(n), ...);
}

struct Rng {
  std::mt19937_64 g;
  explicit Rng(uint64_t seed) : g(seed) {}
  int64_t uni(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); }
  double real() { return std::uniform_real_distribution<double>(0.0, 1.0)(g); }
  bool chance(double p) { return real() < p; }
  template <class T>
  T pick(std::initializer_list<T> xs) {
    return *(xs.begin() + uni(0, static_cast<int64_t>(xs.size()) - 1));
  }
  // Runs one of `fs`, chosen uniformly (e.g. which hostile value a slot gets).
  void one_of(std::initializer_list<std::function<void()>> fs) {
    (*(fs.begin() + uni(0, static_cast<int64_t>(fs.size()) - 1)))();
  }
};

// Counts cases and mismatches and prints the one-line summary. In the perturbed self-test pass a
// case whose launch perturbed a value must be reported as a mismatch, and any other case must not.
class Tally {
 public:
  explicit Tally(const char* name) : name_(name) {}

  // Call before each case's launch.
  void begin_case() { selftest().perturbed = false; }

  // Records the comparison of the current case; `what` describes it for the first few reports.
  void record(bool equal, const std::string& what) {
    ++cases_;
    const bool expect_equal = !(selftest().perturb && selftest().perturbed);
    if (selftest().perturb && selftest().perturbed) ++perturbed_;
    if (equal == expect_equal) return;
    ++bad_;
    if (bad_ <= 8) {
      std::printf("%s %s\n", equal ? "UNDETECTED PERTURBATION" : "MISMATCH", what.c_str());
    }
  }

  // Coverage counters (how many cases reached a given situation), printed before the summary so
  // that a run shows that its grid reached what it claims to test.
  void count(const std::string& what, long n = 1) { counts_[what] += n; }

  long cases() const { return cases_; }
  long bad() const { return bad_; }
  long perturbed() const { return perturbed_; }

  // Prints "<name>: PASS|FAIL ..." and returns the exit status.
  int finish(const char* mode) const {
    if (!counts_.empty()) {
      std::string line;
      for (const auto& kv : counts_) line += " " + kv.first + "=" + std::to_string(kv.second);
      std::printf("%s %s coverage:%s\n", name_, mode, line.c_str());
    }
    if (selftest().perturb) {
      const bool ok = bad_ == 0 && perturbed_ > 0;
      std::printf("%s %s: %s (%ld cases, %ld perturbed, %ld undetected or spurious)\n", name_, mode,
                  ok ? "PASS" : "FAIL", cases_, perturbed_, bad_);
      return ok ? 0 : 1;
    }
    std::printf("%s %s: %s (%ld cases, %ld mismatches)\n", name_, mode, bad_ ? "FAIL" : "PASS",
                cases_, bad_);
    return bad_ ? 1 : 0;
  }

 private:
  const char* name_;
  long cases_ = 0, bad_ = 0, perturbed_ = 0;
  std::map<std::string, long> counts_;
};

// One case: `enqueue(stream)` launches the op or replays a graph; once the stream is idle,
// `compare()` returns "" when every output is right, else what differs (for the report).
template <class Enqueue, class Compare>
void run_case(Tally& t, const Stream& stream, Enqueue&& enqueue, Compare&& compare) {
  t.begin_case();
  enqueue(stream.get());
  stream.sync();
  const std::string diff = compare();
  t.record(diff.empty(), diff);
}

// A case of a harness whose Inputs struct holds every tensor of the op, outputs included, with
// `dev` their device copy (download() reads them back): `enqueue(stream)` runs the op on dev's
// buffers, which must then hold `want` (the CPU's result on `in`). The harness defines, for its
// types, same(in, want, got) and describe(sh, in, want, got, how) (found by argument-dependent
// lookup).
template <class Shape, class Inputs, class Dev, class Enqueue>
void check_inputs_case(Tally& t, const Stream& stream, const Shape& sh, const Inputs& in,
                       const Inputs& want, const Dev& dev, const char* how, Enqueue&& enqueue) {
  run_case(t, stream, enqueue, [&] {
    const Inputs got = dev.download();
    return same(in, want, got) ? std::string() : describe(sh, in, want, got, how);
  });
}

// First index where two vectors differ (or -1), for mismatch reports.
template <class T>
int64_t first_diff(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return static_cast<int64_t>(i);
  }
  return -1;
}

// Runs `body(tally)` in the chosen mode and returns the process exit status. The self-test runs the
// grid twice (clean, then perturbed); a GPU run ends with cudaDeviceReset so that memcheck's leak
// check sees the context torn down.
template <class Body>
int run_harness(const char* name, const Mode& mode, Body&& body) {
  if (!mode.selftest) {
    Tally t(name);
    body(t);
    const int rc = t.finish(mode.quick ? "quick" : "full");
    CHECK(cudaDeviceReset());
    return rc;
  }
  selftest().host_backend = true;
  Tally clean(name);
  body(clean);
  const int rc_clean = clean.finish(mode.quick ? "cpu-selftest quick clean" : "cpu-selftest clean");
  selftest().perturb = true;
  Tally perturbed(name);
  body(perturbed);
  const int rc_perturbed =
      perturbed.finish(mode.quick ? "cpu-selftest quick perturbed" : "cpu-selftest perturbed");
  return rc_clean != 0 ? rc_clean : rc_perturbed;
}

// A harness's main(): the mode from the command line, then the grid `body(tally, quick)`.
template <class Body>
int run_main(int argc, char** argv, const char* name, Body&& body) {
  const Mode mode = parse_mode(argc, argv);
  return run_harness(name, mode, [&](Tally& t) { body(t, mode.quick); });
}

}  // namespace harness
