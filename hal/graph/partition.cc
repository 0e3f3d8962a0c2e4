#include "graph/partition.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "graph/c_graph.hpp"
#include "loader/loaded_plugin.hpp"

namespace hal::detail {
namespace {

std::string node_label(const Graph& g, size_t n) {
  return "node " + std::to_string(n) + " ('" + g.nodes()[n].op + "')";
}

bool concrete(const Graph& g, uint32_t v) {
  return v == HAL_GRAPH_NO_VALUE || std::all_of(g.values()[v].shape.begin(), g.values()[v].shape.end(),
                                               [](int64_t d) { return d >= 0; });
}

// LEFT[i]: node i is reached from group GID by a path through a node
// outside it, counting only paths whose nodes are all in THROUGH (nodes are
// in topological order: one sweep). Returns whether a node of the group is
// so reached (the group is not convex).
bool reenters(const Graph& g, const std::vector<int64_t>& producer, const std::vector<uint32_t>& group,
              uint32_t gid, const std::vector<bool>& through, std::vector<bool>& left) {
  const size_t n = g.nodes().size();
  left.assign(n, false);
  bool reentered = false;
  for (size_t i = 0; i < n; ++i) {
    if (!through[i]) continue;
    for (uint32_t v : g.nodes()[i].inputs) {
      if (v == HAL_GRAPH_NO_VALUE || producer[v] < 0) continue;
      size_t from = static_cast<size_t>(producer[v]);
      if (through[from] && (left[from] || (group[from] == gid && group[i] != gid))) left[i] = true;
    }
    reentered = reentered || (left[i] && group[i] == gid);
  }
  return reentered;
}

// Splits group GID until every piece is convex in G: the group's nodes
// reached through a path that left it move to a new group (NEXT_ID),
// checked in turn. What stays is convex: a path leaving it and re-entering
// would have made the re-entered node move.
void make_convex(const Graph& g, const std::vector<int64_t>& producer, std::vector<uint32_t>& group, uint32_t gid,
                 uint32_t& next_id) {
  const std::vector<bool> all(g.nodes().size(), true);
  std::vector<bool> left;
  while (reenters(g, producer, group, gid, all, left)) {
    const uint32_t piece = next_id++;
    for (size_t i = 0; i < group.size(); ++i)
      if (group[i] == gid && left[i]) group[i] = piece;
    gid = piece;
  }
}

// The groups left unordered when the units (each group, each ungrouped
// node) are ordered by their data dependences: groups that are each convex
// can still depend on each other both ways when one is not connected
// (a1 -> b1 and b2 -> a2 with b1, b2 apart). Empty: every unit orders.
std::vector<uint32_t> unordered_groups(const Graph& g, const std::vector<int64_t>& producer,
                                       const std::vector<uint32_t>& group) {
  const size_t n = g.nodes().size();
  std::vector<size_t> unit_of(n);
  std::map<uint32_t, size_t> unit_of_group;
  size_t units = 0;
  for (size_t i = 0; i < n; ++i) {
    if (group[i] == 0) {
      unit_of[i] = units++;
      continue;
    }
    auto [it, fresh] = unit_of_group.emplace(group[i], units);
    if (fresh) ++units;
    unit_of[i] = it->second;
  }
  std::vector<std::set<size_t>> next(units);
  std::vector<size_t> pending(units, 0);
  for (size_t i = 0; i < n; ++i)
    for (uint32_t v : g.nodes()[i].inputs) {
      if (v == HAL_GRAPH_NO_VALUE || producer[v] < 0) continue;
      const size_t from = unit_of[static_cast<size_t>(producer[v])], to = unit_of[i];
      if (from != to && next[from].insert(to).second) ++pending[to];
    }
  std::vector<size_t> ready;
  for (size_t u = 0; u < units; ++u)
    if (pending[u] == 0) ready.push_back(u);
  while (!ready.empty()) {
    const size_t u = ready.back();
    ready.pop_back();
    for (size_t t : next[u])
      if (--pending[t] == 0) ready.push_back(t);
  }
  std::vector<uint32_t> stuck;
  for (const auto& [gid, u] : unit_of_group)
    if (pending[u] > 0) stuck.push_back(gid);
  return stuck;
}

}  // namespace

std::string launch_refusal(const std::shared_ptr<Device>& device, const Graph& g, size_t n) {
  const Graph::Node& node = g.nodes()[n];
  const LoadedPlugin& plugin = device->plugin();
  if (plugin.op.op_resolve == nullptr || plugin.op.op_launch == nullptr) return "no operator interface";
  if (plugin.op_disabled(node.op)) return "disabled by hal.toml";
  try {
    OpRunner runner(device, node.op);
    if (!std::all_of(node.inputs.begin(), node.inputs.end(), [&](uint32_t v) { return concrete(g, v); }) ||
        !std::all_of(node.outputs.begin(), node.outputs.end(), [&](uint32_t v) { return concrete(g, v); }))
      return "";  // checked at launch, with the shapes
    std::vector<TensorView> views;
    views.reserve(node.inputs.size() + node.outputs.size());
    std::vector<const TensorView*> in, out;
    for (size_t k = 0; k < node.inputs.size() + node.outputs.size(); ++k) {
      bool is_in = k < node.inputs.size();
      uint32_t v = is_in ? node.inputs[k] : node.outputs[k - node.inputs.size()];
      TensorView* view = nullptr;
      if (v != HAL_GRAPH_NO_VALUE) {
        views.emplace_back();
        views.back().dtype = g.values()[v].dtype;
        views.back().shape = g.values()[v].shape;
        view = &views.back();
      }
      (is_in ? in : out).push_back(view);
    }
    std::unique_ptr<Error> refused = runner.check(in, out, node.attrs);
    // A uniform kernel refusing mixed dtypes is fine: launch() casts first.
    if (refused && refused->code() != HAL_STATUS_MIXED_DTYPES) return refused->what();
    return "";
  } catch (const Error& e) {
    return e.code() == HAL_STATUS_UNIMPLEMENTED ? std::string("no kernel (") + e.what() + ")" : e.what();
  }
}

Placement partition(const Graph& g, const std::vector<std::shared_ptr<Device>>& devices, bool fallback,
                    bool subgraphs) {
  const size_t n = g.nodes().size();
  constexpr uint32_t kUnplaced = UINT32_MAX;
  Placement p;
  p.device.assign(n, kUnplaced);
  p.group.assign(n, 0);
  p.declined.assign(n, "");
  p.fallback.assign(n, false);
  std::vector<int64_t> producer(g.values().size(), -1);
  for (size_t i = 0; i < n; ++i)
    for (uint32_t v : g.nodes()[i].outputs) producer[v] = static_cast<int64_t>(i);
  uint32_t next_group = 1;
  auto decline = [&](size_t i, const Device& d, const std::string& why) {
    const bool is_fallback = fallback && &d == devices.back().get();
    p.declined[i] += (p.declined[i].empty() ? "" : "; ") + d.id() + (is_fallback ? " (fallback)" : "") + ": " + why;
  };

  const size_t claimers = fallback ? devices.size() - 1 : devices.size();
  for (size_t k = 0; k < devices.size(); ++k) {
    const std::shared_ptr<Device>& device = devices[k];
    const hal_graph_api_t& api = device->plugin().graph;
    // Subgraphs: the still-unclaimed nodes whose ops are not disabled here.
    std::vector<size_t> candidates;
    std::vector<bool> in_set(n, false);
    for (size_t i = 0; i < n; ++i)
      if (p.device[i] == kUnplaced && !device->plugin().op_disabled(g.nodes()[i].op)) {
        candidates.push_back(i);
        in_set[i] = true;
      }
    if (subgraphs && k < claimers && api.graph_partition != nullptr && !candidates.empty()) {
      auto [inputs, outputs] = boundary(g, candidates, in_set);
      CGraph c(g, candidates, inputs, outputs);
      std::vector<uint32_t> local(candidates.size(), 0);
      throw_if_error(api.graph_partition(device->handle(), c.get(), local.data()));  // names plugin and call
      std::map<uint32_t, uint32_t> global;  // the plugin's group id -> ours
      for (size_t j = 0; j < candidates.size(); ++j) {
        if (local[j] == 0) continue;
        auto [it, fresh] = global.emplace(local[j], next_group);
        if (fresh) ++next_group;
        p.device[candidates[j]] = static_cast<uint32_t>(k);
        p.group[candidates[j]] = it->second;
      }
      // A group not convex in what the plugin saw is the plugin's error; one
      // that is, but not across nodes it did not see, is split.
      std::vector<bool> left;
      std::string stuck;
      for (const auto& [theirs, ours] : global)
        if (reenters(g, producer, p.group, ours, in_set, left)) stuck += (stuck.empty() ? "" : ", ") + std::to_string(theirs);
      if (!stuck.empty())
        throw Error(HAL_STATUS_FAILED_PRECONDITION,
                    device->plugin_name() + ": graph_partition: the groups cannot be ordered (group(s) " + stuck +
                        " are not convex: a path leaves and re-enters them)");
      for (const auto& [theirs, ours] : global) make_convex(g, producer, p.group, ours, next_group);
    }
    // Single nodes through the operator interface.
    for (size_t i = 0; i < n; ++i) {
      if (p.device[i] != kUnplaced) continue;
      std::string why = launch_refusal(device, g, i);
      if (why.empty()) {
        p.device[i] = static_cast<uint32_t>(k);
        p.fallback[i] = fallback && k + 1 == devices.size();
      } else {
        decline(i, *device, why);
      }
    }
  }
  for (size_t i = 0; i < n; ++i)
    if (p.device[i] == kUnplaced)
      throw Error(HAL_STATUS_UNIMPLEMENTED, node_label(g, i) + ": no device runs op '" + g.nodes()[i].op +
                                                "': " + p.declined[i]);
  // Groups that depend on each other both ways: one at a time becomes
  // single-node groups (on the same device) until every unit orders.
  // (Units downstream of such a pair are unordered too: the group split is
  // the first unordered one of two or more nodes, one of which is in the cycle.)
  for (std::vector<uint32_t> stuck = unordered_groups(g, producer, p.group); !stuck.empty();
       stuck = unordered_groups(g, producer, p.group)) {
    std::map<uint32_t, size_t> size;
    for (size_t i = 0; i < n; ++i) ++size[p.group[i]];
    auto split = std::find_if(stuck.begin(), stuck.end(), [&](uint32_t gid) { return size[gid] > 1; });
    if (split == stuck.end()) break;  // unreachable: a cycle needs a group of two nodes
    bool first = true;
    for (size_t i = 0; i < n; ++i)
      if (p.group[i] == *split) {
        if (!first) p.group[i] = next_group++;
        first = false;
      }
  }
  return p;
}

std::string placement_error(const Graph& g, const Placement& p, size_t device_count, bool fallback) {
  const size_t n = g.nodes().size();
  std::map<uint32_t, uint32_t> device_of_group;
  for (size_t i = 0; i < n; ++i) {
    const bool on_fallback = fallback && p.device[i] + 1 == device_count;
    if (p.fallback[i] != on_fallback)
      return node_label(g, i) + ": fallback flag " + (p.fallback[i] ? "set" : "clear") + " on device " +
             std::to_string(p.device[i]) + (fallback ? "" : " (no fallback device)");
    if (p.group[i] == 0) continue;
    if (on_fallback) return node_label(g, i) + ": grouped on the fallback device";
    auto [it, fresh] = device_of_group.emplace(p.group[i], p.device[i]);
    if (!fresh && it->second != p.device[i])
      return "group " + std::to_string(p.group[i]) + " spans devices " + std::to_string(it->second) + " and " +
             std::to_string(p.device[i]);
  }
  std::vector<int64_t> producer(g.values().size(), -1);
  for (size_t i = 0; i < n; ++i)
    for (uint32_t v : g.nodes()[i].outputs) producer[v] = static_cast<int64_t>(i);
  std::string stuck;
  for (uint32_t gid : unordered_groups(g, producer, p.group)) stuck += (stuck.empty() ? "" : ", ") + std::to_string(gid);
  if (!stuck.empty()) return "the groups cannot be ordered (group(s) " + stuck + ")";
  return "";
}

}  // namespace hal::detail
