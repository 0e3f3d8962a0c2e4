// hal-conformance: the "linalg" ops — cases and double-precision references.
#include "op_suite.hpp"

namespace hal::conformance {
namespace {}  // namespace
}  // namespace hal::conformance
