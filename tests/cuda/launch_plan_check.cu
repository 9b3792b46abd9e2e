// The launch planning of every kernel that asks for more than the default 48 KB of dynamic shared
// memory, and the feature decisions, run on the host for the devices the library supports (no GPU:
// no CUDA call is made). Linked with the ops' own launchers' planning functions
// (suffix_match_search_forms, suffix_cache_search_forms, suffix_cache_scan_smem,
// suffix_cache_max_batch) and the n-gram
// search's shape rule, so that it checks what the launchers do, not a copy of their numbers.
//
//   launch_plan_check      prints one line per check, then "launch_plan_check: PASS (N checks)"
// Exit status 0 when every check holds, 1 otherwise. Built and run by tests/test_launch_plan.py.
#include <cstdio>
#include <cstring>
#include <string>

#include "common/launch_plan.h"
#include "ngram_common/ngram_search.cuh"
#include "suffix_cache/suffix_cache.h"
#include "suffix_match/suffix_match.h"

namespace {

using namespace fdspec;

int checks = 0, failures = 0;

void check(bool ok, const std::string& what) {
  ++checks;
  if (!ok) ++failures;
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
}

struct Gpu {
  const char* name;
  DeviceLimits limits;
};

// An H100's attributes under the environment's caps, as read_device (cuda_utils.cuh) applies them.
DeviceLimits h100_capped(const char* cap, const char* smem) {
  DeviceLimits h100;
  h100.cc = 90;
  h100.sms = 132;
  h100.smem_optin = 232448;
  DeviceCap c;
  if (!parse_device_cap(cap, smem, &c)) return DeviceLimits{};
  return cap_device(h100, c);
}

void check_caps() {
  const DeviceLimits a100 = h100_capped("8.0", nullptr);
  check(a100.cc == 80 && a100.smem_optin == 166912 && a100.sms == 132 && a100.capped,
        "FDSPEC_DEVICE_CAP=8.0 on an H100: cc 8.0, 166912 B per block (A100)");
  const DeviceLimits l20 = h100_capped("8.9", nullptr);
  check(l20.cc == 89 && l20.smem_optin == 101376,
        "FDSPEC_DEVICE_CAP=8.9: cc 8.9, 101376 B (L20 / RTX 4090)");
  const DeviceLimits a10 = h100_capped("8.6", nullptr);
  check(a10.cc == 86 && a10.smem_optin == 101376, "FDSPEC_DEVICE_CAP=8.6: cc 8.6, 101376 B (A10)");
  const DeviceLimits s = h100_capped(nullptr, "70000");
  check(s.cc == 90 && s.smem_optin == 70000, "FDSPEC_DEVICE_SMEM=70000 alone: cc 9.0, 70000 B");
  const DeviceLimits both = h100_capped("8.0", "101376");
  check(both.cc == 80 && both.smem_optin == 101376,
        "8.0 with FDSPEC_DEVICE_SMEM=101376: the smaller wins");
  const DeviceLimits none = h100_capped("", "");
  check(none.cc == 90 && none.smem_optin == 232448 && !none.capped, "no cap: the device's own");
  const DeviceLimits above = h100_capped("10.0", nullptr);
  check(above.cc == 90 && above.smem_optin == 232448 && !above.capped,
        "a cap above the device changes nothing");
  DeviceCap c;
  for (const char* bad : {"8", "8.x", "abc", "8.0.1", "-9.0", "8.10"}) {
    const bool ok = parse_device_cap(bad, nullptr, &c);
    // "8" alone is accepted (major only, minor 0); the rest are refused.
    check(std::strcmp(bad, "8") == 0 ? ok && c.cc == 80 : !ok,
          std::string("FDSPEC_DEVICE_CAP='") + bad + "'");
  }
  check(!parse_device_cap(nullptr, "1000", &c), "FDSPEC_DEVICE_SMEM below 48 KB is refused");
}

void check_features() {
  const DeviceLimits h100 = h100_capped(nullptr, nullptr);
  const DeviceLimits a100 = h100_capped("8.0", nullptr);
  KernelFeatures f = decide_kernel_features(90, 90, h100);
  check(f.pdl && f.clusters && f.hopper_loads,
        "sm_90 image on sm_90: dependent launch, clusters, sm_90 loads");
  f = decide_kernel_features(89, 90, h100);
  check(!f.pdl && !f.clusters && !f.hopper_loads,
        "compute_89 PTX JIT-compiled on sm_90 (binaryVersion 90, ptxVersion 89): none of them");
  f = decide_kernel_features(80, 90, h100);
  check(!f.pdl && !f.clusters && !f.hopper_loads, "compute_80 PTX on sm_90: none");
  f = decide_kernel_features(90, 90, a100);
  check(!f.pdl && !f.clusters && !f.hopper_loads,
        "sm_90 image with FDSPEC_DEVICE_CAP=8.0: none (an A100's)");
  DeviceLimits real_a100;
  real_a100.cc = 80;
  real_a100.smem_optin = 166912;
  f = decide_kernel_features(80, 80, real_a100);
  check(!f.pdl && !f.clusters, "sm_80 image on an A100: none");
}

// The dynamic shared memory a kernel may take without an opt-in: 48 KB less its static shared
// memory (the sampler's weighing-pass kernel, 37552 B static, with a float32 row of 4099 entries in
// one slice: 16416 B dynamic needs the opt-in), and never more than the runtime reports.
void check_dynamic_smem() {
  check(default_dynamic_smem(0, 49152) == 49152, "no static shared memory: 48 KB without opt-in");
  check(default_dynamic_smem(37552, 49152) == 11600 && 16416 > default_dynamic_smem(37552, 49152),
        "37552 B static: 11600 B without opt-in, so a 16416 B slice opts in");
  check(default_dynamic_smem(34992, 49152) == 14160, "34992 B static: 14160 B without opt-in");
  check(default_dynamic_smem(0, 40000) == 40000, "a smaller figure from the runtime wins");
  check(default_dynamic_smem(60000, 49152) == 0, "static above 48 KB: nothing without opt-in");
  const DeviceLimits h100 = h100_capped(nullptr, nullptr), l20 = h100_capped("8.9", nullptr);
  check(dynamic_smem_refusal(77824, 37552, h100.smem_optin) == nullptr,
        "H100: 77824 B dynamic + 37552 B static granted");
  check(dynamic_smem_refusal(77824, 37552, l20.smem_optin) != nullptr &&
            dynamic_smem_refusal(63824, 37552, l20.smem_optin) == nullptr &&
            dynamic_smem_refusal(63825, 37552, l20.smem_optin) != nullptr,
        "L20 cap: static + dynamic counted against 101376 B");
}

void check_suffix(const Gpu& g) {
  const DeviceLimits& d = g.limits;
  const SuffixSearchForms m = suffix_match_search_forms();
  const int mc = suffix_search_cand_cap(m, d);
  const size_t msmem = mc == m.large_cap ? m.large_smem : m.small_smem;
  check(mc != 0 && msmem <= static_cast<size_t>(d.smem_optin),
        std::string(g.name) + ": suffix_match search holds " + std::to_string(mc) +
            " candidates, " + std::to_string(msmem) + " B <= " + std::to_string(d.smem_optin) +
            " B (large form " + std::to_string(m.large_smem) + " B, small " +
            std::to_string(m.small_smem) + " B)");
  const SuffixSearchForms c = suffix_cache_search_forms();
  const int cc = suffix_search_cand_cap(c, d);
  const size_t csmem = cc == c.large_cap ? c.large_smem : c.small_smem;
  check(cc != 0 && csmem <= static_cast<size_t>(d.smem_optin),
        std::string(g.name) + ": suffix_cache search holds " + std::to_string(cc) +
            " candidates, " + std::to_string(csmem) + " B (large form " +
            std::to_string(c.large_smem) + " B, small " + std::to_string(c.small_smem) + " B)");
  // The query's scan: its shared memory grows with the batch; every batch up to the op's limit on
  // this device (suffix_cache_max_batch, which the binding checks with its own message) fits.
  const int64_t max_batch = suffix_cache_max_batch(d);
  int64_t bad = 0;
  for (int64_t b = 1; b <= max_batch; ++b)
    bad += suffix_cache_scan_smem(b) > static_cast<size_t>(d.smem_optin);
  const bool all = max_batch == kMaxSuffixCacheBatch;
  check(bad == 0 && max_batch >= 1024,
        std::string(g.name) + ": suffix_cache query scan fits every batch up to " +
            std::to_string(max_batch) +
            (all ? " (the op's limit)" : " (the op refuses larger batches on this device)") + "; " +
            std::to_string(suffix_cache_scan_smem(max_batch)) + " B at that batch");
}

// The n-gram search's shape over a grid of batches and row lengths: the ring only where it fits.
void check_ngram(const Gpu& g, const KernelFeatures& f) {
  const DeviceLimits& d = g.limits;
  int rings = 0, bad = 0, clusters = 0;
  for (int64_t b : {1, 2, 8, 16, 33, 64, 132, 133, 256, 1024}) {
    for (int64_t t : {int64_t{1}, int64_t{4096}, int64_t{65536}, int64_t{65537}, int64_t{131072},
                      int64_t{1} << 20}) {
      const NgramSearchShape sh = ngram_search_shape(b, t, d, f);
      if (sh.ring) ++rings;
      if (sh.cluster > 1) ++clusters;
      if (sh.ring && kNgramRingSmem > static_cast<size_t>(d.smem_optin)) ++bad;
      if (sh.cluster > 1 && (!f.clusters || !sh.ring)) ++bad;
      if (ngram_prefetch_bytes(sh, false, f) > 0 && !f.hopper_loads) ++bad;
    }
  }
  check(bad == 0, std::string(g.name) + ": n-gram search: ring (" + std::to_string(kNgramRingSmem) +
                      " B) in " + std::to_string(rings) + " of 60 shapes, clusters in " +
                      std::to_string(clusters) +
                      ", every ring fits, no cluster or sm_90 prefetch without the features");
}

}  // namespace

int main() {
  check_caps();
  check_features();
  check_dynamic_smem();
  const Gpu gpus[] = {
      {"H100 (sm_90)", h100_capped(nullptr, nullptr)},
      {"A100 cap (8.0)", h100_capped("8.0", nullptr)},
      {"L20 cap (8.9)", h100_capped("8.9", nullptr)},
      {"A10 cap (8.6)", h100_capped("8.6", nullptr)},
  };
  for (const Gpu& g : gpus) {
    check_suffix(g);
    const KernelFeatures f = decide_kernel_features(90, 90, g.limits);  // a native sm_90 build
    check_ngram(g, f);
  }
  // The L20 cap takes the small suffix forms and never the ring; the A100 and the H100 the large
  // ones.
  const DeviceLimits l20 = h100_capped("8.9", nullptr), a100 = h100_capped("8.0", nullptr);
  check(suffix_search_cand_cap(suffix_match_search_forms(), l20) ==
                suffix_match_search_forms().small_cap &&
            suffix_search_cand_cap(suffix_cache_search_forms(), l20) ==
                suffix_cache_search_forms().small_cap,
        "L20 cap: both suffix searches take their small form");
  check(suffix_search_cand_cap(suffix_match_search_forms(), a100) ==
            suffix_match_search_forms().large_cap,
        "A100 cap: suffix_match keeps its large form");
  const KernelFeatures none = decide_kernel_features(89, 90, l20);
  check(!ngram_search_shape(8, int64_t{1} << 17, l20, none).ring,
        "L20 cap: 8 rows of 128k tokens stream");
  check(ngram_search_shape(8, int64_t{1} << 17, a100, none).ring,
        "A100 cap: 8 rows of 128k tokens use the ring");
  std::printf("launch_plan_check: %s (%d checks, %d failed)\n", failures == 0 ? "PASS" : "FAIL",
              checks, failures);
  return failures == 0 ? 0 : 1;
}
