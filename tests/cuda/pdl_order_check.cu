// The platform rule that the n-gram ops' walk-free path relies on (ngram_walk.cuh): when a
// programmatic dependent (the walk kernel) exits without griddepcontrol.wait, the work queued after
// it on the stream still sees its primary grid (the search, which then writes the slots' outputs)
// finished. Checked for both ways the next op can start: an ordinary launch, and a programmatic
// dependent that waits; eagerly and replayed from a CUDA graph. A control case (a dependent that
// does not wait) must see the primary unfinished at least once, which proves that the primary is
// slow enough for the check to mean something; not in the quick mode, which is for
// compute-sanitizer, whose tools run one kernel at a time.
//
//   pdl_order_check [quick]
// Exit status: 0 the rule holds, 1 it does not (or the control never overlapped), 2 a CUDA error.
#include <cstdio>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "harness.cuh"

namespace {

// Every block sleeps, then block 0 raises the flag: the flag is up only once the grid is nearly
// done.
__global__ void slow_primary(int* flag, int sleeps) {
#if __CUDA_ARCH__ >= 900  // compiled out below sm_90, where main() does not run the check
  asm volatile("griddepcontrol.launch_dependents;");
#endif
  for (int i = 0; i < sleeps; ++i) __nanosleep(1000);
  __syncthreads();
  if (blockIdx.x == 0 && threadIdx.x == 0) atomicExch(flag, 1);
}

__global__ void early_exit() {}  // a dependent that never waits for its primary

__global__ void lower_flag(int* flag) { *flag = 0; }

__global__ void record_flag(int* flag, int* seen, int k, bool wait) {
#if __CUDA_ARCH__ >= 900
  if (wait) asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
  if (threadIdx.x == 0) seen[k] = atomicAdd(flag, 0);
}

enum class Reader { kPlain, kDependentWaits, kDependentNoWait };

// A launch on `s`, as a programmatic dependent of the work before it or as an ordinary one.
struct Launch {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  Launch(cudaStream_t s, bool dependent) {
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.gridDim = dim3(1);
    cfg.blockDim = dim3(32);
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = dependent ? 1 : 0;
  }
};

// `trials` times: the flag lowered (an ordinary launch, so after everything before it), primary,
// its early-exiting dependent, then the reader. Returns how many readers saw the primary
// unfinished.
int run(cudaStream_t s, int* flag, int* seen, int trials, Reader reader, bool graph, int sms) {
  CHECK(cudaMemset(flag, 0, sizeof(int)));
  CHECK(cudaMemset(seen, 0xFF, sizeof(int) * trials));
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (graph) CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int k = 0; k < trials; ++k) {
    lower_flag<<<1, 1, 0, s>>>(flag);
    slow_primary<<<sms, 128, 0, s>>>(flag, 20);
    Launch dependent(s, true), next(s, reader != Reader::kPlain);
    CHECK(cudaLaunchKernelEx(&dependent.cfg, early_exit));
    CHECK(cudaLaunchKernelEx(&next.cfg, record_flag, flag, seen, k,
                             reader == Reader::kDependentWaits));
  }
  if (graph) {
    CHECK(cudaStreamEndCapture(s, &g));
    CHECK(cudaGraphInstantiate(&exec, g, 0));
    CHECK(cudaGraphLaunch(exec, s));
  }
  CHECK(cudaStreamSynchronize(s));
  if (graph) {
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(g));
  }
  std::vector<int> h(trials);
  CHECK(cudaMemcpy(h.data(), seen, sizeof(int) * trials, cudaMemcpyDeviceToHost));
  int unfinished = 0;
  for (int v : h) unfinished += v != 1;
  return unfinished;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "quick") == 0;
  int dev = 0, major = 0, sms = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  if (major < 9) {
    std::printf("pdl_order_check: PASS (0 cases: no programmatic dependent launch before sm_90)\n");
    return 0;
  }
  cudaFuncAttributes fa = {};
  CHECK(cudaFuncGetAttributes(&fa, record_flag));
  if (fa.ptxVersion <
      90) {  // a compute_80/89 image JIT-compiled here: the ops launch no dependents
    std::printf(
        "pdl_order_check: PASS (0 cases: image compiled for compute_%d, no programmatic dependent "
        "launch)\n",
        fa.ptxVersion);
    return 0;
  }
  const int trials = quick ? 20 : 500;
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int *flag, *seen;
  CHECK(cudaMalloc(&flag, sizeof(int)));
  CHECK(cudaMalloc(&seen, sizeof(int) * trials));
  bool ok = true;
  int cases = 0;
  for (bool graph : {false, true}) {
    const struct {
      Reader reader;
      const char* name;
    } readers[] = {{Reader::kPlain, "ordinary launch"},
                   {Reader::kDependentWaits, "dependent that waits"}};
    for (const auto& r : readers) {
      const int bad = run(s, flag, seen, trials, r.reader, graph, sms);
      std::printf("%-22s %s: saw the primary unfinished in %d of %d\n", r.name,
                  graph ? "graph" : "eager", bad, trials);
      ok = ok && bad == 0;
      cases += trials;
    }
    const int control = run(s, flag, seen, trials, Reader::kDependentNoWait, graph, sms);
    std::printf("%-22s %s: saw the primary unfinished in %d of %d (control: %s)\n",
                "dependent, no wait", graph ? "graph" : "eager", control, trials,
                quick ? "not required in the quick mode" : "must be > 0");
    ok = ok && (quick || control > 0);
  }
  CHECK(cudaFree(flag));
  CHECK(cudaFree(seen));
  CHECK(cudaStreamDestroy(s));
  std::printf("pdl_order_check: %s (%d cases)\n", ok ? "PASS" : "FAIL", cases);
  return ok ? 0 : 1;
}
