// HAL shared layer: the one reader of extension chains (hal/extension.h),
// used by the core (a plugin's hal_plugin_api_t.next) and by the SDK (the
// host's structs and every call's args `next`). Header-only; no allocation
// unless a chain is malformed; thread-safe (reads only).
//
// A chain is malformed when an element's struct_size is smaller than
// hal_extension_base_t, an element's type is HAL_EXTENSION_TYPE_INVALID, or
// it has a cycle. Cycles are found with Brent's algorithm: the walk takes at
// most about three times the number of distinct elements, so it ends on
// every input (a dangling pointer still crashes: readers trust the memory).
// Unknown types are never an error.
#ifndef HAL_COMMON_EXTENSION_HPP_
#define HAL_COMMON_EXTENSION_HPP_

#include <cstddef>
#include <optional>
#include <sstream>
#include <string>

#include "hal/common/error.hpp"
#include "hal/extension.h"

namespace hal::common {

namespace extension_detail {

inline const hal_extension_base_t* advance(const hal_extension_base_t* e, size_t n) {
  while (n-- > 0) e = e->next;
  return e;
}

// The message for a cycle of length CYCLE found in the chain at FIRST: with
// mu the position of the cycle's first element, element mu + CYCLE - 1 links
// back to it. Every position named is that of a distinct element (walking
// only the already-checked elements again).
inline std::string cycle_error(const hal_extension_base_t* first, size_t cycle, const char* owner) {
  const hal_extension_base_t* start = first;
  const hal_extension_base_t* ahead = advance(first, cycle);
  size_t mu = 0;
  for (; start != ahead; ++mu) {
    start = start->next;
    ahead = ahead->next;
  }
  std::ostringstream os;
  os << owner << ": extension chain element " << mu + cycle - 1 << " (at "
     << static_cast<const void*>(advance(start, cycle - 1)) << ") links back to element " << mu
     << ": the chain has a cycle";
  return os.str();
}

// Walks the chain from FIRST, checking each element before reading past its
// base, and calls VISIT(element) for each well-formed one in order until it
// returns true. Returns why the chain is malformed (naming OWNER, e.g.
// "hal_op_args_t.next"), or nullopt. Elements before a malformed one may have
// been visited (those of a cycle possibly more than once).
template <class Visit>
std::optional<std::string> walk(const void* first, const char* owner, Visit&& visit) {
  const auto* element = static_cast<const hal_extension_base_t*>(first);
  const hal_extension_base_t* tortoise = element;
  size_t power = 1, steps = 1;
  for (size_t position = 0; element != nullptr; ++position) {
    auto problem = [&] {
      std::ostringstream os;
      os << owner << ": extension chain element " << position << " (at " << static_cast<const void*>(element)
         << ") ";
      return os;
    };
    if (element->struct_size < sizeof(hal_extension_base_t))
      return (problem() << "has struct_size " << element->struct_size << ", smaller than hal_extension_base_t ("
                        << sizeof(hal_extension_base_t) << ")")
          .str();
    if (element->type == HAL_EXTENSION_TYPE_INVALID)
      return (problem() << "has type 0 (HAL_EXTENSION_TYPE_INVALID); was its type never set?").str();
    if (visit(*element)) return std::nullopt;
    const hal_extension_base_t* next = element->next;
    // Brent: park the tortoise at every power-of-two step; a cycle brings the
    // walk back to it within one more power of two, STEPS then being the
    // cycle's length.
    if (next != nullptr && next == tortoise)
      return cycle_error(static_cast<const hal_extension_base_t*>(first), steps, owner);
    if (steps == power) {
      tortoise = next;
      power *= 2;
      steps = 0;
    }
    ++steps;
    element = next;
  }
  return std::nullopt;
}

}  // namespace extension_detail

// Why the chain starting at FIRST (a `next` field: NULL, or a
// hal_extension_base_t) is malformed, or nullopt when it is well-formed.
// OWNER names the field in the message ("hal_op_args_t.next"); callers
// report the message as INVALID_ARGUMENT. FIRST's elements are read only.
inline std::optional<std::string> extension_chain_error(const void* first, const char* owner) {
  return extension_detail::walk(first, owner, [](const hal_extension_base_t&) { return false; });
}

// Throws Error(INVALID_ARGUMENT, extension_chain_error's message) when the
// chain at FIRST is malformed: what every entry point that takes a `next`
// does (the core's loader instead records the message as a skip reason).
inline void require_well_formed_extension_chain(const void* first, const char* owner) {
  if (std::optional<std::string> e = extension_chain_error(first, owner)) fail(HAL_STATUS_INVALID_ARGUMENT, *e);
}

// The first element of TYPE in the chain at FIRST, or nullptr when there is
// none or the chain is malformed before one is reached (check the chain with
// extension_chain_error first to tell the two apart). The caller still checks
// the element's struct_size before reading fields of its own struct.
inline const hal_extension_base_t* find_extension(const void* first, uint32_t type) {
  const hal_extension_base_t* found = nullptr;
  extension_detail::walk(first, "", [&](const hal_extension_base_t& e) {
    if (e.type == type) found = &e;
    return found != nullptr;
  });
  return found;
}

}  // namespace hal::common

#endif  // HAL_COMMON_EXTENSION_HPP_
