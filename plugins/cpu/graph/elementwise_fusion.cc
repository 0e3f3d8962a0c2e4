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

namespace hal::cpu {
namespace {

using sdk::Graph;
using sdk::GraphNode;
using sdk::kNoValue;
using sdk::Tensor;

// Elements per tile: a register is 2 KiB, so a chain's live registers stay
// in L1/L2 while every node runs over the tile.
constexpr int64_t kTile = 512;

// ---- tile functions -------------------------------------------------------
// OUT[i] = f(A[i] [, B[i]]) for i < N. OUT never aliases A or B (registers
// are allocated so), hence __restrict and vectorised loops.
using UnaryFn = void (*)(float* __restrict out, const float* __restrict a, int64_t n);
using BinaryFn = void (*)(float* __restrict out, const float* __restrict a, const float* __restrict b, int64_t n,
                          float alpha);

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

// As the kernels compute float32 (elementwise.cc): alpha == 1 skips the
// multiply; maximum/minimum propagate NaN.
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
HAL_CPU_TILE_BINARY(maximum, std::isnan(a[i]) || std::isnan(b[i]) ? std::numeric_limits<float>::quiet_NaN()
                                                                   : a[i] > b[i] ? a[i] : b[i])
HAL_CPU_TILE_BINARY(minimum, std::isnan(a[i]) || std::isnan(b[i]) ? std::numeric_limits<float>::quiet_NaN()
                                                                   : a[i] < b[i] ? a[i] : b[i])
#undef HAL_CPU_TILE_BINARY

UnaryFn unary_fn(const GraphNode& node) {
  if (std::strcmp(node.op(), "gelu") == 0) {
    const std::string& approximate = node.attrs[0].as_string();
    return approximate == "none" ? gelu_tile : approximate == "tanh" ? gelu_tanh_tile : nullptr;
  }
  for (const UnaryEntry& e : kUnary)
    if (std::strcmp(node.op(), e.name) == 0) return e.fn;
  return nullptr;
}

// The tile function of a binary node and its alpha; nullptr when none.
BinaryFn binary_fn(const GraphNode& node, float* alpha) {
  const std::string op = node.op();
  *alpha = 1.0f;
  if (op == "add" || op == "sub") {
    const sdk::Scalar& s = node.attrs[0].as_scalar();
    const bool unit = s.to_double() == 1.0 && s.to_int() == 1;
    *alpha = static_cast<float>(s.to_double());
    if (op == "add") return unit ? add_tile : add_alpha_tile;
    return unit ? sub_tile : sub_alpha_tile;
  }
  if (op == "mul") return mul_tile;
  if (op == "div") return node.attrs[0].as_string() == "none" ? div_tile : nullptr;
  if (op == "maximum") return maximum_tile;
  if (op == "minimum") return minimum_tile;
  return nullptr;
}

// ---- the program ------------------------------------------------------------
// Slots: the loop's inputs first, then one per node (its output). Each slot
// has a register (a tile buffer): the inputs' from the tile's start (they
// are loaded first), a node's from its instruction; reused once the slot's
// last reader ran.
struct Instr {
  UnaryFn unary = nullptr;
  BinaryFn binary = nullptr;
  float alpha = 1.0f;
  int a = -1, b = -1, dst = -1;  // slots
};

struct Program {
  size_t inputs = 0;
  std::vector<Instr> code;
  std::vector<int> output_slot;          // per loop output
  std::vector<int> output_of_slot;       // per slot: the loop output it is, or -1
  std::vector<int> reg;                  // per slot
  int registers = 0;
};

// How the loop walks its operands (outputs, then inputs) for one call: the
// outer dims and the innermost one, each with byte strides per operand,
// after size-1 dims are dropped and dims every operand walks contiguously
// are merged.
struct Walk {
  std::vector<int64_t> outer;                 // sizes, outermost first
  std::vector<std::vector<int64_t>> stride;   // per operand, per outer dim (bytes)
  int64_t inner = 1;
  std::vector<int64_t> inner_stride;          // per operand (bytes)
  int64_t outer_count = 1;

  Walk(const std::vector<const Tensor*>& operands, const Tensor& shape) {
    const size_t k = operands.size();
    const int rank = shape.rank;
    std::vector<int64_t> sizes;
    std::vector<std::vector<int64_t>> st(k);  // per operand, per kept dim
    for (int d = 0; d < rank; ++d) {
      if (shape.shape[d] == 1) continue;
      sizes.push_back(shape.shape[d]);
      for (size_t o = 0; o < k; ++o) {
        const Tensor& t = *operands[o];
        const int td = d - (rank - t.rank);  // right-aligned (broadcast)
        const bool broadcast = td < 0 || t.shape[td] == 1;
        st[o].push_back(broadcast ? 0 : t.strides[td] * static_cast<int64_t>(sizeof(float)));
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

class LoopStep final : public sdk::HostGraphStep {
 public:
  explicit LoopStep(std::shared_ptr<const Program> p) : p_(std::move(p)) {}

  void run(const Tensor* const* inputs, const Tensor* const* outputs) override {
    const Program& p = *p_;
    const size_t n_out = p.output_slot.size();
    std::vector<const Tensor*> operands;
    for (size_t o = 0; o < n_out; ++o) operands.push_back(outputs[o]);
    for (size_t i = 0; i < p.inputs; ++i) operands.push_back(inputs[i]);
    const Tensor& shape = *outputs[0];
    if (shape.numel() == 0) return;
    const Walk w(operands, shape);
    std::vector<char*> data;
    for (const Tensor* t : operands) data.push_back(static_cast<char*>(t->data));
    const int64_t tiles = (w.inner + kTile - 1) / kTile;
    const int64_t units = w.outer_count * tiles;
    const int64_t grain = std::max<int64_t>(1, 32768 / std::min(w.inner, kTile));
    // An exception must not leave an OpenMP region: the first one is kept and rethrown here.
    std::exception_ptr error;
    std::mutex error_mu;
    parallel_for(units, grain, [&](int64_t begin, int64_t end) {
      try {
        run_units(w, data, tiles, begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
      }
    });
    if (error) std::rethrow_exception(error);
  }

 private:
  void run_units(const Walk& w, const std::vector<char*>& data, int64_t tiles, int64_t begin, int64_t end) const {
    const Program& p = *p_;
    const size_t n_out = p.output_slot.size();
    const size_t slots = p.reg.size();
    const size_t ops = data.size();
    struct Free {
      void operator()(float* f) const { std::free(f); }
    };
    std::unique_ptr<float, Free> regs(static_cast<float*>(
        std::aligned_alloc(64, static_cast<size_t>(std::max(p.registers, 1)) * kTile * sizeof(float))));
    if (!regs) sdk::fail(HAL_STATUS_OUT_OF_MEMORY, "fused loop: ", p.registers, " tile registers");
    auto reg = [&](int slot) { return regs.get() + static_cast<int64_t>(p.reg[static_cast<size_t>(slot)]) * kTile; };
    std::vector<float*> ptr(slots, nullptr);
    std::vector<char*> base(ops);
    std::vector<bool> direct(n_out);
    for (int64_t u = begin; u < end; ++u) {
      const int64_t tile = u % tiles;
      int64_t rest = u / tiles;
      for (size_t o = 0; o < ops; ++o) base[o] = data[o];
      for (size_t d = w.outer.size(); d-- > 0;) {
        const int64_t idx = rest % w.outer[d];
        rest /= w.outer[d];
        for (size_t o = 0; o < ops; ++o) base[o] += idx * w.stride[o][d];
      }
      const int64_t first = tile * kTile, n = std::min(kTile, w.inner - first);
      for (size_t o = 0; o < ops; ++o) base[o] += first * w.inner_stride[o];
      // Inputs: read in place when dense, else a register filled (broadcast) or gathered.
      for (size_t i = 0; i < p.inputs; ++i) {
        const size_t o = n_out + i;
        const int64_t s = w.inner_stride[o];
        if (s == static_cast<int64_t>(sizeof(float))) {
          ptr[i] = reinterpret_cast<float*>(base[o]);
          continue;
        }
        float* r = reg(static_cast<int>(i));
        if (s == 0) {
          std::fill_n(r, n, *reinterpret_cast<const float*>(base[o]));
        } else {
          for (int64_t e = 0; e < n; ++e) r[e] = *reinterpret_cast<const float*>(base[o] + e * s);
        }
        ptr[i] = r;
      }
      // Outputs: written in place when dense, else scattered from their register.
      for (size_t o = 0; o < n_out; ++o) direct[o] = w.inner_stride[o] == static_cast<int64_t>(sizeof(float));
      for (const Instr& in : p.code) {
        const int out = p.output_of_slot[static_cast<size_t>(in.dst)];
        float* dst = out >= 0 && direct[static_cast<size_t>(out)] ? reinterpret_cast<float*>(base[static_cast<size_t>(out)])
                                                                 : reg(in.dst);
        if (in.unary != nullptr) {
          in.unary(dst, ptr[static_cast<size_t>(in.a)], n);
        } else {
          in.binary(dst, ptr[static_cast<size_t>(in.a)], ptr[static_cast<size_t>(in.b)], n, in.alpha);
        }
        ptr[static_cast<size_t>(in.dst)] = dst;
        if (out >= 0 && !direct[static_cast<size_t>(out)]) {
          char* to = base[static_cast<size_t>(out)];
          const int64_t s = w.inner_stride[static_cast<size_t>(out)];
          for (int64_t e = 0; e < n; ++e) *reinterpret_cast<float*>(to + e * s) = dst[e];
        }
      }
    }
  }

  std::shared_ptr<const Program> p_;
};

bool float32(const Graph& g, uint32_t v) { return v != kNoValue && g.values[v].dtype == HAL_DTYPE_FLOAT32; }

}  // namespace

std::string loop_refusal(const Graph& g, size_t n) {
  const GraphNode& node = g.nodes[n];
  if (node.outputs.size() != 1 || !float32(g, node.outputs[0])) return "not one float32 output";
  if (unary_fn(node) != nullptr) {
    if (node.inputs.size() != 1 || !float32(g, node.inputs[0])) return "input is not float32";
    return "";
  }
  float alpha = 1.0f;
  if (binary_fn(node, &alpha) != nullptr) {
    if (node.inputs.size() != 2 || !float32(g, node.inputs[0]) || !float32(g, node.inputs[1]))
      return "inputs are not both float32";
    return "";
  }
  return std::string("no tile function for '") + node.op() + "'";
}

std::vector<sdk::HostGraphFusion> find_elementwise_fusions(const Graph& g, std::vector<bool>& taken) {
  const size_t nn = g.nodes.size(), nv = g.values.size();
  std::vector<std::vector<size_t>> readers(nv);
  std::vector<int64_t> producer(nv, -1);
  std::vector<bool> graph_output(nv, false);
  for (size_t n = 0; n < nn; ++n) {
    for (uint32_t v : g.nodes[n].inputs)
      if (v != kNoValue && (readers[v].empty() || readers[v].back() != n)) readers[v].push_back(n);
    for (uint32_t v : g.nodes[n].outputs) producer[v] = static_cast<int64_t>(n);
  }
  for (uint32_t v : g.outputs) graph_output[v] = true;

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
    int64_t chosen = -1;
    for (uint32_t v : g.nodes[n].inputs) {
      const int64_t p = producer[v];
      if (p < 0 || group_of[static_cast<size_t>(p)] < 0) continue;
      const size_t gi = static_cast<size_t>(group_of[static_cast<size_t>(p)]);
      if (g.values[g.nodes[groups[gi][0]].outputs[0]].shape == shape && groups[gi].size() < kMaxLoopNodes &&
          may_join(gi, n)) {
        chosen = static_cast<int64_t>(gi);
        break;
      }
    }
    if (chosen < 0) {
      chosen = static_cast<int64_t>(groups.size());
      groups.emplace_back();
    }
    groups[static_cast<size_t>(chosen)].push_back(n);
    group_of[n] = chosen;
  }

  std::vector<sdk::HostGraphFusion> fusions;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const std::vector<size_t>& nodes = groups[gi];
    if (nodes.size() < 2) continue;
    auto program = std::make_shared<Program>();
    sdk::HostGraphFusion f;
    f.nodes = nodes;
    std::vector<int> slot_of_value(nv, -1);
    for (size_t n : nodes)  // inputs: read, not made inside, in first-read order
      for (uint32_t v : g.nodes[n].inputs) {
        const bool inside = producer[v] >= 0 && group_of[static_cast<size_t>(producer[v])] == static_cast<int64_t>(gi);
        if (inside || slot_of_value[v] >= 0) continue;
        slot_of_value[v] = static_cast<int>(f.inputs.size());
        f.inputs.push_back(v);
      }
    program->inputs = f.inputs.size();
    for (size_t j = 0; j < nodes.size(); ++j) slot_of_value[g.nodes[nodes[j]].outputs[0]] = static_cast<int>(program->inputs + j);
    const size_t slots = program->inputs + nodes.size();
    program->output_of_slot.assign(slots, -1);
    f.label = "loop[";
    for (size_t j = 0; j < nodes.size(); ++j) {
      const GraphNode& node = g.nodes[nodes[j]];
      Instr in;
      in.dst = static_cast<int>(program->inputs + j);
      in.unary = unary_fn(node);
      in.a = slot_of_value[node.inputs[0]];
      if (in.unary == nullptr) {
        in.binary = binary_fn(node, &in.alpha);
        in.b = slot_of_value[node.inputs[1]];
      }
      program->code.push_back(in);
      const uint32_t v = node.outputs[0];
      bool read_outside = graph_output[v];
      for (size_t r : readers[v]) read_outside = read_outside || group_of[r] != static_cast<int64_t>(gi);
      if (read_outside) {
        program->output_of_slot[static_cast<size_t>(in.dst)] = static_cast<int>(f.outputs.size());
        program->output_slot.push_back(in.dst);
        f.outputs.push_back(v);
      }
      f.label += (j ? ", n" : "n") + std::to_string(nodes[j]) + " " + node.op();
    }
    f.label += "]";
    if (f.outputs.empty()) continue;  // nothing reads it: dead code, left alone
    // Registers by liveness: a slot's register is free after its last
    // reader, and a node's output never shares its operands' registers.
    std::vector<size_t> last_read(slots, 0);
    for (size_t j = 0; j < program->code.size(); ++j) {
      const Instr& in = program->code[j];
      last_read[static_cast<size_t>(in.a)] = j;
      if (in.b >= 0) last_read[static_cast<size_t>(in.b)] = j;
    }
    program->reg.assign(slots, -1);
    std::vector<int> free_regs;
    auto take = [&]() {
      if (!free_regs.empty()) {
        const int r = free_regs.back();
        free_regs.pop_back();
        return r;
      }
      return program->registers++;
    };
    // Inputs are loaded at the start of each tile: their registers are live from there.
    for (size_t i = 0; i < program->inputs; ++i) program->reg[i] = take();
    for (size_t j = 0; j < program->code.size(); ++j) {
      const Instr& in = program->code[j];
      program->reg[static_cast<size_t>(in.dst)] = take();
      // Free what this instruction read last (once), and its own output when nothing reads it.
      std::vector<int> done;
      for (int s : {in.a, in.b})
        if (s >= 0 && last_read[static_cast<size_t>(s)] == j && std::find(done.begin(), done.end(), s) == done.end())
          done.push_back(s);
      bool dst_read = false;
      for (size_t k = j + 1; k < program->code.size() && !dst_read; ++k)
        dst_read = program->code[k].a == in.dst || program->code[k].b == in.dst;
      if (!dst_read) done.push_back(in.dst);
      for (int s : done) free_regs.push_back(program->reg[static_cast<size_t>(s)]);
    }
    for (size_t n : nodes) taken[n] = true;
    std::shared_ptr<const Program> shared = program;
    f.make = [shared](const std::vector<Tensor>&, const std::vector<Tensor>&) {
      return std::make_unique<LoopStep>(shared);
    };
    fusions.push_back(std::move(f));
  }
  return fusions;
}

}  // namespace hal::cpu
