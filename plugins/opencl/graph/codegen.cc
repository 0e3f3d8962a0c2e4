// OpenCL plugin, graph compiler: code generation. See codegen.hpp.
#include "codegen.hpp"

#include <cstdio>
#include <functional>
#include <regex>
#include <set>
#include <sstream>

#include "../cl_device.hpp"
#include "../ops/nn_common.hpp"

namespace hal::opencl::fusion {
namespace {

using sdk::Graph;
using sdk::GraphNode;
using sdk::kNoValue;

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

// The KSZ/RSZ/KST/RST macros: a fused kernel's view of GeoLayout.
std::string geo_macros() {
  using L = GeoLayout;
  std::ostringstream s;
  s << "#define KSZ(d) geo[" << L::kKeptSizes << " + (d)]\n#define RSZ(d) geo[" << L::kReducedSizes << " + (d)]\n"
    << "#define KST(k, d) geo[" << L::kKeptStrides << " + (k) * " << L::kOperandWords << " + (d)]\n"
    << "#define RST(k, d) geo[" << L::kReducedStrides << " + (k) * " << L::kOperandWords << " + (d)]\n";
  return s.str();
}

// OpenCL C of a loop over reduced positions [R0, R1) (variables) from base
// offsets b<k> of OPERANDS operands, running BODY with offsets o<k>.
std::string red_loop(size_t operands, const std::string& body) {
  std::ostringstream s;
  s << "  {\n    int rr = (int)geo[" << GeoLayout::kReducedRank << "];\n    long inner = rr > 0 ? RSZ(rr - 1) : 1;\n";
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
  s << "  {\n    int rr = (int)geo[" << GeoLayout::kReducedRank << "];\n    long inner = rr > 0 ? RSZ(rr - 1) : 1;\n"
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
  s << "  {\n    long rest = o;\n    for (int d = (int)geo[" << GeoLayout::kKeptRank << "] - 1; d >= 0; --d) {\n"
    << "      long c = rest % KSZ(d); rest /= KSZ(d);\n";
  for (size_t k = 0; k < operands; ++k) s << "      b" << k << " += c * KST(" << k << ", d);\n";
  if (reduction) s << "      rb += c * KST(" << operands << ", d);\n";
  s << "    }\n  }\n";
  return s.str();
}

// OpenCL C of a work-group's loop over its row (positions l, l + WG, ...
// of the reduced dims) from base offsets b<k> of the first OPERANDS
// operands, running BODY with offsets o<k>.
std::string row_loop(size_t operands, const std::string& body) {
  std::ostringstream s;
  s << "  for (long r = l; r < red; r += WG) {\n    long rest = r;\n";
  for (size_t k = 0; k < operands; ++k) s << "    long o" << k << " = b" << k << ";\n";
  s << "    for (int d = rr - 1; d >= 0; --d) {\n      long c = rest % RSZ(d); rest /= RSZ(d);\n";
  for (size_t k = 0; k < operands; ++k) s << "      o" << k << " += c * RST(" << k << ", d);\n";
  s << "    }\n" << body << "  }\n";
  return s.str();
}

// The row kernel of a group with a row op (node ROW of G): a work-group per
// row; PRE (the inputs' loads and the prologue) runs in every pass, TAIL
// (the epilogue and the stores) in the last. EPS: the name of the eps
// argument (layer_norm, rms_norm).
std::string row_kernel(const Graph& g, const Plan& plan, size_t row, size_t per_element, size_t operands,
                       const std::string& params, const std::string& pre, const std::string& tail,
                       const std::string& eps) {
  const GraphNode& n = g.nodes[row];
  const std::string T = cl_type(plan.row.in);
  const std::string x = "(A)v" + std::to_string(n.inputs[0]);
  auto optional_input = [&](size_t j, const char* absent) {
    return j < n.inputs.size() && n.inputs[j] != kNoValue ? "(A)v" + std::to_string(n.inputs[j]) : std::string(absent);
  };
  const std::string out = "        " + T + " v" + std::to_string(n.outputs[0]) + " = (" + T + ")(";
  std::ostringstream s;
  s << nn::row_prelude(plan.row.in) << "__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void fused_row("
    << params << ") {\n  __local A lred[WG];\n  long o = get_group_id(0);\n  int l = (int)get_local_id(0);\n"
    << "  int rr = (int)geo[" << GeoLayout::kReducedRank << "];\n" << kept_offsets(operands, false);
  // Statistic outputs: the row's value in every pass after they are known.
  std::string stats;
  auto stat = [&](size_t j, const char* value) {
    if (j < n.outputs.size() && n.outputs[j] != kNoValue)
      stats += "  " + T + " v" + std::to_string(n.outputs[j]) + " = (" + T + ")(" + value + ");\n";
  };
  switch (plan.row.row) {
    case RowOp::kSoftmax:
    case RowOp::kLogSoftmax:
      s << "  A mx_ = -INFINITY;\n" << row_loop(per_element, pre + "        { A x_ = " + x + "; mx_ = x_ > mx_ ? x_ : mx_; }\n")
        << "  mx_ = wg_max(mx_, lred);\n  A se_ = 0;\n" << row_loop(per_element, pre + "        se_ += exp(" + x + " - mx_);\n")
        << "  se_ = wg_sum(se_, lred);\n";
      if (plan.row.row == RowOp::kSoftmax)
        s << "  A inv_ = (A)1 / se_;\n" << row_loop(per_element, pre + out + "exp(" + x + " - mx_) * inv_);\n" + tail);
      else
        // (x - max) - log Σ, as PyTorch (x - (max + log Σ) rounds at max's magnitude first).
        s << "  A ls_ = log(se_);\n" << row_loop(per_element, pre + out + "(" + x + " - mx_) - ls_);\n" + tail);
      break;
    case RowOp::kLayerNorm:
      s << "  A mu_ = 0;\n" << row_loop(per_element, pre + "        mu_ += " + x + ";\n")
        << "  mu_ = wg_sum(mu_, lred);\n  mu_ = red == 0 ? (A)0 : mu_ / (A)red;\n  A sq_ = 0;\n"
        << row_loop(per_element, pre + "        { A t_ = " + x + " - mu_; sq_ += t_ * t_; }\n")
        << "  sq_ = wg_sum(sq_, lred);\n  A rs_ = (A)1 / sqrt((red == 0 ? (A)0 : sq_ / (A)red) + (A)" << eps << ");\n";
      stat(1, "mu_");
      stat(2, "rs_");
      s << stats
        << row_loop(per_element, pre + out + "(" + x + " - mu_) * rs_ * " + optional_input(1, "(A)1") + " + " +
                                     optional_input(2, "(A)0") + ");\n" + tail);
      break;
    case RowOp::kRmsNorm:
      s << "  A sq_ = 0;\n" << row_loop(per_element, pre + "        { A t_ = " + x + "; sq_ += t_ * t_; }\n")
        << "  sq_ = wg_sum(sq_, lred);\n  A rs_ = (A)1 / sqrt((red == 0 ? (A)0 : sq_ / (A)red) + (A)" << eps << ");\n";
      stat(1, "rs_");
      s << stats << row_loop(per_element, pre + out + x + " * rs_ * " + optional_input(1, "(A)1") + ");\n" + tail);
      break;
  }
  // One element per row of each statistic output.
  for (size_t j = 0; j < plan.stat_outputs.size(); ++j) {
    size_t k = per_element + j;
    s << "  if (l == 0) p" << k << "[b" << k << "] = v" << g.outputs[plan.stat_outputs[j]] << ";\n";
  }
  s << "}\n";
  return s.str();
}

}  // namespace

Plan plan_group(ClDevice& device, const Graph& g) {
  Plan plan;
  size_t row_node = g.nodes.size();
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
    if (info.role == NodeInfo::kElementwise || info.role == NodeInfo::kRow) {
      const auto& shape = g.values[info.role == NodeInfo::kRow ? n.inputs[0] : n.outputs[0]].shape;
      if (i == 0) plan.shape = shape;
      if (shape != plan.shape) refuse("its shape differs from the group's");
    }
    if (info.role == NodeInfo::kRow) {
      if (plan.has_row) refuse("a second row op in the group");
      for (size_t j = 1; j < n.inputs.size(); ++j)
        if (n.inputs[j] != kNoValue && producer[n.inputs[j]] >= 0) refuse("its weight is computed in the group");
      plan.has_row = true;
      plan.row = info;
      row_node = i;
    } else if (info.role == NodeInfo::kReduction) {
      uint32_t v = n.inputs[0];
      if (producer[v] < 0) refuse("its input is not computed in the group");
      if (plan.has_row) refuse("a reduction in a group with a row op");
      plan.has_reduction = true;
      plan.red = info;
    }
    for (uint32_t v : n.outputs) producer[v] = static_cast<int64_t>(i);
  }
  if (g.nodes.empty() || infos[0].role == NodeInfo::kReduction)
    sdk::fail(HAL_STATUS_UNIMPLEMENTED, "the OpenCL graph compiler needs an elementwise or row node first");

  // Operands.
  std::vector<bool> is_input(g.values.size(), false);
  for (uint32_t v : g.inputs) is_input[v] = true;
  for (size_t j = 0; j < g.outputs.size(); ++j) {
    uint32_t v = g.outputs[j];
    if (plan.has_reduction && producer[v] == static_cast<int64_t>(g.nodes.size() - 1)) {
      plan.reduction_written = true;
      plan.reduction_output = j;
    } else if (plan.has_row && producer[v] == static_cast<int64_t>(row_node) && v != g.nodes[row_node].outputs[0]) {
      plan.stat_outputs.push_back(j);
    } else {
      plan.ew_outputs.push_back(j);
    }
  }
  const size_t n_out = plan.ew_outputs.size();
  const size_t operands = n_out + g.inputs.size() + plan.stat_outputs.size();
  if (operands > kMaxFusedOperands)
    sdk::fail(HAL_STATUS_UNIMPLEMENTED, "the group has ", operands, " operands; the OpenCL graph compiler fuses at most ",
              kMaxFusedOperands);

  std::vector<hal_dtype_e> dtypes;
  for (const auto& v : g.values) dtypes.push_back(v.dtype);
  std::ostringstream src, helpers, funcs, body, pre, post, stores;
  std::set<std::string> emitted_helpers;
  src << cl_prelude(dtypes) << "#pragma OPENCL FP_CONTRACT OFF\n"
      << geo_macros();

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
    (i < row_node ? pre : post) << "        " << cl_type(out) << " v" << n.outputs[0] << " = f" << i << "("
                                 << call_args << ");\n";
    Plan::Check check{n.op(), std::string(n.schema->shape_rule) != "same" &&
                                  std::string(n.schema->shape_rule) != "same_all", {}};
    for (uint32_t v : n.inputs)
      if (v != kNoValue) check.inputs.push_back(v);
    plan.checks.push_back(std::move(check));
  }
  std::string eps;
  if (plan.has_row && (plan.row.row == RowOp::kLayerNorm || plan.row.row == RowOp::kRmsNorm)) {
    eps = "s" + std::to_string(plan.scalars.size());
    plan.scalars.emplace_back(plan.row.in, sdk::Scalar::from_float(plan.row.eps));
  }
  for (size_t j = 0; j < n_out; ++j)
    stores << "        p" << j << "[o" << j << "] = v" << g.outputs[plan.ew_outputs[j]] << ";\n";
  // Without a row op every node is in PRE.
  const std::string ew_body = body.str() + pre.str() + post.str() + stores.str();

  // Parameters.
  std::ostringstream params;
  for (size_t j = 0; j < n_out; ++j)
    params << "__global " << cl_type(g.values[g.outputs[plan.ew_outputs[j]]].dtype) << "* p" << j << ", long off"
           << j << ", ";
  for (size_t i = 0; i < g.inputs.size(); ++i)
    params << "__global const " << cl_type(g.values[g.inputs[i]].dtype) << "* p" << n_out + i << ", long off"
           << n_out + i << ", ";
  for (size_t j = 0; j < plan.stat_outputs.size(); ++j) {
    size_t k = n_out + g.inputs.size() + j;
    params << "__global " << cl_type(g.values[g.outputs[plan.stat_outputs[j]]].dtype) << "* p" << k << ", long off"
           << k << ", ";
  }
  params << "__global const long* geo, long outs, long red, long chunk, long seg";
  for (size_t j = 0; j < plan.scalars.size(); ++j) params << ", " << cl_type(plan.scalars[j].first) << " s" << j;

  src << helpers.str() << funcs.str();
  const char* attrs = "__attribute__((reqd_work_group_size(64, 1, 1)))";
  if (!plan.has_reduction && !plan.has_row) {
    src << "__kernel " << attrs << " void fused(" << params.str() << ") {\n"
        << "  int l = (int)get_local_id(0);\n  long t0 = get_group_id(0) * chunk, t1 = t0 + chunk;\n"
        << "  long o = 0;\n" << kept_offsets(operands, false) << tile_loop(operands, ew_body) << "}\n";
  } else if (plan.has_row) {
    src << row_kernel(g, plan, row_node, n_out + g.inputs.size(), operands, params.str(), body.str() + pre.str(),
                      post.str() + stores.str(), eps);
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
    std::string full_body = ew_body + step;
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
  std::string chain;  // elementwise ops by commas, a row op between arrows
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (infos[i].role == NodeInfo::kRow)
      chain += (i == 0 ? "" : " -> ") + std::string(g.nodes[i].op()) + (i + 1 < g.nodes.size() ? " -> " : "");
    else if (infos[i].role == NodeInfo::kElementwise)
      chain += (chain.empty() || i == row_node + 1 ? "" : ", ") + std::string(g.nodes[i].op());
  plan.description += chain;
  if (plan.has_reduction) plan.description += std::string(" -> ") + g.nodes.back().op();
  plan.description += " (1 kernel)";
  if (stem.size() > 80) stem = stem.substr(0, 80);
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%016zx", std::hash<std::string>{}(plan.source));
  plan.file_stem = "fused" + stem + "_" + std::string(hash).substr(0, 12);
  return plan;
}

}  // namespace hal::opencl::fusion
