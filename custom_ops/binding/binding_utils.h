// Helpers shared by every Paddle binding: named tensor checks, place dispatch, stream access and
// the translation of a CUDA status into a Paddle error. Kernel layers never include this file.
#pragma once

#include <cerrno>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/fdspec_common.h"
#include "paddle/extension.h"

#ifdef FDSPEC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fdspec {
namespace binding {

// Built with std::to_string rather than a stringstream, so that formatting a shape needs nothing of
// the C++ runtime's locale machinery (see _promote_libstdcxx in fastdeploy_spec/ops/_loader.py for
// what went wrong there under Paddle 2.6.2).
inline std::string shape_str(const paddle::Tensor& t) {
  std::string out = "[";
  const auto shape = t.shape();
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// Paddle's own name of a dtype ("int64", "bfloat16", ...), for the error messages.
inline std::string dtype_str(paddle::DataType d) { return phi::DataTypeToString(d); }

// Checks for one op call. Every message starts with the op name and names the offending tensor, so
// a runner author sees "ngram_match: draft_tokens must be int64, got int32" rather than a crash.
class OpChecks {
 public:
  explicit OpChecks(const char* op) : op_(op) {}

  // Every tensor of the call is defined: Paddle hands a custom op an undefined tensor (no
  // implementation behind it) for a None argument, and its first dtype(), shape() or numel() would
  // dereference null. `names` is the comma-separated list of the tensors' names, in order (the
  // FDSPEC_CHECK_DEFINED macro writes it from the parameter names). Empty tensors are defined: an
  // empty batch is a valid call.
  const OpChecks& defined(
      const char* names,
      std::initializer_list<std::reference_wrapper<const paddle::Tensor>> tensors) const {
    for_each_named(names, tensors, [&](const paddle::Tensor& t, const std::string& name) {
      PD_CHECK(
          t.defined(), op_, ": ", name,
          " is not a tensor (None or an undefined tensor was passed); expected a paddle.Tensor");
    });
    return *this;
  }

  const OpChecks& dtype(const paddle::Tensor& t, const char* name, paddle::DataType want) const {
    PD_CHECK(t.dtype() == want, op_, ": ", name, " must be ", dtype_str(want), ", got ",
             dtype_str(t.dtype()));
    return *this;
  }

  // Every tensor of the list has dtype `want`; `names` as for defined() (the FDSPEC_CHECK_DTYPE
  // macro writes it from the parameter names).
  const OpChecks& dtypes(
      const char* names, paddle::DataType want,
      std::initializer_list<std::reference_wrapper<const paddle::Tensor>> tensors) const {
    for_each_named(names, tensors, [&](const paddle::Tensor& t, const std::string& name) {
      dtype(t, name.c_str(), want);
    });
    return *this;
  }

  const OpChecks& rank(const paddle::Tensor& t, const char* name, size_t want) const {
    PD_CHECK(t.shape().size() == want, op_, ": ", name, " must have rank ", want, ", got shape ",
             shape_str(t));
    return *this;
  }

  // The batch B, the element count of the tensor that defines it (`name`). Recorded so that a shape
  // error against B also names that tensor: when the two disagree, either may be the wrong one.
  int64_t batch(const paddle::Tensor& t, const char* name) const {
    note_batch(t.numel(), name);
    return batch_;
  }

  // Records B and where it comes from, for ops that derive it otherwise (e.g. offsets' size - 1).
  void note_batch(int64_t b, const char* from) const {
    batch_name_ = from;
    batch_ = b;
  }

  // A per-slot tensor: [n] or [n, 1], as upstream callers pass both.
  const OpChecks& per_slot(const paddle::Tensor& t, const char* name, int64_t n) const {
    const auto s = t.shape();
    const bool ok = (s.size() == 1 && s[0] == n) || (s.size() == 2 && s[0] == n && s[1] == 1);
    PD_CHECK(ok, op_, ": ", name, " must have shape [", n, "] or [", n, ", 1]", batch_note(name, n),
             ", got ", shape_str(t));
    return *this;
  }

  // A flat vector of any length: [n] or [n, 1] (offsets, buffers read and written as one array).
  const OpChecks& vector(const paddle::Tensor& t, const char* name) const {
    const auto s = t.shape();
    PD_CHECK(s.size() == 1 || (s.size() == 2 && s[1] == 1), op_, ": ", name,
             " must be a vector, shape [n] or [n, 1], got ", shape_str(t));
    return *this;
  }

  // A flat vector of dtype `want` on the place of `first` (a packed per-token tensor, a list of
  // end tokens): returns its length.
  int64_t vector_on(const paddle::Tensor& t, const char* name, paddle::DataType want,
                    const paddle::Tensor& first, const char* first_name) const {
    dtype(t, name, want).vector(t, name).same_place(first, first_name, t, name);
    return t.numel();
  }

  // An optional per-slot tensor of element type T: when given, of T's dtype, [n] or [n, 1] and on
  // the place of `first`. Returns its data, nullptr when it is absent.
  template <class T>
  const T* optional_per_slot(const paddle::optional<paddle::Tensor>& t, const char* name, int64_t n,
                             const paddle::Tensor& first, const char* first_name) const {
    if (!t) return nullptr;
    dtype(*t, name, phi::CppTypeToDataType<T>::Type())
        .per_slot(*t, name, n)
        .same_place(first, first_name, *t, name);
    return t->data<T>();
  }

  // A 2-D tensor with at least `min_rows` rows (batch agreement for [B, X] tensors).
  const OpChecks& rows_at_least(const paddle::Tensor& t, const char* name, int64_t min_rows) const {
    const auto s = t.shape();
    PD_CHECK(s.size() == 2, op_, ": ", name, " must be 2-D, got shape ", shape_str(t));
    PD_CHECK(s[0] >= min_rows, op_, ": ", name, " must have at least ", min_rows,
             " rows (the batch", batch_note(name, min_rows), "), got shape ", shape_str(t));
    return *this;
  }

  // A [., K + 1] tensor with as many columns as the op's reference tensor `ref_name` (K + 1 =
  // width).
  const OpChecks& k1_columns(const paddle::Tensor& t, const char* name, const char* ref_name,
                             int64_t width) const {
    PD_CHECK(t.shape()[1] == width, op_, ": ", name, " must have as many columns as ", ref_name,
             " (K + 1 = ", width, "), got shape ", shape_str(t));
    return *this;
  }

  const OpChecks& same_place(const paddle::Tensor& first, const char* first_name,
                             const paddle::Tensor& t, const char* name) const {
    PD_CHECK(first.place() == t.place(), op_, ": ", name, " is on ", place_str(t), " but ",
             first_name, " is on ", place_str(first),
             "; all tensors of one call must share a place");
    return *this;
  }

  struct Named {
    const char* name;
    const paddle::Tensor& tensor;
  };

  // Every tensor of `others` on the place of `first`.
  const OpChecks& same_place_as(const paddle::Tensor& first, const char* first_name,
                                std::initializer_list<Named> others) const {
    for (const Named& o : others) same_place(first, first_name, o.tensor, o.name);
    return *this;
  }

  // How a tensor's shape relates to the batch B.
  enum class Dim { kPerSlot, kRows, kVector, kRank1 };

  // One row of an op's tensor table: the tensor, its name, its dtype (UNDEFINED: the caller checks
  // it, e.g. the logits dtypes), its shape against B and, optionally, the params field that takes
  // its data pointer (a `const T*` field for a tensor the op reads, a `T*` one with `writable` set
  // for a tensor it writes; binding/tensor_rules.h builds the rows with the right types).
  struct Rule {
    const char* name;
    const paddle::Tensor& tensor;
    paddle::DataType dtype;
    Dim dim;
    void* field = nullptr;
    paddle::Tensor* writable = nullptr;
  };

  // Checks an op's tensors from one table (in argument order) and returns B: every tensor defined,
  // B = the element count of `batch_tensor`, every dtype, the shape of `batch_tensor` and then
  // every other shape against B, and every tensor on the place of the first. Then each row with a
  // field gets its data pointer. The op's own column and attribute checks follow with that().
  int64_t tensors(std::initializer_list<Rule> table, const char* batch_tensor) const {
    return tensors(table.begin(), table.end(), batch_tensor);
  }
  // The same for a table assembled from shared parts (e.g. binding/draft_inputs.h).
  int64_t tensors(const std::vector<Rule>& table, const char* batch_tensor) const {
    return tensors(table.data(), table.data() + table.size(), batch_tensor);
  }

  const OpChecks& that(bool cond, const std::string& msg) const {
    PD_CHECK(cond, op_, ": ", msg);
    return *this;
  }

  const char* op() const { return op_; }

 private:
  // f(tensor, name) for each tensor, `names` being their comma-separated names in order.
  template <class F>
  static void for_each_named(
      const char* names,
      std::initializer_list<std::reference_wrapper<const paddle::Tensor>> tensors, F f) {
    const char* name = names;
    for (const paddle::Tensor& t : tensors) {
      const char* end = name;
      while (*end != '\0' && *end != ',') ++end;
      f(t, std::string(name, end));
      name = *end == ',' ? end + 1 : end;
      while (*name == ' ') ++name;
    }
  }

  int64_t tensors(const Rule* begin, const Rule* end, const char* batch_tensor) const {
    for (const Rule* r = begin; r != end; ++r) {
      PD_CHECK(
          r->tensor.defined(), op_, ": ", r->name,
          " is not a tensor (None or an undefined tensor was passed); expected a paddle.Tensor");
    }
    const Rule* by = nullptr;
    for (const Rule* r = begin; r != end; ++r) {
      if (std::string(r->name) == batch_tensor) by = r;
    }
    PD_CHECK(by != nullptr, op_, ": internal error, no batch tensor ", batch_tensor);
    const int64_t B = batch(by->tensor, by->name);
    for (const Rule* r = begin; r != end; ++r) {
      if (r->dtype != paddle::DataType::UNDEFINED) dtype(r->tensor, r->name, r->dtype);
    }
    shape(*by, B);
    for (const Rule* r = begin; r != end; ++r) {
      if (r != by) shape(*r, B);
    }
    for (const Rule* r = begin; r != end; ++r)
      same_place(begin->tensor, begin->name, r->tensor, r->name);
    for (const Rule* r = begin; r != end; ++r) {
      if (r->field != nullptr) bind(*r);
    }
    return B;
  }

  // Stores the data pointer of r's tensor in r.field when its dtype is D, with D's element type.
  template <paddle::DataType D>
  static bool bind_if(const Rule& r) {
    using T = typename phi::DataTypeToCppType<D>::type;
    if (r.dtype != D) return false;
    if (r.writable != nullptr) {
      *static_cast<T**>(r.field) = r.writable->data<T>();
    } else {
      *static_cast<const T**>(r.field) = r.tensor.data<T>();
    }
    return true;
  }

  // The dtypes of the tensor tables (binding/tensor_rules.h).
  void bind(const Rule& r) const {
    using paddle::DataType;
    const bool bound = bind_if<DataType::BOOL>(r) || bind_if<DataType::INT32>(r) ||
                       bind_if<DataType::INT64>(r) || bind_if<DataType::FLOAT32>(r);
    PD_CHECK(bound, op_, ": internal error, no data pointer for ", r.name, " of ",
             dtype_str(r.dtype));
  }

  // " (B = n, from <batch tensor> <its shape>)" when n is the recorded batch and `name` is not its
  // tensor.
  std::string batch_note(const char* name, int64_t n) const {
    if (batch_name_ == nullptr || n != batch_ || std::string(name) == batch_name_) return {};
    return std::string(" (B = ") + std::to_string(n) + ", the size of " + batch_name_ + ")";
  }

  static std::string place_str(const paddle::Tensor& t) {
    if (t.is_cpu()) return "CPU";
    if (t.is_gpu()) return "GPU";
    return "another place";
  }

  void shape(const Rule& r, int64_t B) const {
    switch (r.dim) {
      case Dim::kPerSlot:
        per_slot(r.tensor, r.name, B);
        break;
      case Dim::kRows:
        rows_at_least(r.tensor, r.name, B);
        break;
      case Dim::kVector:
        vector(r.tensor, r.name);
        break;
      case Dim::kRank1:
        rank(r.tensor, r.name, 1);
        break;
    }
  }

  const char* op_;
  mutable const char* batch_name_ = nullptr;
  mutable int64_t batch_ = -1;
};

// The outputs of an op's in-place tensors, `<name>_out` each, in order (the convention of every op
// here), and the in-place map from each tensor to its output: FDSPEC_INPLACE_OUTPUTS writes both.
inline std::vector<std::string> inplace_outputs(std::initializer_list<const char*> names) {
  std::vector<std::string> out;
  for (const char* n : names) out.push_back(std::string(n) + "_out");
  return out;
}

inline std::unordered_map<std::string, std::string> inplace_map(
    std::initializer_list<const char*> names) {
  std::unordered_map<std::string, std::string> map;
  for (const char* n : names) map.emplace(n, std::string(n) + "_out");
  return map;
}

// Reads an integer environment variable: `dflt` when unset or empty, else the whole value parsed as
// a decimal int64. A value that is not one (garbage, trailing characters, out of the int64 range)
// is an error naming the op and the variable: a misspelt budget must not silently become the
// default. Called on every op call (on the host), as upstream does, so a runner may change it
// between steps.
inline int64_t env_int64(const OpChecks& c, const char* var, int64_t dflt) {
  const char* v = std::getenv(var);
  if (v == nullptr || *v == '\0') return dflt;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v, &end, 10);
  c.that(errno == 0 && end != v && *end == '\0',
         std::string("environment variable ") + var + " = '" + v +
             "' is not an integer in the int64 range (unset it to use the default " +
             std::to_string(dflt) + ")");
  return static_cast<int64_t>(x);
}

// `threshold` attribute convention: a negative value means "not given": read the environment.
// The walk computes T - S - L and T - 1 with S, L below 2^40 (B slots of int32 lengths), so the
// result is clamped to +-2^62: no overflow, and no decision changes (a T that low already makes
// every slot give up, one that high never binds).
inline int64_t resolve_threshold(const OpChecks& c, int64_t attr, const char* env_var,
                                 int64_t dflt) {
  constexpr int64_t kLimit = int64_t{1} << 62;
  return clamp_to<int64_t>(attr >= 0 ? attr : env_int64(c, env_var, dflt), -kLimit, kLimit);
}

// The batch-budget attributes of the n-gram/suffix family's params (ngram_match, hybrid_mtp_ngram,
// suffix_match): graph-mode padding and the threshold T, resolved as resolve_threshold does.
template <class Params>
void set_budget(const OpChecks& c, Params& p, int64_t max_draft_tokens, bool pad_to_max,
                int64_t threshold, const char* env_var, int64_t dflt) {
  p.max_draft_tokens = max_draft_tokens;
  p.pad_to_max = pad_to_max;
  p.threshold = resolve_threshold(c, threshold, env_var, dflt);
}

// B of the ops whose seq_lens_this_time (an int32 vector on the place of `first`) may be shorter
// than their row tensors (verify_draft_tokens, unified_update_model_status): its length, at most
// `rows`, which `rows_what` names in the error.
inline int64_t seq_lens_batch(const OpChecks& c, const paddle::Tensor& seq_lens_this_time,
                              const paddle::Tensor& first, const char* first_name, int64_t rows,
                              const char* rows_what) {
  const int64_t batch = c.vector_on(seq_lens_this_time, "seq_lens_this_time",
                                    paddle::DataType::INT32, first, first_name);
  c.that(batch <= rows, "seq_lens_this_time has " + std::to_string(batch) +
                            " slots, more than the " + std::to_string(rows) + " " + rows_what);
  return batch;
}

// A new output tensor. Paddle 2.6 gives a GPU tensor of no elements no storage, and its custom-op
// runtime then refuses it as an uninitialized output: such a tensor is one element's storage with
// its shape set to the empty one (nothing ever reads or writes it).
inline paddle::Tensor new_output(const std::vector<int64_t>& shape, paddle::DataType dtype,
                                 const paddle::Place& place) {
  int64_t numel = 1;
  for (const int64_t d : shape) numel *= d;
  if (numel > 0) return paddle::empty(shape, dtype, place);
  paddle::Tensor t = paddle::empty({1}, dtype, place);
  t.reshape(shape);
  return t;
}

#ifdef FDSPEC_WITH_CUDA
// The one place that asks Paddle for a tensor's stream (Tensor::stream() is deprecated upstream;
// when it goes, only this function changes).
inline cudaStream_t stream_of(const paddle::Tensor& t) {
  return reinterpret_cast<cudaStream_t>(t.stream());
}

inline void check_cuda(cudaError_t status, const char* op) {
  PD_CHECK(status == cudaSuccess, op, ": CUDA error: ", cudaGetErrorString(status));
}
#endif

// Raised when a GPU tensor reaches a build without CUDA kernels.
[[noreturn]] inline void no_gpu_kernels(const char* op) {
  PD_THROW(op,
           ": got GPU tensors, but this fastdeploy_spec library was built without CUDA kernels. "
           "Rebuild it with a CUDA toolkit present (CUDA_HOME set, FDSPEC_CPU_ONLY unset): "
           "python setup_ops.py install");
}

}  // namespace binding
}  // namespace fdspec

// The first check of every binding: each listed tensor is defined (see OpChecks::defined); the
// names in the errors are the parameter names as written here.
#define FDSPEC_CHECK_DEFINED(checks, ...) (checks).defined(#__VA_ARGS__, {__VA_ARGS__})

// FDSPEC_CHECK_DTYPE(checks, INT64, a, b): tensors a and b are int64 (see OpChecks::dtypes).
#define FDSPEC_CHECK_DTYPE(checks, dtype, ...) \
  (checks).dtypes(#__VA_ARGS__, ::paddle::DataType::dtype, {__VA_ARGS__})

// In a PD_BUILD_OP chain: `.Inputs({...}) FDSPEC_INPLACE_OUTPUTS("a", "b") .SetKernelFn(...)`
// declares the outputs a_out, b_out, each written in place of its input.
#define FDSPEC_INPLACE_OUTPUTS(...)                           \
  .Outputs(::fdspec::binding::inplace_outputs({__VA_ARGS__})) \
      .SetInplaceMap(::fdspec::binding::inplace_map({__VA_ARGS__}))

// Runs `cpu_fn(args...)` when `first` (the op's first tensor) is on the CPU and
// `gpu_fn(args..., stream of first)` when it is on a GPU, turning a CUDA error into a Paddle error.
// A macro because `gpu_fn` is not declared at all in a build without CUDA, where GPU tensors get
// the no_gpu_kernels error instead. FDSPEC_RUN_ON_PLACE is the usual case: one params struct.
#ifdef FDSPEC_WITH_CUDA
#define FDSPEC_RUN_ON_PLACE_WITH(op, first, cpu_fn, gpu_fn, ...)                                   \
  do {                                                                                             \
    if ((first).is_cpu()) {                                                                        \
      cpu_fn(__VA_ARGS__);                                                                         \
    } else {                                                                                       \
      ::fdspec::binding::check_cuda(gpu_fn(__VA_ARGS__, ::fdspec::binding::stream_of(first)), op); \
    }                                                                                              \
  } while (0)
#else
#define FDSPEC_RUN_ON_PLACE_WITH(op, first, cpu_fn, gpu_fn, ...) \
  do {                                                           \
    if ((first).is_cpu()) {                                      \
      cpu_fn(__VA_ARGS__);                                       \
    } else {                                                     \
      ::fdspec::binding::no_gpu_kernels(op);                     \
    }                                                            \
  } while (0)
#endif
#define FDSPEC_RUN_ON_PLACE(op, first, params, cpu_fn, gpu_fn) \
  FDSPEC_RUN_ON_PLACE_WITH(op, first, cpu_fn, gpu_fn, params)
