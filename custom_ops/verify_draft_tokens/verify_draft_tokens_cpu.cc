// verify_draft_tokens: CPU implementation of the row rule in verify_draft_tokens.h.
#include "verify_draft_tokens/verify_draft_tokens.h"

namespace fdspec {

void verify_draft_tokens_cpu(const VerifyDraftTokensParams& p) {
  for (int64_t b = 0; b < p.rows; ++b) verify_draft_tokens_row(p, b);
}

}  // namespace fdspec
