// OpenCL plugin, graph compiler: node analysis and the partition. See
// partition.hpp.
#include "partition.hpp"

#include <algorithm>
#include <cstring>
#include <set>

#include "../cl_device.hpp"

namespace hal::opencl {
namespace fusion {
namespace {

using sdk::Graph;
using sdk::GraphNode;
using sdk::kNoValue;

bool supported(const ClDevice& device, hal_dtype_e t) {
  switch (t) {
    case HAL_DTYPE_FLOAT32: case HAL_DTYPE_INT8: case HAL_DTYPE_UINT8: case HAL_DTYPE_INT16:
    case HAL_DTYPE_INT32: case HAL_DTYPE_INT64: case HAL_DTYPE_BOOL:
      return true;
    case HAL_DTYPE_FLOAT64: return device.has_fp64();
    default: return false;
  }
}

const sdk::AttrValue* attr(const GraphNode& n, const char* name) {
  for (size_t i = 0; i < n.schema->attr_count && i < n.attrs.size(); ++i)
    if (std::strcmp(n.schema->attrs[i].name, name) == 0) return &n.attrs[i];
  return nullptr;
}

}  // namespace

NodeInfo analyse(const ClDevice& device, const Graph& g, const GraphNode& n) {
  NodeInfo info;
  auto none = [&](std::string why) {
    info.role = NodeInfo::kNone;
    info.why = std::move(why);
    return info;
  };
  const std::string op = n.op();
  if (op == "softmax" || op == "log_softmax" || op == "layer_norm" || op == "rms_norm") {
    if (n.inputs.empty() || n.inputs[0] == kNoValue || n.outputs.empty()) return none("no input");
    const sdk::GraphValue& in = g.values[n.inputs[0]];
    if (!sdk::is_floating(in.dtype) || !supported(device, in.dtype))
      return none(std::string("dtype ") + sdk::dtype_name(in.dtype));
    const int rank = in.rank();
    if (rank == 0) return none("a 0-d input");
    if (g.values[n.outputs[0]].dtype != in.dtype || g.values[n.outputs[0]].shape != in.shape)
      return none("output is not the input's dtype and shape");
    info.in = info.out = in.dtype;
    if (op == "softmax" || op == "log_softmax") {
      info.row = op == "softmax" ? RowOp::kSoftmax : RowOp::kLogSoftmax;
      const sdk::AttrValue* dim = attr(n, "dim");
      if (!dim) return none("no dim");
      int64_t d = dim->as_int() < 0 ? dim->as_int() + rank : dim->as_int();
      if (d < 0 || d >= rank) return none("bad dim");
      info.mask = 1u << d;
    } else {
      info.row = op == "layer_norm" ? RowOp::kLayerNorm : RowOp::kRmsNorm;
      const sdk::AttrValue* ns = attr(n, "normalized_shape");
      const sdk::AttrValue* eps = attr(n, "eps");
      if (!ns || !eps) return none("no normalized_shape/eps");
      const std::vector<int64_t>& dims = ns->as_ints();
      if (dims.empty() || static_cast<int>(dims.size()) > rank) return none("normalized_shape is not trailing dims");
      std::vector<int64_t> stat_shape = in.shape;
      for (size_t j = 0; j < dims.size(); ++j) {
        int d = rank - static_cast<int>(dims.size()) + static_cast<int>(j);
        if (in.shape[d] != dims[j]) return none("normalized_shape is not the input's trailing dims");
        info.mask |= 1u << d;
        stat_shape[d] = 1;
      }
      // weight (and bias) of shape normalized_shape; mean/rstd with the
      // normalised dims set to 1.
      for (size_t j = 1; j < n.inputs.size(); ++j)
        if (n.inputs[j] != kNoValue &&
            (g.values[n.inputs[j]].dtype != in.dtype || g.values[n.inputs[j]].shape != dims))
          return none("weight or bias is not normalized_shape in the input's dtype");
      for (size_t j = 1; j < n.outputs.size(); ++j)
        if (n.outputs[j] != kNoValue &&
            (g.values[n.outputs[j]].dtype != in.dtype || g.values[n.outputs[j]].shape != stat_shape))
          return none("a statistics output is not the input's shape with normalised dims 1");
      info.eps = eps->as_float();
      if (info.eps < 0)  // rms_norm's default: the dtype's machine epsilon (torch's eps=None)
        info.eps = in.dtype == HAL_DTYPE_FLOAT64 ? 2.220446049250313e-16 : 1.1920928955078125e-07;
    }
    info.role = NodeInfo::kRow;
    return info;
  }
  if (n.outputs.size() != 1) return none("not a single-output op");
  const sdk::GraphValue& out = g.values[n.outputs[0]];
  if (!supported(device, out.dtype)) return none(std::string("dtype ") + sdk::dtype_name(out.dtype));
  for (uint32_t v : n.inputs)
    if (v != kNoValue && !supported(device, g.values[v].dtype))
      return none(std::string("dtype ") + sdk::dtype_name(g.values[v].dtype));

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

namespace {

// ---- partition --------------------------------------------------------------------

struct GroupState {
  std::vector<int64_t> shape;
  bool closed = false;  // has its reduction
  bool row = false;     // has its row op
  std::set<uint32_t> external;  // values read from outside
  size_t nodes = 0;
};

}  // namespace
}  // namespace fusion

std::vector<uint32_t> partition_fused(const ClDevice& device, const sdk::Graph& g) {
  using namespace fusion;
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
        if (s2.closed || s2.shape != shape || (s.row && s2.row)) continue;
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
        s.row = s.row || s2.row;
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
      if (k != 0 && !groups[k].closed && !groups[k].row) {
        group[i] = k;
        groups[k].closed = true;
      }
    } else if (info.role == NodeInfo::kRow) {
      // Joins the group computing its input (the prologue), or starts one an
      // epilogue may join; its weight and bias come from outside the group.
      const std::vector<int64_t>& shape = g.values[node.inputs[0]].shape;
      const size_t outs = node.outputs.size();
      uint32_t k = group_of(node.inputs[0]);
      bool joined = false;
      if (k != 0) {
        GroupState& s = groups[k];
        bool ok = !s.closed && !s.row && s.shape == shape && convex(k);
        std::set<uint32_t> ext = s.external;
        for (size_t j = 1; j < node.inputs.size() && ok; ++j)
          if (node.inputs[j] != kNoValue) {
            ok = group_of(node.inputs[j]) != k;
            ext.insert(node.inputs[j]);
          }
        if (ok && ext.size() + s.nodes + outs <= kMaxFusedOperands) {
          group[i] = k;
          s.external = std::move(ext);
          s.nodes += 1;
          s.row = true;
          joined = true;
        }
      }
      if (!joined) {
        GroupState s;
        s.shape = shape;
        for (uint32_t w : node.inputs)
          if (w != kNoValue) s.external.insert(w);
        s.nodes = 1;
        s.row = true;
        if (s.external.size() + outs <= kMaxFusedOperands) {
          group[i] = next++;
          groups[group[i]] = std::move(s);
        }
      }
    }
    if (group[i] != 0) upstream[i].insert(group[i]);
    for (uint32_t v : node.outputs) producer[v] = static_cast<int64_t>(i);
  }
  // A row op nothing joined is its own op-by-op kernel: leave it unclaimed.
  for (size_t i = 0; i < n; ++i)
    if (group[i] != 0 && groups[group[i]].nodes == 1 && groups[group[i]].row) group[i] = 0;
  return group;
}

}  // namespace hal::opencl
