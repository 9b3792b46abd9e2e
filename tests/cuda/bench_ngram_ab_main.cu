// A/B scaffolding (temporary, issue 18): main's ngram launchers under C names for bench_ngram_kernels
// --ab. Compiled against main's custom_ops with -Dfdspec=fdspec_main, linked with main's .cu files.
#include "hybrid_mtp_ngram/hybrid_mtp_ngram.h"
#include "ngram_match/ngram_match.h"

extern "C" cudaError_t ab_main_ngram_match_gpu(const void* p, cudaStream_t s) {
  return fdspec::ngram_match_gpu(*static_cast<const fdspec::NgramMatchParams*>(p), s);
}
extern "C" cudaError_t ab_main_hybrid_mtp_ngram_gpu(const void* p, cudaStream_t s) {
  return fdspec::hybrid_mtp_ngram_gpu(*static_cast<const fdspec::HybridMtpNgramParams*>(p), s);
}
