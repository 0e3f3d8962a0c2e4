#include "elementwise_fusion.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>

#include "../ops/cpu_kernel.hpp"
#include "../ops/elementwise_fns.hpp"
#include "../ops/vector_math.hpp"
#include "hal/sdk/graph_uses.hpp"

namespace hal::cpu {
namespace {

using sdk::Graph;
using sdk::GraphConstant;
using sdk::GraphNode;
using sdk::GraphValue;
using sdk::kNoValue;
using sdk::Tensor;

// Elements per tile: a register is 2 KiB, so a chain's live registers stay
// in L1/L2 while every node runs over the tile.
constexpr int64_t kTile = 512;
// Below this many elements a step runs on the calling thread (as the
// kernels' parallel_for grain): waking the team costs more than the work.
constexpr int64_t kSerialElements = 32768;
// The most nodes one horizontal step takes (its parts' nodes together).
constexpr size_t kMaxStepNodes = 4096;

// ---- tile functions -------------------------------------------------------
// OUT[i] = f(A[i] [, B[i] [, C[i]]]) for i < N. OUT never aliases an operand
// (registers are allocated so), hence __restrict and vectorised loops.
using UnaryFn = void (*)(float* __restrict out, const float* __restrict a, int64_t n);
using BinaryFn = void (*)(float* __restrict out, const float* __restrict a, const float* __restrict b, int64_t n,
                          float alpha);
using TernaryFn = void (*)(float* __restrict out, const float* __restrict a, const float* __restrict b,
                           const float* __restrict c, int64_t n, float alpha);

#define HAL_CPU_TILE_UNARY(NAME, TYPES, EXPR)                                                              \
  __attribute__((flatten)) void NAME##_tile(float* __restrict o, const float* __restrict a, int64_t n) { \
    using V = float;                                                                                     \
    for (int64_t i = 0; i < n; ++i) {                                                                    \
      const V x = a[i];                                                                                  \
      o[i] = EXPR;                                                                                       \
    }                                                                                                    \
  }
HAL_CPU_SHARED_UNARY(HAL_CPU_TILE_UNARY)
#undef HAL_CPU_TILE_UNARY

struct UnaryEntry {
  const char* name;
  UnaryFn fn;
};
#define HAL_CPU_TILE_UNARY_ENTRY(NAME, TYPES, EXPR) {#NAME, NAME##_tile},
const UnaryEntry kUnary[] = {HAL_CPU_SHARED_UNARY(HAL_CPU_TILE_UNARY_ENTRY)};
#undef HAL_CPU_TILE_UNARY_ENTRY

__attribute__((flatten)) void gelu_tile(float* __restrict o, const float* __restrict a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = vmath::gelu(a[i], false);
}
__attribute__((flatten)) void gelu_tanh_tile(float* __restrict o, const float* __restrict a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = vmath::gelu(a[i], true);
}

// copy: its input converted as it is loaded and broadcast by the walk (a
// mean's backward expands a per-row value this way).
void identity_tile(float* __restrict o, const float* __restrict a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a[i];
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// As the kernels compute float32 (elementwise.cc): alpha == 1 skips the
// multiply; maximum/minimum and clamp propagate NaN; pow's exponents 2 and
// 1 are exact products.
#define HAL_CPU_TILE_BINARY(NAME, EXPR)                                                                  \
  void NAME##_tile(float* __restrict o, const float* __restrict a, const float* __restrict b, int64_t n, \
                   [[maybe_unused]] float alpha) {                                                       \
    for (int64_t i = 0; i < n; ++i) o[i] = EXPR;                                                         \
  }
HAL_CPU_TILE_BINARY(add, a[i] + b[i])
HAL_CPU_TILE_BINARY(add_alpha, a[i] + alpha * b[i])
HAL_CPU_TILE_BINARY(sub, a[i] - b[i])
HAL_CPU_TILE_BINARY(sub_alpha, a[i] - alpha * b[i])
HAL_CPU_TILE_BINARY(mul, a[i] * b[i])
HAL_CPU_TILE_BINARY(div, a[i] / b[i])
HAL_CPU_TILE_BINARY(maximum, std::isnan(a[i]) || std::isnan(b[i]) ? kNaN : a[i] > b[i] ? a[i] : b[i])
HAL_CPU_TILE_BINARY(minimum, std::isnan(a[i]) || std::isnan(b[i]) ? kNaN : a[i] < b[i] ? a[i] : b[i])
HAL_CPU_TILE_BINARY(clamp_min, std::isnan(a[i]) || std::isnan(b[i]) ? kNaN : a[i] < b[i] ? b[i] : a[i])
HAL_CPU_TILE_BINARY(clamp_max, std::isnan(a[i]) || std::isnan(b[i]) ? kNaN : a[i] > b[i] ? b[i] : a[i])
HAL_CPU_TILE_BINARY(pow_any, b[i] == 2.0f ? a[i] * a[i] : b[i] == 1.0f ? a[i] : std::pow(a[i], b[i]))
// x ** 2 (a norm's square) and x ** 1 (its backward's) are the usual
// exponents: a tile of only 2s or only 1s runs as a vector loop (the same
// values), where the mixed loop branches per element and calls pow.
void pow_tile(float* __restrict o, const float* __restrict a, const float* __restrict b, int64_t n, float alpha) {
  const float e = n > 0 ? b[0] : 0.0f;
  int64_t same = 0;  // a count vectorises (an "all" flag compiled to a scalar loop)
  for (int64_t i = 0; i < n; ++i) same += b[i] == e ? 1 : 0;
  if (same != n || (e != 2.0f && e != 1.0f)) return pow_any_tile(o, a, b, n, alpha);
  if (e == 2.0f) {
    for (int64_t i = 0; i < n; ++i) o[i] = a[i] * a[i];
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = a[i];
  }
}
// Comparisons of float32 values give 1 or 0 (a bool as float32; NaN compares
// false but for ne).
HAL_CPU_TILE_BINARY(gt, a[i] > b[i] ? 1.0f : 0.0f)
HAL_CPU_TILE_BINARY(ge, a[i] >= b[i] ? 1.0f : 0.0f)
HAL_CPU_TILE_BINARY(lt, a[i] < b[i] ? 1.0f : 0.0f)
HAL_CPU_TILE_BINARY(le, a[i] <= b[i] ? 1.0f : 0.0f)
HAL_CPU_TILE_BINARY(eq, a[i] == b[i] ? 1.0f : 0.0f)
HAL_CPU_TILE_BINARY(ne, a[i] != b[i] ? 1.0f : 0.0f)
#undef HAL_CPU_TILE_BINARY

struct CompareEntry {
  const char* name;
  BinaryFn fn;
};
const CompareEntry kCompare[] = {{"gt", gt_tile}, {"ge", ge_tile}, {"lt", lt_tile},
                                 {"le", le_tile}, {"eq", eq_tile}, {"ne", ne_tile}};

float clamp_both(float x, float lo, float hi) {
  x = std::isnan(x) || std::isnan(lo) ? kNaN : x < lo ? lo : x;
  return std::isnan(x) || std::isnan(hi) ? kNaN : x > hi ? hi : x;
}

#define HAL_CPU_TILE_TERNARY(NAME, EXPR)                                                                 \
  void NAME##_tile(float* __restrict o, const float* __restrict a, const float* __restrict b,           \
                   const float* __restrict c, int64_t n, [[maybe_unused]] float alpha) {                 \
    for (int64_t i = 0; i < n; ++i) o[i] = EXPR;                                                         \
  }
HAL_CPU_TILE_TERNARY(lerp, a[i] + c[i] * (b[i] - a[i]))
HAL_CPU_TILE_TERNARY(addcmul, a[i] + alpha * b[i] * c[i])
HAL_CPU_TILE_TERNARY(addcdiv, a[i] + alpha * b[i] / c[i])
HAL_CPU_TILE_TERNARY(clamp, clamp_both(a[i], b[i], c[i]))
HAL_CPU_TILE_TERNARY(where, a[i] != 0.0f ? b[i] : c[i])  // the condition: a bool loaded as 1 or 0
#undef HAL_CPU_TILE_TERNARY

// Loads N elements of an input as float32 into a tile register (other
// dtypes converted, as the kernels cast their inputs to the float32 they
// compute in), from SRC every STRIDE bytes (0: one value, broadcast).
using LoadFn = void (*)(float* __restrict dst, const char* src, int64_t stride, int64_t n);

template <class T>
void load_as_float(float* __restrict dst, const char* src, int64_t stride, int64_t n) {
  if (stride == 0) {
    std::fill_n(dst, n, static_cast<float>(*reinterpret_cast<const T*>(src)));
    return;
  }
  if (stride == static_cast<int64_t>(sizeof(T))) {  // dense rows (a permuted input's, a converted one): a vector loop
    const T* s = reinterpret_cast<const T*>(src);
    for (int64_t e = 0; e < n; ++e) dst[e] = static_cast<float>(s[e]);
    return;
  }
  for (int64_t e = 0; e < n; ++e) dst[e] = static_cast<float>(*reinterpret_cast<const T*>(src + e * stride));
}

// The load of a DTYPE input. A dense float32 input is read in place instead.
LoadFn load_fn(hal_dtype_e dtype) {
  return sdk::kernel::dispatch(dtype, [](auto tag) -> LoadFn { return &load_as_float<typename decltype(tag)::type>; });
}
constexpr LoadFn kLoadFloat32 = &load_as_float<float>;

// Stores N float32 results from a tile register into an output (float16,
// bfloat16: a chain of them computes in float32 and rounds once, where it
// is written), at DST every STRIDE bytes.
using StoreFn = void (*)(char* dst, const float* __restrict src, int64_t stride, int64_t n);

template <class T>
void store_from_float(char* dst, const float* __restrict src, int64_t stride, int64_t n) {
  if (stride == static_cast<int64_t>(sizeof(T))) {  // dense (an update stored after the instruction reading its input)
    T* d = reinterpret_cast<T*>(dst);
    for (int64_t e = 0; e < n; ++e) d[e] = static_cast<T>(src[e]);
    return;
  }
  for (int64_t e = 0; e < n; ++e) *reinterpret_cast<T*>(dst + e * stride) = static_cast<T>(src[e]);
}

// A comparison's 1 or 0 as bool.
void store_bool(char* dst, const float* __restrict src, int64_t stride, int64_t n) {
  for (int64_t e = 0; e < n; ++e) *reinterpret_cast<bool*>(dst + e * stride) = src[e] != 0.0f;
}

// The store of a DTYPE output (float32, float16, bfloat16 or bool). A dense
// float32 output is written in place instead.
StoreFn store_fn(hal_dtype_e dtype) {
  if (dtype == HAL_DTYPE_BOOL) return &store_bool;
  if (dtype == HAL_DTYPE_FLOAT16) return &store_from_float<sdk::kernel::Half>;
  if (dtype == HAL_DTYPE_BFLOAT16) return &store_from_float<sdk::kernel::BFloat16>;
  return &store_from_float<float>;
}
constexpr StoreFn kStoreFloat32 = &store_from_float<float>;

// A node's element function over a tile: one of the three kinds, and its scalar.
struct TileFn {
  UnaryFn unary = nullptr;
  BinaryFn binary = nullptr;
  TernaryFn ternary = nullptr;
  float alpha = 1.0f;
};

// What a node computes over a tile, and the values it reads (absent optional
// inputs dropped).
struct TileOp {
  TileFn fn;
  std::vector<uint32_t> operands;
};

float scalar_attr(const GraphNode& node, size_t i) {
  return static_cast<float>(node.attrs[i].as_scalar().to_double());
}

// NODE's tile operation; false when it has none.
bool tile_op(const GraphNode& node, TileOp& t) {
  const std::string op = node.op();
  t = TileOp{};
  TileFn& f = t.fn;
  if (op == "gelu") {
    const std::string& approximate = node.attrs[0].as_string();
    f.unary = approximate == "none" ? gelu_tile : approximate == "tanh" ? gelu_tanh_tile : nullptr;
  } else if (op == "add" || op == "sub") {
    const sdk::Scalar& s = node.attrs[0].as_scalar();
    const bool unit = s.to_double() == 1.0 && s.to_int() == 1;
    f.alpha = static_cast<float>(s.to_double());
    f.binary = op == "add" ? (unit ? add_tile : add_alpha_tile) : (unit ? sub_tile : sub_alpha_tile);
  } else if (op == "copy") {
    f.unary = identity_tile;
  } else if (op == "mul") {
    f.binary = mul_tile;
  } else if (op == "div") {
    f.binary = node.attrs[0].as_string() == "none" ? div_tile : nullptr;
  } else if (op == "maximum") {
    f.binary = maximum_tile;
  } else if (op == "minimum") {
    f.binary = minimum_tile;
  } else if (op == "pow") {
    f.binary = pow_tile;
  } else if (op == "clamp") {
    const bool lo = node.inputs.size() > 1 && node.inputs[1] != kNoValue;
    const bool hi = node.inputs.size() > 2 && node.inputs[2] != kNoValue;
    if (lo && hi) f.ternary = clamp_tile;
    else if (lo) f.binary = clamp_min_tile;
    else if (hi) f.binary = clamp_max_tile;
  } else if (op == "lerp") {
    f.ternary = lerp_tile;
  } else if (op == "where") {
    f.ternary = where_tile;
  } else if (op == "addcmul" || op == "addcdiv") {
    f.ternary = op == "addcmul" ? addcmul_tile : addcdiv_tile;
    f.alpha = scalar_attr(node, 0);
  } else {
    for (const UnaryEntry& e : kUnary)
      if (op == e.name) f.unary = e.fn;
    for (const CompareEntry& e : kCompare)
      if (op == e.name) f.binary = e.fn;
  }
  if (f.unary == nullptr && f.binary == nullptr && f.ternary == nullptr) return false;
  for (uint32_t v : node.inputs)
    if (v != kNoValue) t.operands.push_back(v);
  const size_t want = f.unary != nullptr ? 1 : f.binary != nullptr ? 2 : 3;
  return t.operands.size() == want;
}

// ---- the program ------------------------------------------------------------
// A part is one vertical loop: a chain of nodes of one output shape. Its
// slots: its inputs first, then one per node (its output). Each slot has a
// register (a tile buffer): the inputs' from the tile's start (they are
// loaded first), a node's from its instruction; reused once the slot's last
// reader ran.
struct Instr {
  TileFn fn;
  int a = -1, b = -1, c = -1, dst = -1;  // slots
};

enum class ReduceKind { kNone, kSum, kMean, kMax, kMin };

// An input read through a slice: the entries START, START + STEP, ... (COUNT
// of them) of dim DIM of the step's input (an index_select by a constant
// arange, as slices, chunks and ONNX's Slice are lowered), read in place. DIM
// < 0: the input itself.
struct SliceView {
  int dim = -1;
  int64_t start = 0, step = 1, count = 0;
};

// T seen through V (the same memory).
Tensor apply_view(const Tensor& t, const SliceView& v) {
  Tensor r = t;
  const int64_t bytes = v.start * t.strides[v.dim] * static_cast<int64_t>(t.element_size());
  r.shape[v.dim] = v.count;
  r.strides[v.dim] = t.strides[v.dim] * v.step;
  r.data = t.data == nullptr ? nullptr : static_cast<char*>(t.data) + bytes;  // make() sees no data
  r.byte_offset = t.byte_offset + static_cast<uint64_t>(bytes);
  return r;
}

struct Part {
  std::vector<size_t> input_index;   // per input slot: the step's input it reads
  std::vector<SliceView> view;       // per input slot: read through a slice, or whole
  std::vector<LoadFn> load;          // per input slot: how a tile of it is loaded
  std::vector<size_t> output_index;  // per part output: the step's output it writes
  std::vector<StoreFn> store;        // per part output: how a tile of it is stored
  std::vector<std::vector<int>> writer_reads;  // per part output: the input slots its instruction reads
  std::vector<Instr> code;
  std::vector<int> output_of_slot;   // per slot: the part output it is, or -1
  std::vector<int> reg;              // per slot
  int registers = 0;
  // A reduction ending the part: its last instruction's value (of rank
  // CHAIN_RANK) reduced over its REDUCE_DIMS trailing dims is the step's
  // output REDUCE_OUTPUT, stored by REDUCE_STORE.
  ReduceKind reduce = ReduceKind::kNone;
  int reduce_dims = 0, chain_rank = 0;
  size_t reduce_output = 0;
  StoreFn reduce_store = nullptr;
};

// This run's views of PART's sliced inputs, per input slot, into VIEWED.
void view_inputs(const Part& part, const Tensor* const* inputs, std::vector<Tensor>& viewed) {
  viewed.resize(part.input_index.size());
  for (size_t i = 0; i < part.input_index.size(); ++i)
    if (part.view[i].dim >= 0) viewed[i] = apply_view(*inputs[part.input_index[i]], part.view[i]);
}

// PART's input slot I: the step's input, or this run's view of it (VIEWED, from view_inputs).
const Tensor& part_input(const Part& part, size_t i, const Tensor* const* inputs, const std::vector<Tensor>& viewed) {
  return part.view[i].dim < 0 ? *inputs[part.input_index[i]] : viewed[i];
}

// Gives PART's slots registers (Part::reg, Part::registers; its first
// INPUTS slots are its inputs) by liveness: a slot's register is free after
// its last reader, and a node's output never shares its operands' registers.
void assign_registers(Part& part, size_t inputs) {
  const size_t slots = part.output_of_slot.size();
  std::vector<size_t> last_read(slots, 0);
  std::vector<bool> read(slots, false);
  for (size_t j = 0; j < part.code.size(); ++j)
    for (int s : {part.code[j].a, part.code[j].b, part.code[j].c})
      if (s >= 0) {
        last_read[static_cast<size_t>(s)] = j;
        read[static_cast<size_t>(s)] = true;
      }
  part.reg.assign(slots, -1);
  std::vector<int> free_regs;
  auto take = [&]() {
    if (!free_regs.empty()) {
      const int r = free_regs.back();
      free_regs.pop_back();
      return r;
    }
    return part.registers++;
  };
  // Inputs are loaded at the start of each tile: their registers are live from there.
  for (size_t i = 0; i < inputs; ++i) part.reg[i] = take();
  for (size_t j = 0; j < part.code.size(); ++j) {
    const Instr& in = part.code[j];
    part.reg[static_cast<size_t>(in.dst)] = take();
    // Free what this instruction read last (once), and its own output when nothing reads it.
    std::vector<int> done;
    for (int s : {in.a, in.b, in.c})
      if (s >= 0 && last_read[static_cast<size_t>(s)] == j && std::find(done.begin(), done.end(), s) == done.end())
        done.push_back(s);
    if (!read[static_cast<size_t>(in.dst)]) done.push_back(in.dst);
    for (int s : done) free_regs.push_back(part.reg[static_cast<size_t>(s)]);
  }
}

// How a part walks its operands (outputs, then inputs) for one layout: the
// outer dims and the innermost one, each with byte strides per operand,
// after size-1 dims are dropped and dims every operand walks contiguously
// are merged.
struct Walk {
  std::vector<int64_t> outer;                 // sizes, outermost first
  std::vector<std::vector<int64_t>> stride;   // per operand, per outer dim (bytes)
  int64_t inner = 1;
  std::vector<int64_t> inner_stride;          // per operand (bytes)
  int64_t outer_count = 1;
  int64_t numel = 0;

  Walk() = default;
  Walk(const std::vector<const Tensor*>& operands, const Tensor& shape) {
    const size_t k = operands.size();
    const int rank = shape.rank;
    numel = shape.numel();
    std::vector<int64_t> sizes;
    std::vector<std::vector<int64_t>> st(k);  // per operand, per kept dim
    for (int d = 0; d < rank; ++d) {
      if (shape.shape[d] == 1) continue;
      sizes.push_back(shape.shape[d]);
      for (size_t o = 0; o < k; ++o) {
        const Tensor& t = *operands[o];
        const int td = d - (rank - t.rank);  // right-aligned (broadcast)
        const bool broadcast = td < 0 || t.shape[td] == 1;
        st[o].push_back(broadcast ? 0 : t.strides[td] * static_cast<int64_t>(sdk::dtype_size(t.dtype)));
      }
    }
    // Merge dim d into d + 1 where every operand steps over d as over d + 1 whole.
    for (size_t d = sizes.size(); d-- > 1;) {
      bool mergeable = true;
      for (size_t o = 0; o < k && mergeable; ++o) mergeable = st[o][d - 1] == st[o][d] * sizes[d];
      if (!mergeable) continue;
      sizes[d - 1] *= sizes[d];
      sizes.erase(sizes.begin() + static_cast<std::ptrdiff_t>(d));
      for (size_t o = 0; o < k; ++o) {
        st[o][d - 1] = st[o][d];
        st[o].erase(st[o].begin() + static_cast<std::ptrdiff_t>(d));
      }
    }
    inner_stride.assign(k, 0);
    stride.assign(k, {});
    if (!sizes.empty()) {
      inner = sizes.back();
      for (size_t o = 0; o < k; ++o) inner_stride[o] = st[o].back();
      outer.assign(sizes.begin(), sizes.end() - 1);
      for (size_t o = 0; o < k; ++o) stride[o].assign(st[o].begin(), st[o].end() - 1);
    }
    for (int64_t s : outer) outer_count *= s;
  }
};

// The byte offsets of element INDEX (row-major over W's dims) for each of
// W's operands, added to BASE.
void add_offsets(const Walk& w, int64_t index, std::vector<char*>& base) {
  const int64_t i = index % w.inner;
  int64_t rest = index / w.inner;
  for (size_t o = 0; o < base.size(); ++o) base[o] += i * w.inner_stride[o];
  for (size_t d = w.outer.size(); d-- > 0;) {
    const int64_t idx = rest % w.outer[d];
    rest /= w.outer[d];
    for (size_t o = 0; o < base.size(); ++o) base[o] += idx * w.stride[o][d];
  }
}

bool same_layout(const Tensor& a, const Tensor& b) {
  if (a.rank != b.rank) return false;
  for (int d = 0; d < a.rank; ++d)
    if (a.shape[d] != b.shape[d] || a.strides[d] != b.strides[d]) return false;
  return true;
}

// One part's state in a step: its walk for the layouts last seen (made at
// make, remade when a run's operands are laid out otherwise) and this
// run's operand addresses and units: outer index x tile, or, when the inner
// rows are short, blocks of ROWS rows of the last outer dim as one tile.
struct PartState {
  std::vector<Tensor> layout;  // per operand: shape and strides the walk is for
  Walk walk;
  std::vector<bool> single;    // per input slot: one element (a splat, set_splats)
  std::vector<bool> direct_layout;  // per part output: dense over a tile (may be written directly)
  std::vector<bool> direct;    // per part output, this run: written directly (not in an input's memory)
  int64_t tiles = 0, units = 0, first_unit = 0;
  int64_t rows = 1, blocks = 0;     // rows per tile (> 1: short rows), blocks per last outer dim
  std::vector<int64_t> row_stride;  // per operand: bytes between rows of a tile (the last outer dim's)
  std::vector<char*> data;          // per operand, this run
};

// How many rows of INNER elements one tile takes: 1 for long rows, else as
// many of the OUTER rows (the next dim out) as fit a register.
int64_t rows_per_tile(int64_t inner, int64_t outer) {
  return inner <= 0 || inner > kTile / 2 || outer <= 1 ? 1 : std::min(outer, kTile / inner);
}

// Memory of one chunk of a run: tile registers and the walk's cursors.
struct Scratch {
  struct Free {
    void operator()(float* f) const { std::free(f); }
  };
  std::unique_ptr<float, Free> regs;
  int capacity = 0;  // registers
  std::vector<float*> ptr;
  std::vector<char*> base;
  // Per input slot of the part running: a tile of copies of its one element
  // (set_splats), or nullptr: loaded per tile.
  std::vector<const float*> fixed;
  std::vector<float> splat;
};

// Fills SC.fixed for part P: each input slot whose operand holds one element
// (an optimizer's or a norm's scalar, a 0-dim constant) gets LENGTH copies
// (the most elements one of this run's tiles takes, at most kTile), made
// once here instead of per tile: a small tensor's part (a bias and its
// optimizer state) splats a handful, not a whole tile per scalar.
// ADDRESS(i): slot i's element; SINGLE(i): whether slot i is one element.
template <class Address, class Single>
void set_splats(const Part& p, Scratch& sc, int64_t length, Address address, Single single) {
  const size_t n_in = p.input_index.size();
  sc.fixed.assign(n_in, nullptr);
  size_t count = 0;
  for (size_t i = 0; i < n_in; ++i) count += single(i) ? 1 : 0;
  if (count == 0) return;
  length = std::clamp<int64_t>(length, 1, kTile);
  sc.splat.resize(count * static_cast<size_t>(length));
  float* next = sc.splat.data();
  for (size_t i = 0; i < n_in; ++i) {
    if (!single(i)) continue;
    p.load[i](next, address(i), 0, length);
    sc.fixed[i] = next;
    next += length;
  }
}

// SC's registers: at least REGISTERS tiles.
void reserve(Scratch& sc, int registers) {
  if (sc.capacity >= registers) return;
  sc.regs.reset(static_cast<float*>(
      std::aligned_alloc(64, static_cast<size_t>(std::max(registers, 1)) * kTile * sizeof(float))));
  if (!sc.regs) {
    sc.capacity = 0;
    sdk::fail(HAL_STATUS_OUT_OF_MEMORY, "fused loop: ", registers, " tile registers");
  }
  sc.capacity = registers;
}

// Threads for a loop over ELEMENTS in UNITS independent units.
int loop_threads(int64_t elements, int64_t units) {
  if (elements < kSerialElements || omp_in_parallel()) return 1;
  return static_cast<int>(
      std::min<int64_t>({omp_get_max_threads(), units, (elements + kSerialElements - 1) / kSerialElements}));
}

// Runs BODY(chunk, begin, end) over [0, UNITS) in THREADS chunks; the first
// exception is rethrown here (none may leave an OpenMP region).
template <class F>
void parallel_chunks(int threads, int64_t units, F&& body) {
  if (threads <= 1) {
    body(0, int64_t{0}, units);
    return;
  }
  std::exception_ptr error;
  std::mutex error_mu;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int c = 0; c < threads; ++c) {
    try {
      body(c, units * c / threads, units * (c + 1) / threads);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

// One tile of P: ROWS rows of N elements (several short rows make one tile,
// so a chain's per-tile cost is not paid per 8 or 32 elements). Its inputs
// are read in place when dense float32, else loaded into their registers
// (filled when broadcast, gathered when strided, converted), row by row; its
// code runs over all ROWS * N elements; its outputs are written in place
// where DIRECT, else stored from their registers row by row. BASE: per
// operand (P's outputs, then its inputs) the tile's first element; STRIDE:
// per operand, the bytes between elements; ROW_STRIDE: per operand, the
// bytes between rows (only row 0 is read when ROWS is 1). SC.ptr has one
// entry per slot. Returns the tile of P's last instruction (ROWS * N
// elements, contiguous).
const float* run_tile(const Part& p, Scratch& sc, char* const* base, const int64_t* stride, const int64_t* row_stride,
                      const std::vector<bool>& direct, int64_t n, int64_t rows) {
  const size_t n_out = p.output_index.size(), n_in = p.input_index.size();
  const int64_t total = n * rows;
  auto reg = [&](int slot) { return sc.regs.get() + static_cast<int64_t>(p.reg[static_cast<size_t>(slot)]) * kTile; };
  std::vector<float*>& ptr = sc.ptr;
  for (size_t i = 0; i < n_in; ++i) {
    const size_t o = n_out + i;
    if (!sc.fixed.empty() && sc.fixed[i] != nullptr) {  // a splat, read only
      ptr[i] = const_cast<float*>(sc.fixed[i]);
      continue;
    }
    if (p.load[i] == kLoadFloat32 && stride[o] == static_cast<int64_t>(sizeof(float)) &&
        (rows == 1 || row_stride[o] == n * static_cast<int64_t>(sizeof(float)))) {
      ptr[i] = reinterpret_cast<float*>(base[o]);
      continue;
    }
    ptr[i] = reg(static_cast<int>(i));
    for (int64_t r = 0; r < rows; ++r)
      p.load[i](ptr[i] + r * n, base[o] + r * row_stride[o], stride[o], n);
  }
  const float* last = nullptr;
  for (const Instr& in : p.code) {
    const int out = p.output_of_slot[static_cast<size_t>(in.dst)];
    const bool in_place = out >= 0 && direct[static_cast<size_t>(out)];
    float* dst = in_place ? reinterpret_cast<float*>(base[static_cast<size_t>(out)]) : reg(in.dst);
    const float* a = ptr[static_cast<size_t>(in.a)];
    const TileFn& f = in.fn;
    if (f.unary != nullptr) {
      f.unary(dst, a, total);
    } else if (f.binary != nullptr) {
      f.binary(dst, a, ptr[static_cast<size_t>(in.b)], total, f.alpha);
    } else {
      f.ternary(dst, a, ptr[static_cast<size_t>(in.b)], ptr[static_cast<size_t>(in.c)], total, f.alpha);
    }
    ptr[static_cast<size_t>(in.dst)] = dst;
    last = dst;
    if (out >= 0 && !in_place)
      for (int64_t r = 0; r < rows; ++r)
        p.store[static_cast<size_t>(out)](base[static_cast<size_t>(out)] + r * row_stride[out], dst + r * n,
                                          stride[out], n);
  }
  return last;
}

// Whether a step of PARTS may write its output OUTPUT into the memory of
// its input INPUT (HostGraphFusion::writes_in_place): a loop part makes it,
// reading INPUT whole (not through a slice: the same element as it writes)
// and only in instructions up to the one making OUTPUT, and no other part
// reads INPUT. LoopStep::run stores such an output from its register after
// that instruction (a tile function's operands never alias its output).
bool writes_in_place(const std::vector<Part>& parts, size_t input, size_t output) {
  const Part* owner = nullptr;
  int writer = -1;  // the instruction making OUTPUT
  for (const Part& p : parts) {
    if (p.reduce != ReduceKind::kNone) return false;
    for (size_t k = 0; k < p.output_index.size(); ++k)
      if (p.output_index[k] == output)
        for (size_t j = 0; j < p.code.size(); ++j)
          if (p.output_of_slot[static_cast<size_t>(p.code[j].dst)] == static_cast<int>(k)) {
            owner = &p;
            writer = static_cast<int>(j);
          }
  }
  if (owner == nullptr) return false;
  for (const Part& p : parts)
    for (size_t i = 0; i < p.input_index.size(); ++i) {
      if (p.input_index[i] != input) continue;
      if (&p != owner || p.view[i].dim >= 0) return false;
      for (size_t j = static_cast<size_t>(writer) + 1; j < p.code.size(); ++j)
        for (int s : {p.code[j].a, p.code[j].b, p.code[j].c})
          if (s == static_cast<int>(i)) return false;
    }
  return true;
}

// Runs its parts (one, or several independent ones: a horizontal step) as
// one parallel loop over all their units.
class LoopStep final : public sdk::HostGraphStep {
 public:
  LoopStep(std::shared_ptr<const std::vector<Part>> parts, const std::vector<Tensor>& inputs,
           const std::vector<Tensor>& outputs)
      : parts_(std::move(parts)), state_(parts_->size()), viewed_(parts_->size()) {
    std::vector<const Tensor*> in, out;
    for (const Tensor& t : inputs) in.push_back(&t);
    for (const Tensor& t : outputs) out.push_back(&t);
    for (size_t p = 0; p < parts_->size(); ++p) {
      view_inputs((*parts_)[p], in.data(), viewed_[p]);
      std::vector<const Tensor*> ops = operands(p, in.data(), out.data());
      remake(p, ops);
      registers_ = std::max(registers_, (*parts_)[p].registers);
    }
  }

  void run(const Tensor* const* inputs, const Tensor* const* outputs) override {
    int64_t units = 0, elements = 0;
    for (size_t p = 0; p < parts_->size(); ++p) {
      const Part& part = (*parts_)[p];
      PartState& s = state_[p];
      view_inputs(part, inputs, viewed_[p]);
      // operand(o): outputs, then inputs (operands()'s order), without building the list.
      auto operand = [&](size_t o) -> const Tensor& {
        const size_t n_out = part.output_index.size();
        return o < n_out ? *outputs[part.output_index[o]] : part_input(part, o - n_out, inputs, viewed_[p]);
      };
      bool same = true;
      for (size_t o = 0; o < s.layout.size() && same; ++o) same = same_layout(operand(o), s.layout[o]);
      if (!same) remake(p, operands(p, inputs, outputs));
      for (size_t o = 0; o < s.layout.size(); ++o) s.data[o] = static_cast<char*>(operand(o).data);
      // An output given in the memory of an input its own instruction reads
      // (updated in place) is stored after that instruction, not written by
      // it while it reads (a tile function's operands never alias its output).
      const size_t n_out = part.output_index.size();
      for (size_t o = 0; o < n_out; ++o) {
        s.direct[o] = s.direct_layout[o];
        for (int slot : part.writer_reads[o])
          if (s.data[n_out + static_cast<size_t>(slot)] == s.data[o]) s.direct[o] = false;
      }
      s.first_unit = units;
      units += s.units;
      elements += s.walk.numel;
    }
    if (units == 0) return;
    const int threads = loop_threads(elements, units);
    if (scratch_.size() < static_cast<size_t>(threads)) scratch_.resize(static_cast<size_t>(threads));
    for (int c = 0; c < threads; ++c) reserve(scratch_[static_cast<size_t>(c)], registers_);
    parallel_chunks(threads, units, [&](int c, int64_t begin, int64_t end) {
      run_range(scratch_[static_cast<size_t>(c)], begin, end);
    });
  }

 private:
  // Part P's operands: its outputs, then its inputs.
  std::vector<const Tensor*> operands(size_t p, const Tensor* const* inputs, const Tensor* const* outputs) const {
    const Part& part = (*parts_)[p];
    std::vector<const Tensor*> ops;
    ops.reserve(part.output_index.size() + part.input_index.size());
    for (size_t i : part.output_index) ops.push_back(outputs[i]);
    for (size_t i = 0; i < part.input_index.size(); ++i) ops.push_back(&part_input(part, i, inputs, viewed_[p]));
    return ops;
  }

  void remake(size_t p, const std::vector<const Tensor*>& ops) {
    const Part& part = (*parts_)[p];
    PartState& s = state_[p];
    s.layout.clear();
    for (const Tensor* t : ops) s.layout.push_back(*t);
    s.walk = Walk(ops, *ops[0]);
    const Walk& w = s.walk;
    s.rows = rows_per_tile(w.inner, w.outer.empty() ? 1 : w.outer.back());
    s.row_stride.assign(ops.size(), 0);
    if (s.rows > 1)
      for (size_t o = 0; o < ops.size(); ++o) s.row_stride[o] = w.stride[o].back();
    s.single.assign(part.input_index.size(), false);
    for (size_t i = 0; i < part.input_index.size(); ++i) s.single[i] = ops[part.output_index.size() + i]->numel() == 1;
    s.direct_layout.assign(part.output_index.size(), false);
    s.direct.assign(part.output_index.size(), false);
    for (size_t o = 0; o < part.output_index.size(); ++o)
      s.direct_layout[o] = part.store[o] == kStoreFloat32 && w.inner_stride[o] == static_cast<int64_t>(sizeof(float)) &&
                    (s.rows == 1 || s.row_stride[o] == w.inner * static_cast<int64_t>(sizeof(float)));
    s.tiles = (w.inner + kTile - 1) / kTile;
    if (w.numel == 0) {
      s.units = 0;
    } else if (s.rows > 1) {
      s.blocks = (w.outer.back() + s.rows - 1) / s.rows;
      s.units = w.outer_count / w.outer.back() * s.blocks;
    } else {
      s.units = w.outer_count * s.tiles;
    }
    s.data.assign(ops.size(), nullptr);
  }

  // Units [BEGIN, END) of the run, across parts.
  void run_range(Scratch& sc, int64_t begin, int64_t end) const {
    for (size_t p = 0; p < parts_->size() && begin < end; ++p) {
      const PartState& s = state_[p];
      const int64_t lo = std::max(begin, s.first_unit), hi = std::min(end, s.first_unit + s.units);
      if (lo < hi) run_units((*parts_)[p], s, sc, lo - s.first_unit, hi - s.first_unit);
    }
  }

  static void run_units(const Part& p, const PartState& s, Scratch& sc, int64_t begin, int64_t end) {
    const Walk& w = s.walk;
    const size_t ops = p.output_index.size() + p.input_index.size();
    sc.ptr.assign(p.reg.size(), nullptr);
    sc.base.assign(ops, nullptr);
    std::vector<char*>& base = sc.base;
    const size_t n_out = p.output_index.size();
    set_splats(p, sc, s.rows > 1 ? s.rows * w.inner : w.inner, [&](size_t i) { return s.data[n_out + i]; },
               [&](size_t i) { return s.single[i]; });
    if (s.rows > 1) {
      const int64_t last = w.outer.back();
      for (int64_t u = begin; u < end; ++u) {  // unit u: block u % blocks of the last outer dim's rows
        const int64_t first_row = u % s.blocks * s.rows, rows = std::min(s.rows, last - first_row);
        base = s.data;
        add_offsets(w, (u / s.blocks * last + first_row) * w.inner, base);
        run_tile(p, sc, base.data(), w.inner_stride.data(), s.row_stride.data(), s.direct, w.inner, rows);
      }
      return;
    }
    for (int64_t u = begin; u < end; ++u) {  // unit u: tile u % tiles of inner row u / tiles
      const int64_t first = u % s.tiles * kTile, n = std::min(kTile, w.inner - first);
      base = s.data;
      add_offsets(w, u / s.tiles * w.inner + first, base);
      run_tile(p, sc, base.data(), w.inner_stride.data(), s.row_stride.data(), s.direct, n, 1);
    }
  }

  std::shared_ptr<const std::vector<Part>> parts_;
  std::vector<PartState> state_;
  std::vector<std::vector<Tensor>> viewed_;  // per part, per input slot: this run's view (sliced inputs)
  std::vector<Scratch> scratch_;
  int registers_ = 0;
};


// T's dims [FROM, FROM + RANK) as a tensor of their own (the same data).
Tensor dims_of(const Tensor& t, int from, int rank) {
  Tensor d = t;
  d.rank = rank;
  for (int i = 0; i < rank; ++i) {
    d.shape[i] = t.shape[from + i];
    d.strides[i] = t.strides[from + i];
  }
  return d;
}

// A part ending in a reduction over its chain's trailing dims (sum, mean,
// amax, amin of an elementwise chain: softmax's and the norms' statistics,
// an optimizer's squared norms): one parallel loop over the reduction's
// output elements (rows), each running the chain over its row tile by tile
// and reducing as it goes; the chain's last value is never written. Sums
// accumulate in double, as the sum kernel does; NaN propagates.
class ReduceStep final : public sdk::HostGraphStep {
 public:
  ReduceStep(std::shared_ptr<const std::vector<Part>> parts, const std::vector<Tensor>& inputs,
             const std::vector<Tensor>& outputs)
      : parts_(std::move(parts)) {
    std::vector<const Tensor*> in, out;
    for (const Tensor& t : inputs) in.push_back(&t);
    for (const Tensor& t : outputs) out.push_back(&t);
    view_inputs(part(), in.data(), viewed_);
    remake(in.data(), out.data());
  }

  void run(const Tensor* const* inputs, const Tensor* const* outputs) override {
    const Part& p = part();
    view_inputs(p, inputs, viewed_);
    bool same = true;
    for (size_t o = 0; o < layout_.size() && same; ++o) same = same_layout(operand(o, inputs, outputs), layout_[o]);
    if (!same) remake(inputs, outputs);
    for (size_t o = 0; o < layout_.size(); ++o) data_[o] = static_cast<char*>(operand(o, inputs, outputs).data);
    const int64_t rows = rows_.numel, per_row = red_.numel;
    if (rows == 0) return;
    if (per_row == 0 && (p.reduce == ReduceKind::kMax || p.reduce == ReduceKind::kMin))
      sdk::fail(HAL_STATUS_INVALID_ARGUMENT, p.reduce == ReduceKind::kMax ? "amax" : "amin",
                ": reducing a dim of size 0 (there is no identity)");
    const int threads = loop_threads(rows * std::max<int64_t>(per_row, 1), rows);
    if (scratch_.size() < static_cast<size_t>(threads)) scratch_.resize(static_cast<size_t>(threads));
    for (int c = 0; c < threads; ++c) reserve(scratch_[static_cast<size_t>(c)], p.registers);
    parallel_chunks(threads, rows, [&](int c, int64_t begin, int64_t end) {
      run_rows(scratch_[static_cast<size_t>(c)], begin, end);
    });
  }

 private:
  const Part& part() const { return (*parts_)[0]; }

  // Operand O: the reduction's output, then the part's other outputs, then its inputs.
  const Tensor& operand(size_t o, const Tensor* const* inputs, const Tensor* const* outputs) const {
    const Part& p = part();
    if (o == 0) return *outputs[p.reduce_output];
    if (o <= p.output_index.size()) return *outputs[p.output_index[o - 1]];
    return part_input(p, o - 1 - p.output_index.size(), inputs, viewed_);
  }

  void remake(const Tensor* const* inputs, const Tensor* const* outputs) {
    const Part& p = part();
    const size_t ops = 1 + p.output_index.size() + p.input_index.size();
    layout_.clear();
    for (size_t o = 0; o < ops; ++o) layout_.push_back(operand(o, inputs, outputs));
    // The chain's shape: its inputs and outputs broadcast (right-aligned).
    const int r = p.chain_rank, k = p.reduce_dims;
    Tensor chain = layout_[0];
    chain.rank = r;
    for (int d = 0; d < r; ++d) chain.shape[d] = 1;
    for (size_t o = 1; o < ops; ++o) {
      const Tensor& t = layout_[o];
      for (int td = 0; td < t.rank; ++td)
        if (t.shape[td] != 1) chain.shape[td + (r - t.rank)] = t.shape[td];
    }
    // Rows: the kept (leading) dims, walked by the reduction's output and the
    // chain's operands; along a row: the reduced (trailing) dims, walked by
    // the chain's operands.
    std::vector<Tensor> kept, reduced;
    kept.push_back(dims_of(layout_[0], 0, r - k));
    for (size_t o = 1; o < ops; ++o) {
      const Tensor& t = layout_[o];
      const int along = std::min(t.rank, k);
      kept.push_back(dims_of(t, 0, t.rank - along));
      reduced.push_back(dims_of(t, t.rank - along, along));
    }
    std::vector<const Tensor*> kept_ptrs, reduced_ptrs;
    for (const Tensor& t : kept) kept_ptrs.push_back(&t);
    for (const Tensor& t : reduced) reduced_ptrs.push_back(&t);
    rows_ = Walk(kept_ptrs, dims_of(chain, 0, r - k));
    red_ = Walk(reduced_ptrs, dims_of(chain, r - k, k));
    // Short rows of one dim: a tile takes several (of the last kept dim), each reduced on its own.
    rows_per_tile_ = red_.outer.empty() ? rows_per_tile(red_.inner, rows_.inner) : 1;
    row_stride_.assign(ops - 1, 0);
    for (size_t o = 0; o + 1 < ops; ++o) row_stride_[o] = rows_.inner_stride[o + 1];
    direct_.assign(p.output_index.size(), false);
    for (size_t o = 0; o < p.output_index.size(); ++o)
      direct_[o] = p.store[o] == kStoreFloat32 && red_.inner_stride[o] == static_cast<int64_t>(sizeof(float)) &&
                   (rows_per_tile_ == 1 || row_stride_[o] == red_.inner * static_cast<int64_t>(sizeof(float)));
    data_.assign(ops, nullptr);
  }

  // The reduction of N chain values V (one row, or its tile's part).
  struct Accumulator {
    double sum = 0.0;
    float best = 0.0f;
    bool nan = false;
  };
  Accumulator start() const {
    Accumulator a;
    a.best = part().reduce == ReduceKind::kMax ? -std::numeric_limits<float>::infinity()
                                               : std::numeric_limits<float>::infinity();
    return a;
  }
  void accumulate(Accumulator& a, const float* v, int64_t n) const {
    const ReduceKind kind = part().reduce;
    if (kind == ReduceKind::kMax || kind == ReduceKind::kMin) {
      for (int64_t i = 0; i < n; ++i) {
        a.nan = a.nan || std::isnan(v[i]);
        a.best = kind == ReduceKind::kMax ? std::max(a.best, v[i]) : std::min(a.best, v[i]);
      }
      return;
    }
    double lanes[4] = {0.0, 0.0, 0.0, 0.0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
      for (int l = 0; l < 4; ++l) lanes[l] += static_cast<double>(v[i + l]);
    for (; i < n; ++i) lanes[0] += static_cast<double>(v[i]);
    a.sum += (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  }
  void finish(const Accumulator& a, char* out) const {
    const Part& p = part();
    float value;
    if (p.reduce == ReduceKind::kMax || p.reduce == ReduceKind::kMin)
      value = a.nan ? std::numeric_limits<float>::quiet_NaN() : a.best;
    else if (p.reduce == ReduceKind::kMean) value = static_cast<float>(a.sum / static_cast<double>(red_.numel));
    else value = static_cast<float>(a.sum);
    p.reduce_store(out, &value, 0, 1);
  }

  void run_rows(Scratch& sc, int64_t begin, int64_t end) const {
    const Part& p = part();
    const size_t ops = data_.size();
    sc.ptr.assign(p.reg.size(), nullptr);
    std::vector<char*> row(ops), base(ops - 1);
    const size_t first_input = 1 + p.output_index.size();  // operand index of input slot 0
    set_splats(p, sc, rows_per_tile_ > 1 ? rows_per_tile_ * red_.inner : red_.inner,
               [&](size_t i) { return data_[first_input + i]; },
               [&](size_t i) { return layout_[first_input + i].numel() == 1; });
    if (rows_per_tile_ > 1) {  // one tile: up to rows_per_tile_ rows of one inner run of the kept dims
      const int64_t n = red_.inner;
      for (int64_t r = begin; r < end;) {
        const int64_t rows = std::min({rows_per_tile_, end - r, rows_.inner - r % rows_.inner});
        row = data_;
        add_offsets(rows_, r, row);
        for (size_t o = 0; o + 1 < ops; ++o) base[o] = row[o + 1];
        const float* v = run_tile(p, sc, base.data(), red_.inner_stride.data(), row_stride_.data(), direct_, n, rows);
        for (int64_t i = 0; i < rows; ++i) {
          Accumulator a = start();
          accumulate(a, v + i * n, n);
          finish(a, row[0] + i * rows_.inner_stride[0]);
        }
        r += rows;
      }
      return;
    }
    const int64_t tiles = (red_.inner + kTile - 1) / kTile, units = red_.numel == 0 ? 0 : red_.outer_count * tiles;
    for (int64_t r = begin; r < end; ++r) {
      row = data_;
      add_offsets(rows_, r, row);
      Accumulator a = start();
      for (int64_t u = 0; u < units; ++u) {
        const int64_t first = u % tiles * kTile, n = std::min(kTile, red_.inner - first);
        for (size_t o = 0; o + 1 < ops; ++o) base[o] = row[o + 1];
        add_offsets(red_, u / tiles * red_.inner + first, base);
        accumulate(a, run_tile(p, sc, base.data(), red_.inner_stride.data(), row_stride_.data(), direct_, n, 1), n);
      }
      finish(a, row[0]);
    }
  }

  std::shared_ptr<const std::vector<Part>> parts_;
  std::vector<Tensor> layout_;  // per operand: shape and strides the walks are for
  Walk rows_, red_;             // the kept dims (all operands), the reduced ones (the chain's)
  int64_t rows_per_tile_ = 1;   // rows one tile takes (> 1: short rows of one reduced dim)
  std::vector<int64_t> row_stride_;  // per chain operand: bytes between rows (the last kept dim's)
  std::vector<bool> direct_;    // per part output: written in place (dense)
  std::vector<char*> data_;     // per operand, this run
  std::vector<Tensor> viewed_;  // per input slot: this run's view (sliced inputs)
  std::vector<Scratch> scratch_;
};

bool is_comparison(const GraphNode& node) {
  for (const CompareEntry& e : kCompare)
    if (std::strcmp(node.op(), e.name) == 0) return true;
  return false;
}

// float32, or float16/bfloat16 (computed in float32, rounded where written).
bool float_output(const Graph& g, uint32_t v) {
  const hal_dtype_e d = g.values[v].dtype;
  return d == HAL_DTYPE_FLOAT32 || d == HAL_DTYPE_FLOAT16 || d == HAL_DTYPE_BFLOAT16;
}

bool known_dtype(hal_dtype_e d) {
  switch (d) {
    case HAL_DTYPE_FLOAT32: case HAL_DTYPE_FLOAT64: case HAL_DTYPE_FLOAT16: case HAL_DTYPE_BFLOAT16:
    case HAL_DTYPE_INT8: case HAL_DTYPE_UINT8: case HAL_DTYPE_INT16: case HAL_DTYPE_INT32: case HAL_DTYPE_INT64:
    case HAL_DTYPE_BOOL:
      return true;
    default:
      return false;
  }
}

// Whether node R reduces value V (its only input) over V's K trailing dims,
// K >= 1, as a loop can: sum, mean, amax or amin of float32 to float32.
bool reducible(const Graph& g, size_t r, uint32_t v, ReduceKind& kind, int& k) {
  const GraphNode& node = g.nodes[r];
  const std::string op = node.op();
  kind = op == "sum" ? ReduceKind::kSum : op == "mean" ? ReduceKind::kMean : op == "amax" ? ReduceKind::kMax
         : op == "amin" ? ReduceKind::kMin : ReduceKind::kNone;
  if (kind == ReduceKind::kNone || node.inputs.size() != 1 || node.inputs[0] != v || node.outputs.size() != 1 ||
      node.attrs.empty() || g.values[v].dtype != HAL_DTYPE_FLOAT32 ||
      g.values[node.outputs[0]].dtype != HAL_DTYPE_FLOAT32)
    return false;
  const int rank = static_cast<int>(g.values[v].shape.size());
  std::vector<int64_t> dims = node.attrs[0].as_ints();
  if (dims.empty())
    for (int d = 0; d < rank; ++d) dims.push_back(d);
  for (int64_t& d : dims) d = d < 0 ? d + rank : d;
  std::sort(dims.begin(), dims.end());
  k = static_cast<int>(dims.size());
  for (int i = 0; i < k; ++i)
    if (dims[static_cast<size_t>(i)] != rank - k + i) return false;  // not the trailing dims (or repeated)
  return k >= 1;
}

// Whether value V is an index_select of its producer's first input by a
// constant index START, START + STEP, ... (STEP >= 1) along a dim of static
// size: a slice a loop can read in place (VIEW) instead of a copy made by
// a kernel.
bool slice_view(const Graph& g, const std::vector<int64_t>& producer, uint32_t v, SliceView& view) {
  const int64_t p = v < producer.size() ? producer[v] : -1;
  if (p < 0) return false;
  const GraphNode& node = g.nodes[static_cast<size_t>(p)];
  if (std::strcmp(node.op(), "index_select") != 0 || node.inputs.size() != 2 || node.outputs.size() != 1 ||
      node.attrs.empty())
    return false;
  const GraphConstant* index = g.constant(node.inputs[1]);
  const GraphValue& src = g.values[node.inputs[0]];
  const GraphValue& out = g.values[v];
  const int rank = static_cast<int>(src.shape.size());
  int64_t dim = node.attrs[0].as_int();
  dim = dim < 0 ? dim + rank : dim;
  if (index == nullptr || dim < 0 || dim >= rank || out.shape.size() != src.shape.size() || src.dtype != out.dtype)
    return false;
  const hal_dtype_e idt = g.values[node.inputs[1]].dtype;
  const size_t isize = idt == HAL_DTYPE_INT64 ? 8 : idt == HAL_DTYPE_INT32 ? 4 : 0;
  const int64_t extent = src.shape[static_cast<size_t>(dim)], count = out.shape[static_cast<size_t>(dim)];
  if (isize == 0 || extent <= 0 || count <= 0 || index->size != static_cast<size_t>(count) * isize) return false;
  auto at = [&](int64_t i) {
    if (isize == 8) {
      int64_t x;
      std::memcpy(&x, static_cast<const char*>(index->data) + i * 8, 8);
      return x;
    }
    int32_t x;
    std::memcpy(&x, static_cast<const char*>(index->data) + i * 4, 4);
    return static_cast<int64_t>(x);
  };
  const int64_t start = at(0), step = count > 1 ? at(1) - start : 1;
  if (start < 0 || step < 1 || start + (count - 1) * step >= extent) return false;
  for (int64_t i = 1; i < count; ++i)
    if (at(i) != start + i * step) return false;
  view = SliceView{static_cast<int>(dim), start, step, count};
  return true;
}

}  // namespace

std::string loop_refusal(const Graph& g, size_t n) {
  const GraphNode& node = g.nodes[n];
  TileOp t;
  if (!tile_op(node, t)) return std::string("no tile function for '") + node.op() + "'";
  if (node.outputs.size() != 1) return "not one output";
  if (is_comparison(node)) {
    // Compared in float32 as the kernel does only when both are float32 (a
    // 16-bit chain's values are float32 in a loop, rounded op by op: a
    // comparison of them could flip).
    for (uint32_t v : t.operands)
      if (g.values[v].dtype != HAL_DTYPE_FLOAT32) return "a comparison of values that are not float32";
    return "";
  }
  if (!float_output(g, node.outputs[0])) return "not one float32/16 output";
  // Inputs of other dtypes are converted as they are loaded: the kernels
  // of a float32 output cast their inputs to float32 first.
  for (uint32_t v : t.operands)
    if (v >= g.values.size() || !known_dtype(g.values[v].dtype)) return "an input has no kernel dtype";
  // A copy into float16/bfloat16 from another dtype rounds on purpose (x.half().float()): a loop,
  // which rounds only what it writes, would lose that.
  const hal_dtype_e out_dtype = g.values[node.outputs[0]].dtype;
  if (std::strcmp(node.op(), "copy") == 0 && out_dtype != HAL_DTYPE_FLOAT32 &&
      g.values[t.operands[0]].dtype != out_dtype)
    return "a copy that rounds to a 16-bit float";
  return "";
}

std::vector<sdk::HostGraphFusion> find_elementwise_fusions(const Graph& g, std::vector<bool>& taken) {
  const size_t nn = g.nodes.size(), nv = g.values.size();
  const sdk::GraphUses uses(g);
  const std::vector<std::vector<size_t>>& readers = uses.readers;
  const std::vector<int64_t>& producer = uses.producer;
  const std::vector<bool>& graph_output = uses.output;

  // Vertical: chains of one output shape.
  std::vector<std::vector<size_t>> groups;
  std::vector<int64_t> group_of(nn, -1);
  // Whether node N may join group G: no node outside G (N aside) reads a
  // value of G before N (the loop runs where its last node would).
  auto may_join = [&](size_t gi, size_t n) {
    for (size_t m : groups[gi])
      for (uint32_t v : g.nodes[m].outputs)
        for (size_t r : readers[v])
          if (r != n && group_of[r] != static_cast<int64_t>(gi) && r < n) return false;
    return true;
  };
  for (size_t n = 0; n < nn; ++n) {
    if (taken[n] || !loop_refusal(g, n).empty()) continue;
    const std::vector<int64_t>& shape = g.values[g.nodes[n].outputs[0]].shape;
    // The groups of N's operands it may join; it joins them all, as one
    // group (AdamW's update reads three chains: the moments' and the decay's).
    int64_t chosen = -1;
    size_t size = 1;
    for (uint32_t v : g.nodes[n].inputs) {
      const int64_t p = v == kNoValue ? -1 : producer[v];
      if (p < 0 || group_of[static_cast<size_t>(p)] < 0) continue;
      const size_t gi = static_cast<size_t>(group_of[static_cast<size_t>(p)]);
      if (static_cast<int64_t>(gi) == chosen || g.values[g.nodes[groups[gi][0]].outputs[0]].shape != shape ||
          size + groups[gi].size() > kMaxLoopNodes || !may_join(gi, n))
        continue;
      size += groups[gi].size();
      if (chosen < 0) {
        chosen = static_cast<int64_t>(gi);
        continue;
      }
      std::vector<size_t>& into = groups[static_cast<size_t>(chosen)];
      for (size_t m : groups[gi]) group_of[m] = chosen;
      into.insert(into.end(), groups[gi].begin(), groups[gi].end());
      std::sort(into.begin(), into.end());
      groups[gi].clear();
    }
    if (chosen < 0) {
      chosen = static_cast<int64_t>(groups.size());
      groups.emplace_back();
    }
    groups[static_cast<size_t>(chosen)].push_back(n);
    group_of[n] = chosen;
  }
  // A group's values read outside it: its outputs. One nothing reads is dead
  // code, left alone.
  std::vector<std::vector<uint32_t>> outputs_of(groups.size());
  std::vector<size_t> first_outside_reader(groups.size(), nn);  // after the group's last node (by construction)
  for (size_t gi = 0; gi < groups.size(); ++gi)
    for (size_t n : groups[gi]) {
      const uint32_t v = g.nodes[n].outputs[0];
      bool read_outside = graph_output[v];
      for (size_t r : readers[v])
        if (group_of[r] != static_cast<int64_t>(gi)) {
          read_outside = true;
          first_outside_reader[gi] = std::min(first_outside_reader[gi], r);
        }
      if (read_outside) outputs_of[gi].push_back(v);
    }

  // A reduction of a group's last value over its trailing dims ends the
  // group: the loop reduces as it goes, and writes the value only where
  // something else reads it (softmax's exp, read again by its division). The
  // group's values must be read after the reduction by all other readers
  // (the step runs where the reduction would).
  std::vector<int64_t> reduction_of(groups.size(), -1);
  std::vector<ReduceKind> reduce_kind(groups.size(), ReduceKind::kNone);
  std::vector<int> reduce_dims(groups.size(), 0);
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    if (groups[gi].empty()) continue;
    const uint32_t v = g.nodes[groups[gi].back()].outputs[0];
    int64_t r = -1;
    for (size_t reader : readers[v])  // ascending: the first reduction of it a loop can end in
      if (!taken[reader] && group_of[reader] < 0 && reducible(g, reader, v, reduce_kind[gi], reduce_dims[gi])) {
        r = static_cast<int64_t>(reader);
        break;
      }
    if (r < 0) continue;
    bool later = true;
    for (size_t n : groups[gi])
      for (size_t reader : readers[g.nodes[n].outputs[0]])
        if (static_cast<int64_t>(reader) != r && group_of[reader] != static_cast<int64_t>(gi) &&
            static_cast<int64_t>(reader) < r)
          later = false;
    if (!later) continue;
    reduction_of[gi] = r;
    const bool read_elsewhere =
        graph_output[v] || std::any_of(readers[v].begin(), readers[v].end(), [&](size_t reader) {
          return static_cast<int64_t>(reader) != r && group_of[reader] != static_cast<int64_t>(gi);
        });
    if (!read_elsewhere)
      outputs_of[gi].erase(std::remove(outputs_of[gi].begin(), outputs_of[gi].end(), v), outputs_of[gi].end());
  }
  auto last_node = [&](size_t gi) {
    return reduction_of[gi] >= 0 ? static_cast<size_t>(reduction_of[gi]) : groups[gi].back();
  };

  // Horizontal: independent groups in one step (an optimizer's per-parameter
  // updates), in order of their last nodes. A group ending in a reduction is
  // a step of its own. Group G joins the open step S
  // (which then runs where G's last node would) when G reads no value of S
  // and nothing outside S and G reads a value of S before G's last node.
  std::vector<std::vector<size_t>> steps;  // groups
  std::vector<int64_t> step_of(groups.size(), -1);
  std::vector<size_t> order;
  for (size_t gi = 0; gi < groups.size(); ++gi)
    if (!groups[gi].empty() && (!outputs_of[gi].empty() || reduction_of[gi] >= 0)) order.push_back(gi);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return last_node(a) < last_node(b); });
  size_t open_reader = 0, open_nodes = 0;  // the open step's first outside reader, its nodes
  for (size_t gi : order) {
    if (reduction_of[gi] >= 0) {
      steps.push_back({gi});
      step_of[gi] = static_cast<int64_t>(steps.size()) - 1;
      open_reader = 0;  // closed: nothing joins it
      continue;
    }
    bool joins = !steps.empty() && open_reader > groups[gi].back() && open_nodes + groups[gi].size() <= kMaxStepNodes;
    for (size_t n : groups[gi])
      for (uint32_t read : g.nodes[n].inputs) {
        // A slice (read in place, below) reads its source.
        SliceView view;
        const uint32_t v = read != kNoValue && slice_view(g, producer, read, view)
                               ? g.nodes[static_cast<size_t>(producer[read])].inputs[0]
                               : read;
        const int64_t p = v == kNoValue ? -1 : producer[v];
        if (joins && p >= 0 && group_of[static_cast<size_t>(p)] >= 0 &&
            step_of[static_cast<size_t>(group_of[static_cast<size_t>(p)])] == static_cast<int64_t>(steps.size()) - 1 &&
            group_of[static_cast<size_t>(p)] != static_cast<int64_t>(gi))
          joins = false;
      }
    if (!joins) {
      steps.emplace_back();
      open_reader = nn;
      open_nodes = 0;
    }
    steps.back().push_back(gi);
    step_of[gi] = static_cast<int64_t>(steps.size()) - 1;
    open_reader = std::min(open_reader, first_outside_reader[gi]);
    open_nodes += groups[gi].size();
  }

  std::vector<sdk::HostGraphFusion> fusions;
  std::vector<int> input_of_value(nv, -1);  // the step's input index; reset after each step
  for (const std::vector<size_t>& members : steps) {
    size_t nodes_in_step = 0;
    for (size_t gi : members) nodes_in_step += groups[gi].size() + (reduction_of[gi] >= 0 ? 1 : 0);
    if (nodes_in_step < 2) continue;  // one node: its kernel
    auto parts = std::make_shared<std::vector<Part>>();
    sdk::HostGraphFusion f;
    std::vector<std::string> part_labels, part_counts;  // per part: its label, what it reads and writes
    std::vector<std::vector<size_t>> part_slices;      // per part: index_select nodes it reads in place
    for (size_t gi : members) {
      const std::vector<size_t>& nodes = groups[gi];
      Part part;
      std::vector<size_t> slices;
      std::vector<std::pair<uint32_t, int>> slots;
      auto slot = [&](uint32_t v) {
        for (const auto& [value, s] : slots)
          if (value == v) return s;
        return -1;
      };
      std::vector<TileOp> tops(nodes.size());
      for (size_t j = 0; j < nodes.size(); ++j) {
        tile_op(g.nodes[nodes[j]], tops[j]);
        for (uint32_t v : tops[j].operands) {  // inputs: read, not made inside, in first-read order
          const bool inside = producer[v] >= 0 && group_of[static_cast<size_t>(producer[v])] == static_cast<int64_t>(gi);
          if (inside || slot(v) >= 0) continue;
          slots.emplace_back(v, static_cast<int>(part.input_index.size()));
          SliceView view;
          uint32_t read = v;  // what the step reads: V, or the source V slices
          if (slice_view(g, producer, v, view)) {
            read = g.nodes[static_cast<size_t>(producer[v])].inputs[0];
            slices.push_back(static_cast<size_t>(producer[v]));
          }
          if (input_of_value[read] < 0) {
            input_of_value[read] = static_cast<int>(f.inputs.size());
            f.inputs.push_back(read);
          }
          part.input_index.push_back(static_cast<size_t>(input_of_value[read]));
          part.view.push_back(view);
          part.load.push_back(load_fn(static_cast<hal_dtype_e>(g.values[v].dtype)));
        }
      }
      const size_t inputs = part.input_index.size();
      for (size_t j = 0; j < nodes.size(); ++j) slots.emplace_back(g.nodes[nodes[j]].outputs[0], static_cast<int>(inputs + j));
      const size_t n_slots = inputs + nodes.size();
      part.output_of_slot.assign(n_slots, -1);
      std::string label = "loop[";
      for (size_t j = 0; j < nodes.size(); ++j) {
        const GraphNode& node = g.nodes[nodes[j]];
        const TileOp& t = tops[j];
        Instr in;
        in.dst = static_cast<int>(inputs + j);
        in.fn = t.fn;
        in.a = slot(t.operands[0]);
        if (t.operands.size() > 1) in.b = slot(t.operands[1]);
        if (t.operands.size() > 2) in.c = slot(t.operands[2]);
        part.code.push_back(in);
        const uint32_t v = node.outputs[0];
        if (std::find(outputs_of[gi].begin(), outputs_of[gi].end(), v) != outputs_of[gi].end()) {
          part.output_of_slot[static_cast<size_t>(in.dst)] = static_cast<int>(part.output_index.size());
          part.output_index.push_back(f.outputs.size());
          part.store.push_back(store_fn(static_cast<hal_dtype_e>(g.values[v].dtype)));
          part.writer_reads.emplace_back();
          for (int operand : {in.a, in.b, in.c})
            if (operand >= 0 && operand < static_cast<int>(inputs)) part.writer_reads.back().push_back(operand);
          f.outputs.push_back(v);
        }
        label += (j ? ", n" : "n") + std::to_string(nodes[j]) + " " + node.op();
        f.nodes.push_back(nodes[j]);
      }
      label += "]";
      if (reduction_of[gi] >= 0) {
        const size_t r = static_cast<size_t>(reduction_of[gi]);
        const uint32_t out = g.nodes[r].outputs[0];
        part.reduce = reduce_kind[gi];
        part.reduce_dims = reduce_dims[gi];
        part.chain_rank = static_cast<int>(g.values[g.nodes[nodes.back()].outputs[0]].shape.size());
        part.reduce_output = f.outputs.size();
        part.reduce_store = store_fn(static_cast<hal_dtype_e>(g.values[out].dtype));
        f.outputs.push_back(out);
        f.nodes.push_back(r);
        label += " -> n" + std::to_string(r) + " " + g.nodes[r].op() + " over the last " +
                 std::to_string(reduce_dims[gi]) + (reduce_dims[gi] == 1 ? " dim" : " dims");
      }
      part_labels.push_back(label);
      part_counts.push_back(": reads " + std::to_string(part.input_index.size()) + ", writes " +
                            std::to_string(part.output_index.size() + (part.reduce != ReduceKind::kNone ? 1 : 0)));
      part_slices.push_back(slices);
      assign_registers(part, inputs);
      parts->push_back(std::move(part));
    }
    for (uint32_t v : f.inputs) input_of_value[v] = -1;
    // A slice read only by this step's loops is not made at all: its node is the step's.
    std::vector<size_t> sliced;
    for (const std::vector<size_t>& slices : part_slices) sliced.insert(sliced.end(), slices.begin(), slices.end());
    std::sort(sliced.begin(), sliced.end());
    sliced.erase(std::unique(sliced.begin(), sliced.end()), sliced.end());
    std::vector<size_t> made;  // sliced nodes something outside the step reads: they still run
    for (size_t n : sliced) {
      const uint32_t v = g.nodes[n].outputs[0];
      const bool only_here = !graph_output[v] && std::all_of(readers[v].begin(), readers[v].end(), [&](size_t r) {
        return std::find(f.nodes.begin(), f.nodes.end(), r) != f.nodes.end();
      });
      if (!only_here) made.push_back(n);
    }
    for (size_t n : sliced)
      if (std::find(made.begin(), made.end(), n) == made.end()) f.nodes.push_back(n);
    std::string labels, plans;
    for (size_t k = 0; k < part_labels.size(); ++k) {
      std::string label = part_labels[k], views;
      for (size_t n : part_slices[k])
        views += (views.empty() ? "" : ", ") + std::string("n") + std::to_string(n) + " index_select" +
                 (std::find(made.begin(), made.end(), n) != made.end() ? " (also made)" : "");
      if (!views.empty()) label += " reading slices in place: " + views;
      labels += (labels.empty() ? "" : ", ") + label;
      plans += label + part_counts[k] + "\n";
    }
    std::sort(f.nodes.begin(), f.nodes.end());
    f.label = members.size() == 1 ? labels : "horizontal[" + labels + "]";
    f.plan = members.size() == 1 ? plans
                                 : "horizontal, " + std::to_string(members.size()) + " loops in one pass:\n" + plans;
    for (size_t n : f.nodes) taken[n] = true;
    std::shared_ptr<const std::vector<Part>> shared = parts;
    if (members.size() == 1 && reduction_of[members[0]] >= 0) {
      f.make = [shared](const std::vector<Tensor>& in, const std::vector<Tensor>& out) -> std::unique_ptr<sdk::HostGraphStep> {
        return std::make_unique<ReduceStep>(shared, in, out);
      };
    } else {
      f.make = [shared](const std::vector<Tensor>& in, const std::vector<Tensor>& out) -> std::unique_ptr<sdk::HostGraphStep> {
        return std::make_unique<LoopStep>(shared, in, out);
      };
      f.writes_in_place = [shared](size_t input, size_t output) { return writes_in_place(*shared, input, output); };
    }
    fusions.push_back(std::move(f));
  }
  return fusions;
}

}  // namespace hal::cpu
