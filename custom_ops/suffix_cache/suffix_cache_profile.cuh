// suffix_cache: the profile build's printers (FDSPEC_PROFILE, common/profiler.cuh): the search's
// stage clocks and the first scan's warp records.
// Part of suffix_cache.cu's one translation unit (included there, and only there: the kernels
// keep internal linkage and the profiler's per-unit tables). Design: docs/design/suffix_cache.md.
#pragma once

#include "suffix_cache/suffix_cache_scan_parts.cuh"
#include "suffix_cache/suffix_cache_search.cuh"

#ifdef FDSPEC_PROFILE
#include <algorithm>
#include <cstdio>
#include <functional>
#include <utility>
#include <vector>
#endif

namespace fdspec {

#ifdef FDSPEC_PROFILE
// Prints the stage clocks of the last global search launch (bench-only build).
void suffix_cache_profile_print(int64_t blocks, double clock_khz) {
  static long long h[profiler::kBlocks][profiler::kSlots];
  if (cudaMemcpyFromSymbol(h, profiler::g_block, sizeof(h)) != cudaSuccess) return;
  // Stages, in time order (clock slots): the statistics read (2), the candidates' match lengths
  // (3), their places and histogram (1), the core's warp path (5), its block path (6), the best
  // known (7), the draft written (8); a slot whose global draft loses, or that has none, stops
  // earlier.
  const int order[7] = {2, 3, 1, 5, 6, 7, 8};
  const char* names[7] = {"reads", "lengths", "places", "warp", "block", "best", "write"};
  const int64_t nb = blocks < profiler::kBlocks ? blocks : profiler::kBlocks;
  double sum[7] = {}, mx[7] = {};
  for (int64_t b = 0; b < nb; ++b) {
    long long last = h[b][0];
    long long end = last;
    double us[7] = {};
    for (int i = 0; i < 7; ++i) {
      const long long t = h[b][order[i]];
      if (t == 0) continue;
      us[i] = (t - last) / clock_khz * 1e3;
      last = end = t;
      sum[i] += us[i];
      mx[i] = us[i] > mx[i] ? us[i] : mx[i];
    }
    std::printf(
        "  slot %lld: total %.2f us cand=%lld warp_lo=%lld lmin=%lld last_l=%lld walks=%lld "
        "steps=%lld (their loads %.2f us, tables cleared %.2f + %.2f us) given up=%lld runs=%lld "
        "(warp 0 skipped %lld) |",
        (long long)b, (end - h[b][0]) / clock_khz * 1e3, h[b][13], h[b][14], h[b][15] / 1000,
        h[b][15] % 1000, h[b][10], h[b][11], h[b][16] / clock_khz * 1e3, h[b][20] / clock_khz * 1e3,
        h[b][21] / clock_khz * 1e3, h[b][17], h[b][18], h[b][19]);
    for (int i = 0; i < 7; ++i) std::printf(" %s %.2f", names[i], us[i]);
    auto between = [&](int from, int to) {
      return (h[b][to] - h[b][from]) / clock_khz * 1e3;
    };  // clock slots
    if (h[b][22] != 0 && h[b][23] != 0 &&
        h[b][5] != 0) {  // the warp path: its set, sorted and loaded, walked
      std::printf(" (warp: set %.2f, sorted %.2f, walked %.2f)", between(1, 22), between(22, 23),
                  between(23, 5));
      // Their parts, by thread 0's clock: set = the caller's local score, the cuts, the set's
      // members; sorted = the ranks, the continuations' loads, the runs; walked = warp 0's own
      // runs, then the wait for the other warps and the best over them.
      if (h[b][32] != 0 && h[b][33] != 0 && h[b][34] != 0 && h[b][35] != 0 && h[b][36] != 0) {
        std::printf(
            " (set: local %.2f, cuts %.2f, members %.2f; sorted: ranks %.2f, loads %.2f, runs %.2f;"
            " walked: warp 0 %.2f, rest %.2f)",
            between(1, 32), between(32, 33), between(33, 22), between(22, 34), between(34, 35),
            between(35, 23), between(23, 36), between(36, 5));
      }
    }
    if (h[b][10] != 0) {  // the block path's walks, their steps' parts summed
      std::printf(" (block: set %.2f, loads+clear %.2f, count %.2f, top %.2f, tie %.2f, rest %.2f)",
                  h[b][24] / clock_khz * 1e3, h[b][25] / clock_khz * 1e3,
                  h[b][26] / clock_khz * 1e3, h[b][27] / clock_khz * 1e3,
                  h[b][28] / clock_khz * 1e3, h[b][29] / clock_khz * 1e3);
    }
    std::printf("\n");
  }
  std::printf("  stage (us, mean / max over %lld blocks):", (long long)nb);
  for (int i = 0; i < 7; ++i) std::printf(" %s %.2f/%.2f", names[i], sum[i] / nb, mx[i]);
  std::printf("\n");
}
#endif

#ifdef FDSPEC_PROFILE
// Prints the first scan's warp records since the last print (profile build), then clears them.
void suffix_cache_scan_profile_print(double clock_khz) {
  static long long h[profiler::kWarps][profiler::kWarpSlots];
  int n = 0;
  if (profiler::read_warps(h, &n) != cudaSuccess) return;
  n = n < profiler::kWarps ? n : profiler::kWarps;
  const char* names[kScanPhases] = {"set-up", "lines", "last drain", "wait for the local search",
                                    "flush"};
  std::printf("  first scan, per warp (%d warps), us mean / max:", n);
  double total_max = 0;
  for (int k = 0; k < kScanPhases; ++k) {
    double sum = 0, mx = 0;
    for (int w = 0; w < n; ++w) {
      sum += h[w][k];
      mx = h[w][k] > mx ? h[w][k] : mx;
    }
    std::printf(" %s %.2f/%.2f", names[k], sum / (n > 0 ? n : 1) / clock_khz * 1e3,
                mx / clock_khz * 1e3);
  }
  for (int w = 0; w < n; ++w) {
    double t = 0;
    for (int k = 0; k < 3; ++k) t += h[w][k];
    total_max = t > total_max ? t : total_max;
  }
  std::printf("; the slowest warp's set-up + lines + drain %.2f\n", total_max / clock_khz * 1e3);
  // The slowest warps: their lines and member hits (counted over every launch since the last
  // print).
  std::vector<std::pair<long long, int>> by(n);
  for (int w = 0; w < n; ++w) by[w] = {h[w][0] + h[w][1] + h[w][2], w};
  std::sort(by.begin(), by.end(), std::greater<std::pair<long long, int>>());
  for (int i = 0; i < 6 && i < n; ++i) {
    const int w = by[i].second;
    std::printf(
        "    warp %d (block %d): %.2f us, lines %.2f, drain %.2f; lines read %lld, member hits "
        "%lld\n",
        w, w / kWarps, by[i].first / clock_khz * 1e3, h[w][1] / clock_khz * 1e3,
        h[w][2] / clock_khz * 1e3, h[w][kScanPhases], h[w][kScanPhases + 1]);
  }
  long long lines_all = 0, hits_all = 0;
  for (int w = 0; w < n; ++w) {
    lines_all += h[w][kScanPhases];
    hits_all += h[w][kScanPhases + 1];
  }
  std::printf(
      "    all warps: lines read %lld, member hits %lld (every launch since the last print)\n",
      lines_all, hits_all);
}
#endif

}  // namespace fdspec
