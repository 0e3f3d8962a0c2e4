// libhal internal: the op catalog for the graph code (lookup by name:
// common::catalog::find_schema) and its message for an op not in it.
#ifndef HAL_GRAPH_CATALOG_HPP_
#define HAL_GRAPH_CATALOG_HPP_

#include <string>

#include "hal/common/op_catalog.hpp"

namespace hal::graph_detail {

// "op 'foo' is not in the op catalog (version 1.4)".
std::string not_in_catalog(const std::string& name);

}  // namespace hal::graph_detail

#endif  // HAL_GRAPH_CATALOG_HPP_
