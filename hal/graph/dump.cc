// Graph::dump: the text form (one line per symbol, input, constant, node and
// output).
#include <cstdio>

#include "runtime/sha256.hpp"
#include "hal/runtime/graph.hpp"

namespace hal {
namespace {

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", v);  // round-trips; same text on every host
  return buf;
}

template <class T, class F>
std::string list(const T* data, size_t count, F format) {
  std::string out = "[";
  for (size_t i = 0; i < count; ++i) out += (i ? ", " : "") + format(data[i]);
  return out + "]";
}

std::string attr_text(const Attr& attr) {
  hal_attr_t a = attr.c_attr();
  std::string v;
  switch (a.type) {
    case HAL_ATTR_TYPE_INT: v = std::to_string(a.value.i); break;
    case HAL_ATTR_TYPE_FLOAT: v = number(a.value.f); break;
    case HAL_ATTR_TYPE_BOOL: v = a.value.i ? "true" : "false"; break;
    case HAL_ATTR_TYPE_STRING: v = "'" + std::string(a.value.s) + "'"; break;
    case HAL_ATTR_TYPE_INTS: v = list(a.value.ints, a.count, [](int64_t x) { return std::to_string(x); }); break;
    case HAL_ATTR_TYPE_FLOATS: v = list(a.value.floats, a.count, number); break;
    case HAL_ATTR_TYPE_DTYPE: v = common::dtype_name(static_cast<uint32_t>(a.value.i)); break;
    default: v = "<type " + std::to_string(a.type) + ">"; break;
  }
  return attr.name() + "=" + v;
}

}  // namespace

std::string Graph::dump() const {
  auto ref = [](uint32_t id) { return id == HAL_GRAPH_NO_VALUE ? std::string("_") : "%" + std::to_string(id); };
  // "%3 'h': float32[batch, 4]"
  auto def = [&](uint32_t id) {
    return ref(id) + (names_[id].empty() ? "" : " '" + names_[id] + "'") + ": " +
           common::dtype_name(values_[id].dtype) + shape_string(values_[id].shape);
  };
  std::string out = "graph: " + std::to_string(inputs_.size()) + " inputs, " + std::to_string(constants_.size()) +
                    " constants, " + std::to_string(nodes_.size()) + " nodes, " + std::to_string(outputs_.size()) +
                    " outputs\n";
  for (const auto& [sym, name] : symbols_) out += "symbol " + std::to_string(sym) + " '" + name + "'\n";
  for (uint32_t id : inputs_) out += "input " + def(id) + "\n";
  for (uint32_t id : constants_) {
    const std::vector<uint8_t>& bytes = *constant_[id];
    auto digest = detail::sha256(bytes.data(), bytes.size());
    out += "constant " + def(id) + " sha256:" + detail::hex(digest.data(), 6) + "\n";
  }
  for (const Node& n : nodes_) {
    std::string line;
    for (size_t o = 0; o < n.outputs.size(); ++o) line += (o ? ", " : "") + def(n.outputs[o]);
    line += " = " + n.op + "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) line += (i ? ", " : "") + ref(n.inputs[i]);
    line += ")";
    if (!n.attrs.empty()) {
      line += " {";
      for (size_t k = 0; k < n.attrs.size(); ++k) line += (k ? ", " : "") + attr_text(n.attrs[k]);
      line += "}";
    }
    out += line + "\n";
  }
  for (uint32_t id : outputs_) out += "output " + ref(id) + (names_[id].empty() ? "" : " '" + names_[id] + "'") + "\n";
  return out;
}

}  // namespace hal
