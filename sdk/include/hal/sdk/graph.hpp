// HAL C++ SDK: the graph-compile interface on the plugin side.
//
// A device that compiles graphs overrides two virtuals of hal::sdk::Device
// and adds HAL_CAPABILITY_GRAPH to its plugin's kInterfaces:
//
//   std::vector<uint32_t> partition_graph(const Graph& graph) override;   // group per node, 0 = not mine
//   std::unique_ptr<Executable> compile_graph(const Graph& graph) override;
//
// and implements an Executable:
//
//   class MyExecutable : public hal::sdk::Executable {
//     void execute(const std::vector<Tensor>& in, const std::vector<Tensor>& out, Stream* stream) override;
//     uint32_t kernel_count() const override;   // kernels one execute launches
//     std::string description() const override;
//     std::vector<uint8_t> serialize() const override;   // optional (ABI 1.5)
//   };
//
// and, for executables that serialise, Device::deserialize_graph(graph, bytes)
// (the on-disk compile cache: a later process runs without compiling).
//
// The SDK validates the C graph before the device sees it (value ids in
// range, ops in the catalog, input/output counts, attributes with defaults
// applied, dtypes the catalog allows, ranks, topological order, each value
// produced once; a node whose values are all concrete is checked against
// the catalog's dtype and shape rules as a launch would be) and hands over
// an owned hal::sdk::Graph. At execute it validates the tensors against the
// graph's input/output values (dtype, rank, concrete dims, symbolic dims
// bound consistently, buffers of this device holding the tensors, outputs
// overlapping nothing) and hands over the same Tensor objects kernels get
// in an OpCall. Header-only; no type here crosses the C ABI.
#ifndef HAL_SDK_GRAPH_HPP_
#define HAL_SDK_GRAPH_HPP_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hal/hal.h"
#include "hal/sdk/op_schema.hpp"

namespace hal::sdk {

class Stream;

// A value id that names no value (an absent optional input).
inline constexpr uint32_t kNoValue = HAL_GRAPH_NO_VALUE;

// One value of a graph: a dim < 0 is a symbol (equal numbers, equal sizes).
struct GraphValue {
  hal_dtype_e dtype = HAL_DTYPE_INVALID;
  std::vector<int64_t> shape;

  int rank() const { return static_cast<int>(shape.size()); }
  bool is_concrete() const {
    for (int64_t d : shape)
      if (d < 0) return false;
    return true;
  }
};

// One node: a catalog op applied to values.
struct GraphNode {
  const OpSchema* schema = nullptr;  // the catalog entry; never nullptr
  // Value ids in catalog order; kNoValue for an absent optional input (the
  // list is padded to the schema's input count unless the op is variadic).
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  // Every attribute of the op in catalog order, defaults applied (as in
  // OpCall::attr); AttrValue::given says whether the graph set it.
  std::vector<AttrValue> attrs;

  const char* op() const { return schema->name; }
};

// The bytes of a constant input (ABI 1.7, hal_graph_constants_t):
// row-major, contiguous, SIZE = element count x dtype size. DATA is the
// host's memory, valid only during partition_graph, compile_graph and
// deserialize_graph (the SDK empties Graph::constants afterwards): copy or
// pre-pack what an executable keeps. The input is still fed at every
// execute, with these bytes.
struct GraphConstant {
  const void* data = nullptr;
  uint64_t size = 0;
};

// A validated graph, owned (copied from the C graph). Nodes are in
// topological order; a value id indexes VALUES.
struct Graph {
  std::vector<GraphValue> values;
  std::vector<GraphNode> nodes;
  std::vector<uint32_t> inputs;   // value ids fed at execute, in order
  std::vector<uint32_t> outputs;  // value ids written at execute, in order
  // Constant inputs by value id (empty when the host gave none; see
  // GraphConstant for how long DATA lives).
  std::map<uint32_t, GraphConstant> constants;
  // ABI 1.14 output aliases (hal_graph_output_aliases_t), validated:
  // (output index, input index) pairs of one dtype and shape, each output
  // and input at most once. An executable that honours them
  // (Executable::honours_output_aliases) may be given output J as input
  // I's very tensor (contiguous): it must read I's old contents and leave
  // J's new ones there.
  std::vector<std::pair<size_t, size_t>> output_aliases;

  // The bytes of constant value V, or nullptr.
  const GraphConstant* constant(uint32_t v) const {
    auto it = constants.find(v);
    return it == constants.end() ? nullptr : &it->second;
  }
};

// A compiled graph. Destroyed by the SDK on executable_destroy (the caller
// promised no execution is still queued). execute may be called from
// several threads at once.
class Executable {
 public:
  virtual ~Executable() = default;
  // Runs the graph: INPUTS[i] holds graph input i, OUTPUTS[j] receives
  // graph output j; validated against the graph (concrete shapes, dtypes,
  // live buffers of this device). Queue the work on STREAM (or run it
  // before returning when STREAM is nullptr); copy the Tensors you keep.
  // Throw (hal::sdk::fail) before writing any output to refuse.
  virtual void execute(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs, Stream* stream) = 0;
  // Device kernels one execute launches (be honest: a plugin that runs its
  // ops one by one launches one per node).
  virtual uint32_t kernel_count() const = 0;
  // Free text for logs; truncated to 255 bytes at the ABI.
  virtual std::string description() const { return {}; }
  // The whole plan for a host's explain() (ABI 1.10 hal_executable_info_t.
  // plan): which nodes run in which kernel, one line per kernel or op-by-op
  // node, no length limit. Asked once per executable, at the first
  // executable_get_info that wants it (any thread; the SDK serialises the
  // call); the SDK keeps the text until executable_destroy. Empty (the
  // default): the host shows description() only.
  virtual std::string plan() const { return {}; }
  // Whether execute reads inputs of any strides (ABI 1.7
  // HAL_EXECUTABLE_FLAG_STRIDED_INPUTS): the host then passes a transposed
  // view as it is instead of a contiguous copy. Default false.
  virtual bool accepts_strided_inputs() const { return false; }
  // Whether execute honours Graph::output_aliases (ABI 1.14
  // HAL_EXECUTABLE_FLAG_OUTPUT_ALIASES): an aliased output may then be
  // its input's tensor, and execute must give the answer separate memory
  // would. Default false: the SDK refuses such overlaps before execute.
  virtual bool honours_output_aliases() const { return false; }
  // What Device::deserialize_graph needs to rebuild this executable without
  // compiling (ABI 1.5 executable_serialize; the SDK wraps it with the
  // plugin's name, version and a checksum). Throw UNIMPLEMENTED (the
  // default) when it cannot be serialised.
  virtual std::vector<uint8_t> serialize() const {
    fail(HAL_STATUS_UNIMPLEMENTED, "this executable cannot be serialised");
  }
};

}  // namespace hal::sdk

#endif  // HAL_SDK_GRAPH_HPP_
