#include "graph/layout.hpp"

#include <map>

namespace hal::detail {

LayoutPlan plan_layouts(const Graph& g, const std::vector<size_t>& nodes,
                        const std::vector<std::vector<int64_t>>& shapes, const std::vector<bool>& choosable,
                        const AskLayouts& ask) {
  LayoutPlan plan;
  plan.order.assign(g.values().size(), {});
  std::vector<bool> open(g.values().size(), false);            // the producer left it to us (rule 3 may apply)
  std::map<uint32_t, std::vector<common::DimOrder>> wanted;   // value -> its consumers' preferences
  auto usable = [&](uint32_t v) { return choosable[v] && shapes[v].size() >= 2; };
  for (size_t n : nodes) {
    const Graph::Node& node = g.nodes()[n];
    std::vector<std::vector<int64_t>> strides;
    for (uint32_t v : node.inputs)
      strides.push_back(v == HAL_GRAPH_NO_VALUE || plan.order[v].empty() ? std::vector<int64_t>{}
                                                                        : common::dense_strides(shapes[v], plan.order[v]));
    std::optional<OpLayouts> said = ask(n, strides);
    if (!said) continue;
    for (size_t i = 0; i < node.inputs.size() && i < said->inputs.size(); ++i)
      if (node.inputs[i] != HAL_GRAPH_NO_VALUE && !said->inputs[i].empty())
        wanted[node.inputs[i]].push_back(said->inputs[i]);
    for (size_t j = 0; j < node.outputs.size(); ++j) {
      const uint32_t v = node.outputs[j];
      if (!usable(v)) continue;
      if (j < said->outputs.size() && !said->outputs[j].empty()) {
        if (!common::is_row_major_order(said->outputs[j])) plan.order[v] = said->outputs[j];
        continue;
      }
      for (uint32_t u : node.inputs)
        if (u != HAL_GRAPH_NO_VALUE && !plan.order[u].empty() && shapes[u] == shapes[v]) {
          plan.order[v] = plan.order[u];
          break;
        }
      open[v] = plan.order[v].empty();
    }
  }
  for (const auto& [v, orders] : wanted) {
    if (!open[v]) continue;
    bool agree = true;
    for (const common::DimOrder& o : orders) agree = agree && o == orders.front();
    if (agree && !common::is_row_major_order(orders.front())) plan.order[v] = orders.front();
  }
  for (const common::DimOrder& o : plan.order) plan.relaid += o.empty() ? 0 : 1;
  return plan;
}

}  // namespace hal::detail
