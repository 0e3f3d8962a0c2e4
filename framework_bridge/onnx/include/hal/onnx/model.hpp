// HAL ONNX front end: an ONNX model translated to a hal::Graph of catalog ops.
//
//   hal::onnx::Model m = hal::onnx::Model::load("model.onnx");
//   for (const auto& in : m.inputs()) ...   // name, dtype, shape (< 0: symbolic), dim_names
//   m.graph();                               // the translated graph (constants = initializers)
//
// Loading parses the ModelProto with the ONNX C++ library, checks it
// (onnx::checker for opsets <= 17; structural checks and HAL's own inference
// above), reads initializers (typed fields, raw_data, external data)
// into graph constants, turns dynamic input dims (dim_param or no dim_value)
// into named symbols (hal::Graph::symbol), folds shape arithmetic that is
// constant at load, and maps every node through the ONNX -> catalog table
// by the operator version in effect at the model's opset (docs/onnx.md lists
// the supported operators, their versions and their limits).
//
// A model whose translation needs the values of some inputs (a Slice's starts,
// a Reshape's target, a TopK's K fed as graph inputs) loads as such:
// needs_input_values() is true, graph() is empty, and bind() translates it
// for given values of value_inputs() (Session does so per run, caching one
// translation per distinct set of values).
//
// A model whose translation needs a value computed while it runs (an If's
// condition, a Loop's trip count or condition, the target of a Reshape
// computed from tensor values) runs in stages: runs_in_stages() is true and
// stage() translates it for the values the earlier stages read back; each
// stage is a graph of its own (Session runs them in turn and caches each
// stage per value).
//
// Errors (hal::Error):
//   INVALID_ARGUMENT  not a parseable ModelProto (malformed, truncated, not
//                     ONNX), a checker refusal, a graph the verifier refuses
//                     (cycle, dangling value; naming the node), an
//                     initializer whose data does not match its type/shape,
//                     external data outside the model's folder ("../",
//                     absolute, symlink out) or shorter than offset + length.
//   NOT_FOUND         the model file or an external data file does not exist.
//   UNIMPLEMENTED     an opset of the default domain below 1, another
//                     domain (named), or a node the table cannot translate
//                     (an operator version without a row, any operator at
//                     an opset newer than the table knows)
//                     (naming node name, index, op_type, domain/opset and the
//                     missing piece: attribute value, dtype, ...).
#ifndef HAL_ONNX_MODEL_HPP_
#define HAL_ONNX_MODEL_HPP_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "hal/onnx/host_tensor.hpp"
#include "hal/runtime/graph.hpp"

namespace hal::onnx {

// The name, dtype and shape of a model input or output. Copyable value type.
// A sequence (SEQUENCE): DTYPE and SHAPE describe its elements. Among a
// translated model's outputs a sequence output "y" appears as its elements
// "y[0]", "y[1]", ... (an empty one as "y[]", a [0]-shaped placeholder); a
// sequence input is fed as its elements "s[0]", "s[1]", ... ("s[]": empty).
struct TensorInfo {
  std::string name;
  hal_dtype_e dtype = HAL_DTYPE_INVALID;
  std::vector<int64_t> shape;           // dims < 0: symbolic (the graph's symbol numbers)
  std::vector<std::string> dim_names;   // per dim: the symbol's name; "" for concrete dims
  bool sequence = false;
  // An optional input: fed as its tensor ("x"), or as "x[]" when empty.
  bool optional = false;
};

// What the ModelProto says about itself (onnxruntime's ModelMetadata).
// Copyable value type; strings empty and MODEL_VERSION 0 when not set.
struct ModelMetadata {
  std::string producer_name;      // "pytorch"
  std::string producer_version;   // "2.15.0"
  std::string domain;             // the model's domain
  int64_t model_version = 0;
  std::string doc_string;         // the model's
  std::string graph_name;
  std::string graph_doc_string;
  std::map<std::string, std::string> metadata_props;  // key -> value (a repeated key: the last one)
};

struct LoadOptions {
  // Root folder for external data. Default (""): the model file's folder for
  // load(); for load_bytes(), "" means external data is refused
  // (INVALID_ARGUMENT naming the initializer).
  std::string model_dir;
};

// One stage of a model that runs in stages (Model::stage). Its graph takes
// the model's inputs, then the values of the model's full translation that
// earlier stages computed (INPUT_IDS: their ids there). A final stage's
// outputs are the model's (OUTPUTS describes them); any other stage outputs
// every value it computes (OUTPUT_IDS) and needs REQUEST's value (an id
// among the model's inputs, INPUT_IDS or OUTPUT_IDS) read back before the
// next stage is translated. Copyable value type.
struct ModelStage {
  hal::Graph graph;
  std::vector<uint32_t> input_ids;
  bool final = false;
  std::vector<uint32_t> output_ids;
  uint32_t request = 0;
  std::string request_what;       // "If's condition ('cond') (node 3 'branch' (If, ai.onnx opset 19))"
  // Instead of REQUEST: shape arithmetic over the inputs' run-time dims, an
  // int64 tensor of REQUEST_SHAPE holding REQUEST_DIMS (numbers >= 0 and
  // the graph's symbols < 0, the sizes the fed inputs give them).
  bool request_is_dims = false;
  std::vector<int64_t> request_dims, request_shape;
  // REQUEST is a count of rows: the next stage takes that many rows of a
  // value as an input (its ROWS says which).
  bool request_rows = false;
  // REQUEST is a Reshape's target shape computed by the model: with
  // symbolic rows the runner binds it resolved (Reshape's rules against
  // value REQUEST_VIEW_SOURCE's shape when the model runs; an int64 tensor
  // of the dims), and the next stage takes that value's bytes in that shape
  // (its ROWS says which).
  bool request_view = false;
  uint32_t request_view_source = 0;
  bool request_view_allowzero = false;
  // REQUEST is sizes of shapes (a Range's length, Tile's or Expand's output
  // dims, ConstantOfShape's shape): with symbolic rows its elements >= 2 are
  // symbols of the next stage, bound by an input of shape [0, value...]
  // (its ROWS says which).
  bool request_sizes = false;
  std::vector<TensorInfo> outputs;
  std::vector<uint32_t> model_input_ids;  // the ids of the model's inputs (the graph's first inputs)
  // The graph's inputs after the model's, before INPUT_IDS' (one per count
  // of rows read so far): the first rows of value SOURCE (its id in the
  // model's translation, computed by an earlier stage), as many as the
  // value read back for the REQUEST-th stage (0-based) says. SYMBOL < 0:
  // the graph's symbol for that count (the same stage serves every count
  // >= 2); else the count is concrete in the graph.
  // VIEW: instead of rows, all of SOURCE's elements in the shape the
  // (resolved) value says; SHAPE is the input's in the graph, its dims < 0
  // symbols for the value's dims at the same index.
  // SIZES: no elements, of shape [0, the value...] (SOURCE is the value
  // read back); SHAPE is the input's in the graph, its dims < 0 symbols for
  // the value's elements at the index before.
  struct Rows {
    uint32_t source = 0;
    size_t request = 0;
    int64_t symbol = 0;
    bool view = false;
    bool sizes = false;
    std::vector<int64_t> shape;
  };
  std::vector<Rows> rows;
  // What the translation took of the values read back beyond their being
  // counts or dims >= 2: it holds only while element ELEMENT of the value
  // read back for request REQUEST is in [LO, HI] (a Slice of the first 3
  // rows of a count needs at least 3). The runner checks them before it
  // runs the stage for other values, and translates again when one fails.
  struct Guard {
    size_t request = 0;
    size_t element = 0;
    int64_t lo = 0;
    int64_t hi = 0;
  };
  std::vector<Guard> guards;
};

// An ONNX model translated to a hal::Graph. Immutable after load; copyable
// (copies share the constants' bytes); const methods are thread-safe.
class Model {
 public:
  // Reads and translates the model at PATH. Errors: see the file comment.
  static Model load(const std::string& path, const LoadOptions& options = {});
  // Translates the serialised ModelProto in DATA[0, SIZE) (the caller's
  // bytes, only read during the call; DATA may be nullptr when SIZE is 0,
  // which is then INVALID_ARGUMENT). Errors: see the file comment.
  static Model load_bytes(const void* data, size_t size, const LoadOptions& options = {});

  // Whether the translation waits for the values of value_inputs() (see the
  // file comment). Such a model's graph() is empty and its outputs() carry
  // the dtypes and dims the model declares (-1: not declared).
  bool needs_input_values() const { return deferred_ != nullptr; }
  // The inputs (names, model order) whose values bind() takes: those of an
  // integer or bool dtype, or of rank <= 1, with a fixed shape of at most
  // 4096 elements. Empty unless needs_input_values().
  const std::vector<std::string>& value_inputs() const;
  // The model translated with VALUES (one per value_inputs(), same order;
  // only read during the call) as constants; its inputs() are the other
  // inputs. INVALID_ARGUMENT for a value whose dtype or shape differs from
  // the input's; the translation's errors otherwise (a value that still
  // cannot be translated: UNIMPLEMENTED naming the node). Thread-safe.
  // SEQUENCES: per sequence input (sequence_inputs()), its elements'
  // dtypes and shapes (their values are fed at run time as "s[i]"); per
  // optional input, its tensor's (or nothing: empty).
  Model bind(const std::vector<HostTensorRef>& values,
             const std::map<std::string, std::vector<ValueSpec>>& sequences = {}) const;
  // The model as one that runs in stages whose value inputs are read when
  // it runs like values it computes (Model::stage), so the sizes they give
  // become symbols of the stages after them and a new value re-plans
  // without a translation of the model. INVALID_ARGUMENT unless the model
  // needs input values and has no sequence inputs. Thread-safe.
  Model reading_values() const;
  // The sequence and optional inputs (names, model order) bind() takes the
  // elements of; a model with any needs_input_values().
  const std::vector<std::string>& sequence_inputs() const;

  // Whether running the model needs values it computes (see the file
  // comment). Such a model's graph() is empty, its outputs() carry the
  // dtypes and dims the model declares.
  bool runs_in_stages() const { return staged_ != nullptr; }
  // The stage that follows the stages whose requests gave VALUES (in
  // order; only read during the call): stage(()) is the first. Errors: the
  // translation's (UNIMPLEMENTED naming the node), INVALID_ARGUMENT for a
  // value of another dtype than its request; INVALID_ARGUMENT when the
  // model does not run in stages. Deterministic and thread-safe.
  // SYMBOLIC_ROWS: a count of rows (ModelStage::request_rows) of 2 or more
  // is a symbol in the stages after it (their translation does not depend
  // on it); false: every count is a concrete dim. CONCRETE[K] true: the
  // value of request K is taken as it is even with SYMBOLIC_ROWS (sizes of
  // shapes, ModelStage::request_sizes, the session has seen one value of so
  // far: a translation for that value runs faster than one for any).
  ModelStage stage(const std::vector<HostTensorRef>& values, bool symbolic_rows = true,
                   const std::vector<bool>& concrete = {}) const;

  // The translated graph: its inputs are the model's non-initializer inputs
  // in model order, its outputs the model's outputs in model order (values
  // named as in the model). Valid while this Model lives.
  const hal::Graph& graph() const { return graph_; }
  // The model's inputs (initializers excluded) and outputs, in model order.
  const std::vector<TensorInfo>& inputs() const { return inputs_; }
  const std::vector<TensorInfo>& outputs() const { return outputs_; }
  // The default domain's opset the model imports ("" / "ai.onnx").
  int64_t opset() const { return opset_; }
  // The model's producer ("pytorch 2.15"), for messages; may be empty.
  const std::string& producer() const { return producer_; }
  // Producer, versions, names, doc strings and metadata_props of the model.
  const ModelMetadata& metadata() const { return metadata_; }

 private:
  friend class ModelBuilder;  // model.cc: fills the fields while translating
  struct Deferred;            // model.cc: the proto and what bind() needs
  struct Staged;              // model.cc: the proto and what stage() needs
  Model() = default;
  std::shared_ptr<const Deferred> deferred_;
  std::shared_ptr<const Staged> staged_;
  hal::Graph graph_;
  std::vector<TensorInfo> inputs_, outputs_;
  int64_t opset_ = 0;
  std::string producer_;
  ModelMetadata metadata_;
};

}  // namespace hal::onnx

#endif  // HAL_ONNX_MODEL_HPP_
