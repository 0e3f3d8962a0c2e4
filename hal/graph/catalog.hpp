// libhal internal: the op catalog lookup the graph code shares.
#ifndef HAL_GRAPH_CATALOG_HPP_
#define HAL_GRAPH_CATALOG_HPP_

#include <string>

#include "hal/common/op_schema.hpp"

namespace hal::graph_detail {

// The catalog schema named NAME, or nullptr. Thread-safe; static storage.
const common::OpSchema* find_op(const std::string& name);

// "op 'foo' is not in the op catalog (version 1.4)".
std::string not_in_catalog(const std::string& name);

}  // namespace hal::graph_detail

#endif  // HAL_GRAPH_CATALOG_HPP_
