// torch_hal's aten -> catalog mapping: the table's row type, the generic
// kernel's per-call state, and the fallback entry points the kernel uses.
//
// One row maps a group of aten overloads (functional, in-place, out=) to one
// catalog op (sdk/catalog/ops/*.toml): which aten arguments become the op's
// inputs (in catalog order), which become attributes (with a conversion),
// how outputs are shaped, and at most one small hook for what does not fit
// the data (a semantic check, a catalog op chosen by rank). The generic
// kernel (mapped_kernel.cc) runs every row; nothing here is per-op code.
#ifndef TORCH_HAL_CSRC_MAPPING_HPP_
#define TORCH_HAL_CSRC_MAPPING_HPP_

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/SmallVector.h>

#include <string>
#include <vector>

#include "hal/runtime/op.hpp"

namespace pybind11 {
class module_;
}

namespace torch_hal {

// How an aten argument becomes a catalog input.
enum class InFrom {
  kTensor,       // Tensor (a 0-dim CPU tensor is uploaded, as PyTorch allows)
  kOptTensor,    // Tensor?: None -> absent input (nullptr)
  kScalar,       // Scalar: a 0-dim device tensor in the compute dtype (result_type with the first tensor input)
  kOptScalar,    // Scalar?: None -> absent input
  kTensorList,   // Tensor[]: one input per element (catalog variadic inputs)
  kAbsent,       // no aten argument: the optional catalog input is absent
};

// How an aten argument becomes a catalog attribute.
enum class AttrFrom {
  kScalar,           // Scalar -> scalar (int or float)
  kBool,             // bool (bool? None -> false)
  kInt,              // int / SymInt
  kIntAsInts,        // int -> [int] (a one-dim reduction)
  kOptIntAsInts,     // int? -> [int], None -> [] (all dims)
  kInts,             // int[] / SymInt[]
  kOptInts,          // int[]? -> [], None -> [] (all dims)
  kOptInt0,          // int? -> int, None -> 0 (the catalog's "none")
  kFloat,            // float
  kOptFloat,         // float? -> float, None -> the attribute is left out (catalog default)
  kOptDtype,         // ScalarType? -> dtype, None -> left out
  kString,           // str
  kOptString,        // str? -> str, None -> left out
  kTrue,             // no aten argument (arg nullptr): the constant true
  kFalse,            // no aten argument (arg nullptr): the constant false
  kReduction,        // int (at::Reduction) -> "none" / "mean" / "sum"
  kOptCorrection,    // Scalar? correction -> int, None -> 1; a non-integral value is declined
  kResultShape,      // no aten argument: the first return's sizes (graph-only view rows -> reshape)
  kTransposeDims,    // no aten argument: the permutation t / transpose.int(dim0, dim1) make of self
};

struct InputSpec {
  const char* arg;  // aten argument name (nullptr for kAbsent)
  InFrom kind;
};

struct AttrSpec {
  const char* arg;   // aten argument name
  const char* name;  // catalog attribute name
  AttrFrom kind;
};

// Output shapes and dtypes. kMeta runs the op's Meta kernel (any op);
// kElementwise has a direct rule on the hot path (every tensor input on the
// device, dense and of one dtype, scalars that do not promote it: output
// has the broadcast shape and that dtype, or bool for comparisons) and
// falls back to Meta otherwise.
enum class Shape { kMeta, kElementwise, kComparison };

struct Call;
// A row's hook: runs after inputs and attributes are built, before the
// launch. May change call.catalog, inputs, attrs or outputs; throws Decline
// when the aten call's semantics have no catalog equivalent.
using Hook = void (*)(Call&);

struct Mapping {
  std::vector<std::string> aten;  // overloads: "add.Tensor", "add_.Tensor", "add.out"
  const char* catalog;
  std::vector<InputSpec> inputs;
  std::vector<AttrSpec> attrs;
  Shape shape = Shape::kMeta;
  // How many aten returns are catalog outputs (-1: all); the rest keep what
  // Meta allocated (batch norm's empty `reserve`).
  int returns_to_catalog = -1;
  // Extra catalog outputs after those: "name" = aten argument NAME written in
  // place (batch norm's running stats), "~name" = scratch shaped like it;
  // either is an empty [0] tensor when the argument is None or absent.
  std::vector<const char*> extra_outputs;
  // For returns an output_mask turns off (undefined from Meta) but the
  // catalog op always writes: the scratch shape, from an argument (a
  // tensor's shape or an int list) or "#C" = [input.size(1)], "#O" =
  // [weight.size(0)]. Empty: the row has no masked outputs.
  std::vector<const char*> scratch;
  Hook hook = nullptr;
  // Runs after a successful launch (the outputs are written): checks what
  // only the results tell, e.g. a factorization's info output as PyTorch's
  // kernel does (it may raise). A row with one declines in graph lowering.
  Hook after = nullptr;
  // A row only the torch.compile lowering uses (never registered as an
  // eager kernel): PyTorch's views (view, permute, expand ...) stay views in
  // eager, and are copies (reshape, permute, copy) in a graph.
  bool graph_only = false;
};

// The table (mapping.cc). Built once; rows live for the process.
const std::vector<Mapping>& mappings();
// The row mapping aten overload NAME ("add.Tensor"), or nullptr. Thread-safe.
const Mapping* find_mapping(const std::string& name);

// A row's call in flight (mapped_kernel.cc builds it; hooks read/change it).
struct Call {
  // ATTRS starts as this thread's spare vector and gives its storage back at
  // the end: no heap allocation for a call's attributes once warm.
  Call(const Mapping& r, const c10::FunctionSchema& s, c10::ArrayRef<c10::IValue> a, c10::DeviceIndex d)
      : row(r), schema(s), args(a), dev(d), catalog(r.catalog) {
    attrs.swap(spare_attrs());
  }
  ~Call() {
    release_borrowed(inputs, borrowed_inputs_);
    release_borrowed(returns, borrowed_returns_);
    release_borrowed(outputs, borrowed_outputs_);
    attrs.clear();
    if (attrs.capacity() > spare_attrs().capacity()) attrs.swap(spare_attrs());
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;
  const Mapping& row;
  const c10::FunctionSchema& schema;
  c10::ArrayRef<c10::IValue> args;
  c10::DeviceIndex dev = 0;
  // Set by the torch.compile lowering: tensors are meta tensors standing
  // for graph values, nothing may run on the device (a hook that computes
  // with device ops declines), and Scalar inputs are 0-dim CPU tensors
  // (graph constants).
  bool lowering = false;
  // Set by the eager kernel's unboxed entry (borrowed arguments) for a row
  // without a hook: a device tensor argument used as it is becomes an input
  // (an in-place self the return and its output) by borrow, with no
  // reference-count change. A tensor Python holds is otherwise increfed and
  // decrefed here, and the C++ count falling back to 1 takes the GIL (the
  // kernel runs without it) - twice per `x + y`. Borrowed entries are
  // released, not destroyed, with the call: add them with the borrow_*
  // calls only and never assign over them (replace_output does it right).
  bool borrowing = false;
  // Inline storage for the common sizes: no heap allocation per call.
  using Tensors = c10::SmallVector<at::Tensor, 6>;
  const char* catalog;                       // starts as row.catalog; hooks set literals (outlive the call)
  Tensors inputs;                            // undefined = absent
  std::vector<hal::Attr> attrs;
  Tensors returns;                           // what the aten op returns (undefined: masked off)
  c10::SmallVector<c10::IValue, 3> other_returns;  // non-tensor returns (SymInt ...) as Meta gave them
  Tensors outputs;                           // the catalog op's outputs, in order
  const c10::IValue& arg(const char* name) const;
  // A Tensor? argument: undefined for None (or an undefined tensor).
  at::Tensor optional_tensor(const char* name) const;

  // Appends defined T by borrow (BORROWING set; T outlives the call): an
  // input, a return, or output = return R (borrowed when that return is).
  void borrow_input(const at::Tensor& t) { borrow_into(inputs, borrowed_inputs_, t); }
  void borrow_return(const at::Tensor& t) { borrow_into(returns, borrowed_returns_, t); }
  void push_output_of_return(size_t r) {
    if (r < 32 && (borrowed_returns_ >> r & 1u) != 0)
      borrow_into(outputs, borrowed_outputs_, returns[r]);
    else
      outputs.push_back(returns[r]);
  }
  // Sets output I to T, releasing a borrowed one first.
  void replace_output(size_t i, at::Tensor t) {
    if (i < 32 && (borrowed_outputs_ >> i & 1u) != 0) {
      outputs[i].unsafeReleaseTensorImpl();
      borrowed_outputs_ &= ~(uint32_t{1} << i);
    }
    outputs[i] = std::move(t);
  }

 private:
  static void borrow_into(Tensors& list, uint32_t& mask, const at::Tensor& t) {
    TORCH_INTERNAL_ASSERT(t.defined() && list.size() < 32, "torch_hal: borrowing an undefined tensor or past 32");
    mask |= uint32_t{1} << list.size();
    list.push_back(c10::MaybeOwnedTraits<at::Tensor>::createBorrow(t));
  }
  static void release_borrowed(Tensors& list, uint32_t mask) {
    for (size_t i = 0; mask != 0; ++i, mask >>= 1)
      if ((mask & 1u) != 0) list[i].unsafeReleaseTensorImpl();
  }
  uint32_t borrowed_inputs_ = 0, borrowed_returns_ = 0, borrowed_outputs_ = 0;
  static std::vector<hal::Attr>& spare_attrs() {
    thread_local std::vector<hal::Attr> spare;
    return spare;
  }
};

// Thrown by a hook (or the kernel) when the plugin cannot run this call as
// mapped: the call then goes to decomposition, then the CPU fallback.
struct Decline {
  std::string reason;
};

// The catalog "scalar" attribute NAME = V (int or float); throws c10::Error
// for a complex V.
hal::Attr scalar_attr(std::string name, const c10::Scalar& v);

// ---- fallback.cc ----

// Runs OP (its arguments on STACK) without a catalog op: a PyTorch
// decomposition when one exists and the op is not already being decomposed
// on this thread (counted), else the counted boxed CPU fallback. REASON
// says why the op did not run as a catalog op.
void run_without_catalog(const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::string& reason);
// Straight to the counted CPU fallback (no decomposition).
void run_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack, const std::string& reason);
// Whether HAL_FORCE_FALLBACK_OPS names OP ("add.Tensor": by name, or a full
// match of one of its comma-separated regexes, with or without "aten::").
bool forced_to_cpu(const std::string& op);
// explain(): whether calls are being recorded, and one record (catalog op
// and plugin that ran OP). Thread-safe.
bool explaining() noexcept;
void record_catalog_run(const std::string& op, const std::string& catalog, c10::DeviceIndex dev);
// Adds this area's functions to torch_hal._C (decomposer registration,
// decomposition_stats, explain records, the table's unregistered rows).
void bind_kernels(pybind11::module_& m);

}  // namespace torch_hal

#endif  // TORCH_HAL_CSRC_MAPPING_HPP_
