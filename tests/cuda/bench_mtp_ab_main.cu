// A/B scaffolding of bench_mtp_kernels (-DFDSPEC_MTP_AB): main's draft-model launchers, compiled from
// main's sources with -Dfdspec=fdspec_main -I<main>/custom_ops, called through the branch's params
// structs (same layout).
#include "draft_model/draft_model.h"

cudaError_t ab_main_preprocess(const void* p, cudaStream_t s) {
  return fdspec_main::draft_model_preprocess_gpu(*static_cast<const fdspec_main::DraftModelPreprocessParams*>(p), s);
}
cudaError_t ab_main_update(const void* p, cudaStream_t s) {
  return fdspec_main::draft_model_update_gpu(*static_cast<const fdspec_main::DraftModelUpdateParams*>(p), s);
}
cudaError_t ab_main_accept(const void* p, cudaStream_t s) {
  return fdspec_main::draft_model_accept_gpu(*static_cast<const fdspec_main::DraftModelAcceptParams*>(p), s);
}
