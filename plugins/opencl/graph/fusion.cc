// OpenCL plugin: fusing elementwise chains (and a trailing reduction) of a
// graph into one generated kernel. See fusion.hpp.
#include "fusion.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "../cl_device.hpp"
#include "../ops/cl_kernel.hpp"
#include "../ops/elementwise.hpp"
#include "hal/sdk/kernel/strided.hpp"

namespace hal::opencl {
namespace {

using sdk::Graph;
using sdk::GraphNode;
using sdk::kNoValue;

// Operands (inputs + outputs) one fused kernel takes at most.
constexpr size_t kMaxFusedOperands = 24;
// Work-group size of every fused kernel (fixed: PoCL compiles per size).
constexpr size_t kGroup = 64;

bool supported(const ClDevice& device, hal_dtype_e t) {
  switch (t) {
    case HAL_DTYPE_FLOAT32: case HAL_DTYPE_INT8: case HAL_DTYPE_UINT8: case HAL_DTYPE_INT16:
    case HAL_DTYPE_INT32: case HAL_DTYPE_INT64: case HAL_DTYPE_BOOL:
      return true;
    case HAL_DTYPE_FLOAT64: return device.has_fp64();
    default: return false;
  }
}

enum class Reduce { kSum, kMean, kMax, kMin };

// What one node is to the fuser.
struct NodeInfo {
  enum Role { kNone, kElementwise, kReduction } role = kNone;
  std::string why;  // kNone: the reason
  // kElementwise
  std::vector<sdk::Tensor> metas;  // K.inputs point here (dtype, rank, defined)
  ElementwiseKernel k;
  // kReduction
  Reduce reduce = Reduce::kSum;
  uint32_t mask = 0;  // reduced dims of the input
  hal_dtype_e in = HAL_DTYPE_INVALID, out = HAL_DTYPE_INVALID;
};

const sdk::AttrValue* attr(const GraphNode& n, const char* name) {
  for (size_t i = 0; i < n.schema->attr_count && i < n.attrs.size(); ++i)
    if (std::strcmp(n.schema->attrs[i].name, name) == 0) return &n.attrs[i];
  return nullptr;
}

NodeInfo analyse(const ClDevice& device, const Graph& g, const GraphNode& n) {
  NodeInfo info;
  auto none = [&](std::string why) {
    info.role = NodeInfo::kNone;
    info.why = std::move(why);
    return info;
  };
  if (n.outputs.size() != 1) return none("not a single-output op");
  const sdk::GraphValue& out = g.values[n.outputs[0]];
  if (!supported(device, out.dtype)) return none(std::string("dtype ") + sdk::dtype_name(out.dtype));
  for (uint32_t v : n.inputs)
    if (v != kNoValue && !supported(device, g.values[v].dtype))
      return none(std::string("dtype ") + sdk::dtype_name(g.values[v].dtype));
  const std::string op = n.op();

  if (op == "sum" || op == "mean" || op == "amax" || op == "amin") {
    if (n.inputs.empty() || n.inputs[0] == kNoValue) return none("no input");
    const sdk::GraphValue& in = g.values[n.inputs[0]];
    info.reduce = op == "sum" ? Reduce::kSum : op == "mean" ? Reduce::kMean : op == "amax" ? Reduce::kMax : Reduce::kMin;
    info.in = in.dtype;
    info.out = out.dtype;
    // The output dtype the catalog gives.
    hal_dtype_e want = in.dtype;
    if (info.reduce == Reduce::kSum || info.reduce == Reduce::kMean) {
      const sdk::AttrValue* d = attr(n, "dtype");
      if (d && d->as_dtype() != HAL_DTYPE_INVALID) want = d->as_dtype();
      else if (info.reduce == Reduce::kSum && !sdk::is_floating(in.dtype)) want = HAL_DTYPE_INT64;
      if (info.reduce == Reduce::kMean && !sdk::is_floating(want)) return none("mean of a non-floating dtype");
    }
    if (want != out.dtype) return none("output dtype is not the catalog's");
    const sdk::AttrValue* dims = attr(n, "dim");
    const sdk::AttrValue* keep = attr(n, "keepdim");
    if (!dims || !keep) return none("no dim/keepdim");
    int rank = in.rank();
    if (dims->as_ints().empty()) info.mask = rank == 0 ? 0 : (1u << rank) - 1;
    for (int64_t d : dims->as_ints()) {
      int64_t dd = d < 0 ? d + rank : d;
      if (dd < 0 || dd >= std::max(rank, 1) || (rank > 0 && ((info.mask >> dd) & 1u))) return none("bad dim");
      if (rank > 0) info.mask |= 1u << dd;
    }
    std::vector<int64_t> expect;
    for (int d = 0; d < rank; ++d) {
      if (!((info.mask >> d) & 1u)) expect.push_back(in.shape[d]);
      else if (keep->as_bool()) expect.push_back(1);
    }
    if (expect != out.shape) return none("output shape is not the catalog's");
    info.role = NodeInfo::kReduction;
    return info;
  }

  for (uint32_t v : n.inputs) {
    sdk::Tensor t;
    if (v != kNoValue) {
      t.defined = true;
      t.dtype = g.values[v].dtype;
      t.rank = g.values[v].rank();
      if (t.rank > out.rank()) return none("an input of higher rank than the output");
    }
    info.metas.push_back(t);
  }
  std::string why;
  if (!elementwise_expression(*n.schema, info.metas, out.dtype, n.attrs, info.k, &why)) return none(why);
  if (!info.k.guard.empty()) return none("needs a data check");
  for (hal_dtype_e d : info.k.input_compute)
    if (d != HAL_DTYPE_INVALID && !supported(device, d)) return none("compute dtype");
  if (!supported(device, info.k.compute)) return none("compute dtype");
  info.role = NodeInfo::kElementwise;
  return info;
}

// ---- partition --------------------------------------------------------------------

struct GroupState {
  std::vector<int64_t> shape;
  bool closed = false;  // has its reduction
  std::set<uint32_t> external;  // values read from outside
  size_t nodes = 0;
};

}  // namespace

std::vector<uint32_t> partition_fused(const ClDevice& device, const Graph& g) {
  const size_t n = g.nodes.size();
  std::vector<uint32_t> group(n, 0);
  std::vector<int64_t> producer(g.values.size(), -1);
  std::vector<std::set<uint32_t>> upstream(n);  // groups each node depends on (own included)
  std::map<uint32_t, GroupState> groups;
  uint32_t next = 1;
  auto group_of = [&](uint32_t v) -> uint32_t {
    return v == kNoValue || producer[v] < 0 ? 0 : group[static_cast<size_t>(producer[v])];
  };
  for (size_t i = 0; i < n; ++i) {
    const GraphNode& node = g.nodes[i];
    for (uint32_t v : node.inputs)
      if (v != kNoValue && producer[v] >= 0) {
        const auto& up = upstream[static_cast<size_t>(producer[v])];
        upstream[i].insert(up.begin(), up.end());
      }
    NodeInfo info = analyse(device, g, node);
    // Joining group K keeps it convex when no other input depends on K
    // through a node outside it.
    auto convex = [&](uint32_t k) {
      for (uint32_t w : node.inputs)
        if (w != kNoValue && producer[w] >= 0 && group_of(w) != k &&
            upstream[static_cast<size_t>(producer[w])].count(k) > 0)
          return false;
      return true;
    };
    if (info.role == NodeInfo::kElementwise) {
      const std::vector<int64_t>& shape = g.values[node.outputs[0]].shape;
      for (uint32_t v : node.inputs) {
        uint32_t k = group_of(v);
        if (k == 0) continue;
        GroupState& s = groups[k];
        if (s.closed || s.shape != shape || !convex(k)) continue;
        std::set<uint32_t> ext = s.external;
        for (uint32_t w : node.inputs)
          if (w != kNoValue && group_of(w) != k) ext.insert(w);
        if (ext.size() + s.nodes + 1 > kMaxFusedOperands) continue;
        group[i] = k;
        s.external = std::move(ext);
        ++s.nodes;
        break;
      }
      // A tree: other groups feeding this node merge into its group when
      // neither depends on the other (so the union stays convex).
      for (uint32_t v : node.inputs) {
        uint32_t k = group[i], k2 = group_of(v);
        if (k == 0 || k2 == 0 || k2 == k) continue;
        GroupState &s = groups[k], &s2 = groups[k2];
        if (s2.closed || s2.shape != shape) continue;
        bool independent = true;
        for (size_t j = 0; j < i && independent; ++j)
          if ((group[j] == k && upstream[j].count(k2)) || (group[j] == k2 && upstream[j].count(k)))
            independent = false;
        bool ok = independent;
        for (uint32_t w : node.inputs)  // no path into the node around the union
          if (ok && w != kNoValue && producer[w] >= 0 && group_of(w) != k && group_of(w) != k2) {
            const auto& up = upstream[static_cast<size_t>(producer[w])];
            ok = up.count(k) == 0 && up.count(k2) == 0;
          }
        std::set<uint32_t> ext = s.external;
        ext.insert(s2.external.begin(), s2.external.end());
        for (uint32_t w : node.inputs)
          if (w != kNoValue && (group_of(w) == k || group_of(w) == k2)) ext.erase(w);
        if (!ok || ext.size() + s.nodes + s2.nodes > kMaxFusedOperands) continue;
        s.external = std::move(ext);
        s.nodes += s2.nodes;
        for (size_t j = 0; j < i; ++j) {
          if (group[j] == k2) group[j] = k;
          if (upstream[j].erase(k2)) upstream[j].insert(k);
        }
        if (upstream[i].erase(k2)) upstream[i].insert(k);
        groups.erase(k2);
      }
      if (group[i] == 0) {
        GroupState s;
        s.shape = shape;
        for (uint32_t w : node.inputs)
          if (w != kNoValue) s.external.insert(w);
        s.nodes = 1;
        if (s.external.size() + 1 <= kMaxFusedOperands) {
          group[i] = next++;
          groups[group[i]] = std::move(s);
        }
      }
    } else if (info.role == NodeInfo::kReduction) {
      uint32_t k = group_of(node.inputs[0]);
      if (k != 0 && !groups[k].closed) {
        group[i] = k;
        groups[k].closed = true;
      }
    }
    if (group[i] != 0) upstream[i].insert(group[i]);
    for (uint32_t v : node.outputs) producer[v] = static_cast<int64_t>(i);
  }
  return group;
}

namespace {

// ---- code generation -----------------------------------------------------------------

std::string store(hal_dtype_e out, hal_dtype_e from, const std::string& value) {
  if (out == HAL_DTYPE_BOOL) return "(uchar)((" + value + ") != 0)";
  if (sdk::is_integral(out) && sdk::is_floating(from))
    return "(" + std::string(cl_type(out)) + ")convert_long_sat(" + value + ")";
  return "(" + std::string(cl_type(out)) + ")(" + value + ")";
}

// Renames the functions HELPERS defines ("C name(") to name_SUFFIX, in TEXT.
std::string rename_helpers(const std::string& helpers, const std::string& suffix, std::string text) {
  static const std::regex def(R"((?:^|\n)C ([A-Za-z_][A-Za-z0-9_]*)\()");
  for (std::sregex_iterator it(helpers.begin(), helpers.end(), def), end; it != end; ++it) {
    std::regex use("\\b" + (*it)[1].str() + "\\(");
    text = std::regex_replace(text, use, (*it)[1].str() + "_" + suffix + "(");
  }
  return text;
}

std::string identity(Reduce r, hal_dtype_e t) {
  bool max = r == Reduce::kMax;
  switch (t) {
    case HAL_DTYPE_FLOAT32: case HAL_DTYPE_FLOAT64: return max ? "-INFINITY" : "INFINITY";
    case HAL_DTYPE_INT8: return max ? "CHAR_MIN" : "CHAR_MAX";
    case HAL_DTYPE_UINT8: return max ? "0" : "UCHAR_MAX";
    case HAL_DTYPE_BOOL: return max ? "0" : "1";
    case HAL_DTYPE_INT16: return max ? "SHRT_MIN" : "SHRT_MAX";
    case HAL_DTYPE_INT32: return max ? "INT_MIN" : "INT_MAX";
    default: return max ? "LONG_MIN" : "LONG_MAX";
  }
}

// A compiled group.
struct Plan {
  std::vector<int64_t> shape;  // iteration shape (symbolic dims < 0)
  // Operands: the elementwise outputs (graph output index), then the inputs.
  std::vector<size_t> ew_outputs;
  bool has_reduction = false;
  bool reduction_written = false;
  size_t reduction_output = 0;  // graph output index
  NodeInfo red;
  hal_dtype_e acc = HAL_DTYPE_INVALID;
  std::vector<std::pair<hal_dtype_e, sdk::Scalar>> scalars;  // in kernel argument order
  std::string source;
  std::string description;
  std::string file_stem;
  // Per node: its op, its inputs' value ids and the shape rule (for the
  // checks at execute).
  struct Check {
    std::string op;
    bool broadcast;
    std::vector<uint32_t> inputs;
  };
  std::vector<Check> checks;
};

class FusedExecutable final : public sdk::Executable {
 public:
  FusedExecutable(ClDevice& device, const Graph& g, Plan plan) : device_(device), graph_(g), plan_(std::move(plan)) {}
  void execute(const std::vector<Tensor>& in, const std::vector<Tensor>& out, sdk::Stream* stream) override;
  uint32_t kernel_count() const override { return 1; }
  std::string description() const override { return plan_.description; }

 private:
  ClDevice& device_;
  Graph graph_;
  Plan plan_;
};

// OpenCL C of a loop over reduced positions [R0, R1) (variables) from base
// offsets b<k> of OPERANDS operands, running BODY with offsets o<k>.
std::string red_loop(size_t operands, const std::string& body) {
  std::ostringstream s;
  s << "  {\n    int rr = (int)geo[1];\n    long inner = rr > 0 ? RSZ(rr - 1) : 1;\n";
  for (size_t k = 0; k < operands; ++k) s << "    long si" << k << " = rr > 0 ? RST(" << k << ", rr - 1) : 0;\n";
  s << "    for (long r = r0; r < r1;) {\n      long rest = r;\n";
  for (size_t k = 0; k < operands; ++k) s << "      long o" << k << " = b" << k << ";\n";
  s << "      for (int d = rr - 1; d >= 0; --d) {\n        long c = rest % RSZ(d); rest /= RSZ(d);\n";
  for (size_t k = 0; k < operands; ++k) s << "        o" << k << " += c * RST(" << k << ", d);\n";
  s << "      }\n      long ci = rr > 0 ? r % inner : 0;\n      long cnt = min(inner - ci, r1 - r);\n"
    << "      for (long j = 0; j < cnt; ++j) {\n" << body;
  for (size_t k = 0; k < operands; ++k) s << "        o" << k << " += si" << k << ";\n";
  s << "      }\n      r += cnt;\n    }\n  }\n";
  return s.str();
}

// OpenCL C of a work-group's loop over tiles [T0, T1) of the reduced dims:
// a tile is SEG consecutive elements of one row of the innermost dim, its
// elements taken by consecutive work-items (item "l") in rounds of 64 with
// one trip count for the whole group (so the driver vectorises across
// work-items). Offsets start at b<k>; BODY runs with offsets o<k>.
std::string tile_loop(size_t operands, const std::string& body) {
  std::ostringstream s;
  s << "  {\n    int rr = (int)geo[1];\n    long inner = rr > 0 ? RSZ(rr - 1) : 1;\n"
    << "    long tpr = (inner + seg - 1) / seg;\n    long tend = min(t1, inner > 0 ? red / inner * tpr : 0);\n";
  for (size_t k = 0; k < operands; ++k) s << "    long si" << k << " = rr > 0 ? RST(" << k << ", rr - 1) : 0;\n";
  s << "    for (long t = t0; t < tend; ++t) {\n      long row = t / tpr, c0 = (t % tpr) * seg;\n"
    << "      long cend = min(c0 + seg, inner), rest = row;\n";
  for (size_t k = 0; k < operands; ++k) s << "      long ob" << k << " = b" << k << ";\n";
  s << "      for (int d = rr - 2; d >= 0; --d) {\n        long c = rest % RSZ(d); rest /= RSZ(d);\n";
  for (size_t k = 0; k < operands; ++k) s << "        ob" << k << " += c * RST(" << k << ", d);\n";
  s << "      }\n      for (long cb = c0; cb < cend; cb += 64) {\n        long c = cb + l;\n"
    << "        if (c < cend) {\n";
  for (size_t k = 0; k < operands; ++k) s << "        long o" << k << " = ob" << k << " + c * si" << k << ";\n";
  s << body << "        }\n      }\n    }\n  }\n";
  return s.str();
}

// Base offsets b<k> (and rb for the reduction output, slot N) of output
// position "o" over the kept dims.
std::string kept_offsets(size_t operands, bool reduction) {
  std::ostringstream s;
  for (size_t k = 0; k < operands; ++k) s << "  long b" << k << " = off" << k << ";\n";
  if (reduction) s << "  long rb = roff;\n";
  s << "  {\n    long rest = o;\n    for (int d = (int)geo[0] - 1; d >= 0; --d) {\n"
    << "      long c = rest % KSZ(d); rest /= KSZ(d);\n";
  for (size_t k = 0; k < operands; ++k) s << "      b" << k << " += c * KST(" << k << ", d);\n";
  if (reduction) s << "      rb += c * KST(" << operands << ", d);\n";
  s << "    }\n  }\n";
  return s.str();
}

Plan plan_group(ClDevice& device, const Graph& g) {
  Plan plan;
  std::vector<NodeInfo> infos;
  std::vector<int64_t> producer(g.values.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    infos.push_back(analyse(device, g, n));
    NodeInfo& info = infos.back();
    auto refuse = [&](const std::string& why) {
      sdk::fail(HAL_STATUS_UNIMPLEMENTED, "node ", i, " ('", n.op(), "'): the OpenCL graph compiler cannot fuse it (",
                why, ")");
    };
    if (info.role == NodeInfo::kNone) refuse(info.why);
    if (plan.has_reduction) refuse("a node after the group's reduction");
    if (info.role == NodeInfo::kElementwise) {
      const auto& shape = g.values[n.outputs[0]].shape;
      if (i == 0) plan.shape = shape;
      if (shape != plan.shape) refuse("its output shape differs from the group's");
    } else {
      uint32_t v = n.inputs[0];
      if (producer[v] < 0) refuse("its input is not computed in the group");
      plan.has_reduction = true;
      plan.red = info;
    }
    for (uint32_t v : n.outputs) producer[v] = static_cast<int64_t>(i);
  }
  if (g.nodes.empty() || infos[0].role != NodeInfo::kElementwise)
    sdk::fail(HAL_STATUS_UNIMPLEMENTED, "the OpenCL graph compiler needs an elementwise node first");

  // Operands.
  std::vector<bool> is_input(g.values.size(), false);
  for (uint32_t v : g.inputs) is_input[v] = true;
  for (size_t j = 0; j < g.outputs.size(); ++j) {
    uint32_t v = g.outputs[j];
    if (plan.has_reduction && producer[v] == static_cast<int64_t>(g.nodes.size() - 1)) {
      plan.reduction_written = true;
      plan.reduction_output = j;
    } else {
      plan.ew_outputs.push_back(j);
    }
  }
  const size_t n_out = plan.ew_outputs.size();
  const size_t operands = n_out + g.inputs.size();
  if (operands > kMaxFusedOperands)
    sdk::fail(HAL_STATUS_UNIMPLEMENTED, "the group has ", operands, " operands; the OpenCL graph compiler fuses at most ",
              kMaxFusedOperands);

  std::vector<hal_dtype_e> dtypes;
  for (const auto& v : g.values) dtypes.push_back(v.dtype);
  std::ostringstream src, helpers, funcs, body;
  std::set<std::string> emitted_helpers;
  src << cl_prelude(dtypes) << "#pragma OPENCL FP_CONTRACT OFF\n"
      << "#define KSZ(d) geo[2 + (d)]\n#define RSZ(d) geo[10 + (d)]\n"
      << "#define KST(k, d) geo[18 + (k) * 16 + (d)]\n#define RST(k, d) geo[26 + (k) * 16 + (d)]\n";

  // Loads of the inputs.
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    uint32_t v = g.inputs[i];
    body << "        " << cl_type(g.values[v].dtype) << " v" << v << " = p" << n_out + i << "[o" << n_out + i
         << "];\n";
  }
  // The nodes, as functions.
  std::string ops_list, stem;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const GraphNode& n = g.nodes[i];
    const NodeInfo& info = infos[i];
    ops_list += (ops_list.empty() ? "" : ", ") + std::string(n.op());
    stem += "_" + std::string(n.op());
    if (info.role != NodeInfo::kElementwise) continue;
    const ElementwiseKernel& k = info.k;
    const std::string ct = cl_type(k.compute);
    std::string expr = k.expr;
    if (!k.helpers.empty()) {
      if (emitted_helpers.insert(ct + "\n" + k.helpers).second)
        helpers << "#define C " << ct << "\n" << rename_helpers(k.helpers, ct, k.helpers) << "#undef C\n";
      expr = rename_helpers(k.helpers, ct, expr);
    }
    hal_dtype_e out = g.values[n.outputs[0]].dtype;
    funcs << "#define C " << ct << "\ninline " << cl_type(out) << " f" << i << "(";
    std::string args, call_args;
    for (size_t j = 0; j < k.inputs.size(); ++j) {
      if (k.inputs[j] == nullptr) continue;
      hal_dtype_e c = k.input_compute.size() > j && k.input_compute[j] != HAL_DTYPE_INVALID ? k.input_compute[j]
                                                                                          : k.compute;
      args += (args.empty() ? "" : ", ") + std::string(cl_type(c)) + " x" + std::to_string(j);
      call_args += (call_args.empty() ? "" : ", ") + std::string("(") + cl_type(c) + ")v" +
                   std::to_string(n.inputs[j]);
    }
    for (size_t j = 0; j < k.scalars.size(); ++j) {
      args += (args.empty() ? "" : ", ") + std::string("C s") + std::to_string(j);
      call_args += (call_args.empty() ? "" : ", ") + std::string("s") + std::to_string(plan.scalars.size());
      plan.scalars.emplace_back(k.compute, k.scalars[j]);
    }
    funcs << args << ") { return " << store(out, k.compute, expr) << "; }\n#undef C\n";
    body << "        " << cl_type(out) << " v" << n.outputs[0] << " = f" << i << "(" << call_args << ");\n";
    Plan::Check check{n.op(), std::string(n.schema->shape_rule) != "same" &&
                                  std::string(n.schema->shape_rule) != "same_all", {}};
    for (uint32_t v : n.inputs)
      if (v != kNoValue) check.inputs.push_back(v);
    plan.checks.push_back(std::move(check));
  }
  for (size_t j = 0; j < n_out; ++j) body << "        p" << j << "[o" << j << "] = v" << g.outputs[plan.ew_outputs[j]] << ";\n";

  // Parameters.
  std::ostringstream params;
  for (size_t j = 0; j < n_out; ++j)
    params << "__global " << cl_type(g.values[g.outputs[plan.ew_outputs[j]]].dtype) << "* p" << j << ", long off"
           << j << ", ";
  for (size_t i = 0; i < g.inputs.size(); ++i)
    params << "__global const " << cl_type(g.values[g.inputs[i]].dtype) << "* p" << n_out + i << ", long off"
           << n_out + i << ", ";
  params << "__global const long* geo, long outs, long red, long chunk, long seg";
  for (size_t j = 0; j < plan.scalars.size(); ++j) params << ", " << cl_type(plan.scalars[j].first) << " s" << j;

  src << helpers.str() << funcs.str();
  const char* attrs = "__attribute__((reqd_work_group_size(64, 1, 1)))";
  if (!plan.has_reduction) {
    src << "__kernel " << attrs << " void fused(" << params.str() << ") {\n"
        << "  int l = (int)get_local_id(0);\n  long t0 = get_group_id(0) * chunk, t1 = t0 + chunk;\n"
        << "  long o = 0;\n" << kept_offsets(operands, false) << tile_loop(operands, body.str()) << "}\n";
  } else {
    const NodeInfo& r = plan.red;
    uint32_t rin = g.nodes.back().inputs[0];
    bool sum = r.reduce == Reduce::kSum || r.reduce == Reduce::kMean;
    plan.acc = sum ? (sdk::is_floating(r.out) ? r.out : HAL_DTYPE_INT64) : r.in;
    const std::string A = cl_type(plan.acc);
    std::string x = sum ? "(A)(" + store(r.out, r.in, "v" + std::to_string(rin)) + ")" : "v" + std::to_string(rin);
    std::string init, step, value, combine;
    if (sum && sdk::is_floating(plan.acc)) {  // compensated (Kahan) summation
      init = "  A ks = 0, kc = 0;\n";
      step = "        { A y = " + x + " - kc; A t = ks + y; kc = (t - ks) - y; ks = t; }\n";
      value = "(ks - kc)";
      combine = "a + b";
    } else if (sum) {
      init = "  A ks = 0;\n";
      step = "        ks += " + x + ";\n";
      value = "ks";
      combine = "a + b";
    } else {
      const char* cmp = r.reduce == Reduce::kMax ? ">" : "<";
      init = "  A ks = " + identity(r.reduce, r.in) + ";\n";
      step = "        { A y = " + x + "; ks = (ks != ks) ? ks : (y != y) ? y : (y " + cmp + " ks ? y : ks); }\n";
      value = "ks";
      combine = std::string("(a != a) ? a : (b != b) ? b : (b ") + cmp + " a ? b : a)";
    }
    std::string finish = r.reduce == Reduce::kMean ? store(r.out, plan.acc, "a / (A)n") : store(r.out, plan.acc, "a");
    src << "typedef " << A << " A;\n"
        << "inline A combine(A a, A b) { return " << combine << "; }\n"
        << "inline " << cl_type(r.out) << " finish(A a, long n) { return " << finish << "; }\n";
    std::string rparams = params.str() + ", __global " + cl_type(r.out) +
                          "* rp, long roff, __global A* part, __global volatile int* counter, long parts";
    std::string full_body = body.str() + step;
    // One work-item per output.
    src << "__kernel " << attrs << " void fused_rows(" << rparams << ") {\n"
        << "  long o = get_global_id(0);\n  if (o >= outs) return;\n"
        << kept_offsets(operands, true) << init << "  long r0 = 0, r1 = red;\n"
        << red_loop(operands, full_body) << "  rp[rb] = finish(" << value << ", red);\n}\n";
    // PARTS work-groups per output, a local-memory tree each; the last
    // work-group of an output to finish combines the partial results.
    src << "__kernel " << attrs << " void fused_split(" << rparams << ") {\n"
        << "  __local A lacc[64];\n  long grp = get_group_id(0);\n  int l = (int)get_local_id(0);\n"
        << "  long o = grp / parts, pi = grp % parts;\n"
        << kept_offsets(operands, true) << init
        << "  long t0 = pi * chunk, t1 = t0 + chunk;\n"
        << tile_loop(operands, full_body) << "  lacc[l] = " << value << ";\n  barrier(CLK_LOCAL_MEM_FENCE);\n"
        << "  for (int s = 32; s > 0; s >>= 1) {\n    if (l < s) lacc[l] = combine(lacc[l], lacc[l + s]);\n"
        << "    barrier(CLK_LOCAL_MEM_FENCE);\n  }\n"
        << "  if (l == 0) {\n    if (parts == 1) { rp[rb] = finish(lacc[0], red); return; }\n"
        << "    part[grp] = lacc[0];\n    mem_fence(CLK_GLOBAL_MEM_FENCE);\n"
        << "    if (atomic_inc(&counter[o]) == (int)parts - 1) {\n      mem_fence(CLK_GLOBAL_MEM_FENCE);\n"
        << "      volatile __global A* pp = part + o * parts;\n      A a = pp[0];\n"
        << "      for (long p = 1; p < parts; ++p) a = combine(a, pp[p]);\n      rp[rb] = finish(a, red);\n"
        << "    }\n  }\n}\n";
  }
  plan.source = src.str();
  plan.description = "fused: ";
  std::string chain;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (infos[i].role == NodeInfo::kElementwise) chain += (chain.empty() ? "" : ", ") + std::string(g.nodes[i].op());
  plan.description += chain;
  if (plan.has_reduction) plan.description += std::string(" -> ") + g.nodes.back().op();
  plan.description += " (1 kernel)";
  if (stem.size() > 80) stem = stem.substr(0, 80);
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%016zx", std::hash<std::string>{}(plan.source));
  plan.file_stem = "fused" + stem + "_" + std::string(hash).substr(0, 12);
  return plan;
}

// Geometry buffer contents (see the KSZ/RSZ/KST/RST macros).
struct Geo {
  std::vector<cl_long> words;
  int64_t outs = 1, red = 1;
  int64_t inner = 1;  // size of the innermost reduced dim (1: none)
};

// SHAPE iterated with OPERANDS' element strides (broadcast; ROUT: the
// reduction output's strides over the kept dims, or none) split into kept
// and reduced dims (MASK), size-1 dims dropped and neighbours merged.
Geo make_geo(const std::vector<int64_t>& shape, const std::vector<std::vector<int64_t>>& strides, uint32_t mask) {
  const size_t n = strides.size();
  struct Dim {
    int64_t size;
    std::vector<int64_t> st;
  };
  std::vector<Dim> kept, red;
  for (size_t d = 0; d < shape.size(); ++d) {
    Dim dim{shape[d], {}};
    for (size_t k = 0; k < n; ++k) dim.st.push_back(strides[k][d]);
    std::vector<Dim>& list = (mask >> d) & 1u ? red : kept;
    if (shape[d] == 1) continue;
    if (!list.empty() && shape[d] != 0 && list.back().size != 0) {
      bool merge = true;
      for (size_t k = 0; k < n && merge; ++k) merge = list.back().st[k] == dim.st[k] * dim.size;
      if (merge) {
        list.back().size *= dim.size;
        list.back().st = dim.st;
        continue;
      }
    }
    list.push_back(dim);
  }
  Geo geo;
  geo.words.assign(18 + 16 * n, 0);
  geo.words[0] = static_cast<cl_long>(kept.size());
  geo.words[1] = static_cast<cl_long>(red.size());
  for (size_t d = 0; d < kept.size(); ++d) {
    geo.words[2 + d] = kept[d].size;
    geo.outs *= kept[d].size;
    for (size_t k = 0; k < n; ++k) geo.words[18 + k * 16 + d] = kept[d].st[k];
  }
  if (!red.empty()) geo.inner = red.back().size;
  for (size_t d = 0; d < red.size(); ++d) {
    geo.words[10 + d] = red[d].size;
    geo.red *= red[d].size;
    for (size_t k = 0; k < n; ++k) geo.words[26 + k * 16 + d] = red[d].st[k];
  }
  return geo;
}

cl_mem host_copy(ClDevice& device, const void* data, size_t bytes) {
  cl_int err = CL_SUCCESS;
  cl_mem m = clCreateBuffer(device.context(), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, const_cast<void*>(data),
                            &err);
  cl_check(err, "clCreateBuffer", " (", bytes, " bytes of kernel geometry)");
  return m;
}

struct MemGuard {
  cl_mem m = nullptr;
  ~MemGuard() {
    if (m) clReleaseMemObject(m);
  }
};

void FusedExecutable::execute(const std::vector<Tensor>& in, const std::vector<Tensor>& out, sdk::Stream* stream) {
  const Graph& g = graph_;
  // Symbols bound by the tensors (the SDK checked they agree).
  std::map<int64_t, int64_t> symbols;
  auto bind = [&](uint32_t v, const Tensor& t) {
    for (int d = 0; d < t.rank; ++d)
      if (g.values[v].shape[d] < 0) symbols[g.values[v].shape[d]] = t.shape[d];
  };
  for (size_t i = 0; i < in.size(); ++i) bind(g.inputs[i], in[i]);
  for (size_t i = 0; i < out.size(); ++i) bind(g.outputs[i], out[i]);
  auto concrete = [&](uint32_t v) {
    std::vector<int64_t> s = g.values[v].shape;
    for (int64_t& d : s)
      if (d < 0) {
        auto it = symbols.find(d);
        if (it == symbols.end())
          sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "value ", v, ": symbol ", d, " is bound by no input or output");
        d = it->second;
      }
    return s;
  };
  std::vector<int64_t> shape = plan_.shape;
  for (int64_t& d : shape)
    if (d < 0) {
      auto it = symbols.find(d);
      if (it == symbols.end())
        sdk::fail(HAL_STATUS_INVALID_ARGUMENT, "the group's shape has symbol ", d, ", bound by no input or output");
      d = it->second;
    }
  const int rank = static_cast<int>(shape.size());
  // The catalog's shape rules, for what compile could not check (symbols).
  for (const Plan::Check& c : plan_.checks) {
    std::vector<int64_t> result(shape.size(), 1);
    for (uint32_t v : c.inputs) {
      std::vector<int64_t> s = concrete(v);
      bool ok = s.size() <= shape.size();
      for (size_t d = 0; d < s.size() && ok; ++d) {
        int64_t want = shape[shape.size() - s.size() + d];
        ok = s[d] == want || (c.broadcast && s[d] == 1);
        if (s[d] != 1) result[shape.size() - s.size() + d] = s[d];
      }
      if (!c.broadcast) ok = ok && s.size() == shape.size();
      if (!ok)
        sdk::fail(HAL_STATUS_INVALID_ARGUMENT, c.op, ": value ", v, " with shape ",
                  sdk::shape_string(s.data(), static_cast<int>(s.size())), " does not ",
                  c.broadcast ? "broadcast to" : "match", " the result shape ",
                  sdk::shape_string(shape.data(), rank));
    }
    if (c.broadcast && c.op != "copy")
      for (int d = 0; d < rank; ++d)
        if (result[d] != shape[d] && !(shape[d] == 1))
          sdk::fail(HAL_STATUS_INVALID_ARGUMENT, c.op, ": the inputs broadcast to dim ", d, " = ", result[d],
                    " but the result shape is ", sdk::shape_string(shape.data(), rank));
  }

  // Operands: element strides over SHAPE.
  std::vector<const Tensor*> ops;
  for (size_t j : plan_.ew_outputs) ops.push_back(&out[j]);
  for (const Tensor& t : in) ops.push_back(&t);
  std::vector<std::vector<int64_t>> strides;
  for (const Tensor* t : ops) {
    int64_t b[HAL_TENSOR_MAX_RANK] = {};
    sdk::kernel::broadcast_byte_strides(*t, rank, shape.data(), b);
    std::vector<int64_t> s(b, b + rank);
    for (int64_t& x : s) x /= static_cast<int64_t>(t->element_size());
    strides.push_back(std::move(s));
  }
  uint32_t mask = plan_.has_reduction ? plan_.red.mask : (rank == 0 ? 0 : (1u << rank) - 1);
  const Tensor* rout = plan_.has_reduction && plan_.reduction_written ? &out[plan_.reduction_output] : nullptr;
  if (plan_.has_reduction) {  // the reduction output's strides over the kept dims
    std::vector<int64_t> s(rank, 0);
    if (rout) {
      bool keepdim = rout->rank == rank;
      int od = 0;
      for (int d = 0; d < rank; ++d) {
        bool reduced = (mask >> d) & 1u;
        if (!reduced) s[d] = rout->strides[od];
        if (!reduced || keepdim) ++od;
      }
    }
    strides.push_back(std::move(s));
  }
  Geo geo = make_geo(shape, strides, mask);
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if (plan_.has_reduction && (plan_.red.reduce == Reduce::kMax || plan_.red.reduce == Reduce::kMin) &&
      geo.red == 0 && geo.outs > 0)
    sdk::fail(HAL_STATUS_INVALID_ARGUMENT, g.nodes.back().op(), ": reducing a dim of size 0 (there is no identity)");
  if (plan_.has_reduction ? geo.outs == 0 : numel == 0) return;

  const size_t operands = ops.size();
  std::string kernel = "fused";
  // Tiles: SEG elements of a row of the innermost reduced dim; a
  // work-group takes CHUNK tiles (of one output, with a reduction).
  const int64_t seg = 1024;
  const int64_t tiles = geo.inner == 0 ? 0 : geo.red / geo.inner * ((geo.inner + seg - 1) / seg);
  int64_t chunk = 1, parts = 1;
  size_t global = 0;
  if (!plan_.has_reduction) {
    chunk = std::max<int64_t>(1, (tiles + 255) / 256);
    global = static_cast<size_t>((tiles + chunk - 1) / chunk) * kGroup;
  } else if (geo.outs >= 512 || geo.red < 256) {
    kernel = "fused_rows";
    global = global_1d(geo.outs);
  } else {
    kernel = "fused_split";
    parts = std::max<int64_t>(1, std::min<int64_t>((64 + geo.outs - 1) / geo.outs, tiles));
    chunk = (tiles + parts - 1) / parts;
    global = static_cast<size_t>(geo.outs * parts) * kGroup;
  }
  MemGuard geo_mem{host_copy(device_, geo.words.data(), geo.words.size() * sizeof(cl_long))};
  MemGuard part_mem, counter_mem, rout_mem;
  if (plan_.has_reduction && !rout)  // nobody reads the reduction: somewhere to put it
    rout_mem.m = device_.scratch(static_cast<uint64_t>(geo.outs) * sdk::dtype_size(plan_.red.out));
  if (parts > 1) {
    part_mem.m = device_.scratch(static_cast<uint64_t>(geo.outs * parts) * sdk::dtype_size(plan_.acc));
    std::vector<cl_int> zeros(static_cast<size_t>(geo.outs), 0);
    counter_mem.m = host_copy(device_, zeros.data(), zeros.size() * sizeof(cl_int));
  }
  device_.submit(stream, [&](const Queue& q) {
    Launch l(device_, plan_.source, kernel);
    for (const Tensor* t : ops) l.tensor(*t);
    l.mem(geo_mem.m).value<cl_long>(geo.outs).value<cl_long>(geo.red).value<cl_long>(chunk).value<cl_long>(seg);
    for (const auto& [dtype, v] : plan_.scalars) l.scalar(dtype, v);
    if (plan_.has_reduction) {
      if (rout) l.tensor(*rout);
      else l.mem(rout_mem.m).value<cl_long>(0);
      l.mem(part_mem.m ? part_mem.m : geo_mem.m).mem(counter_mem.m ? counter_mem.m : geo_mem.m).value<cl_long>(parts);
    }
    l.enqueue(q, global, kGroup);
  });
  (void)operands;
}

}  // namespace

std::unique_ptr<sdk::Executable> compile_fused(ClDevice& device, const Graph& graph) {
  Plan plan = plan_group(device, graph);
  if (const char* dir = std::getenv("HAL_OPENCL_DUMP_DIR"); dir && *dir) {
    std::ofstream f(std::string(dir) + "/" + plan.file_stem + ".cl");
    f << "// " << plan.description << "\n" << plan.source;
  }
  // Build now: a compiler error surfaces at compile, and execute only looks up.
  device.programs().kernel(plan.source, plan.has_reduction ? "fused_rows" : "fused");
  return std::make_unique<FusedExecutable>(device, graph, std::move(plan));
}

}  // namespace hal::opencl
