// Model::load: parse and check the ModelProto, bind inputs and initializers,
// translate the nodes through the op table (op_table.cc), mark the outputs.
#include "hal/onnx/model.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <new>
#include <stdexcept>

#include "hal/common/dtype.hpp"
#include "hal/runtime/error.hpp"
#include "onnx/checker.h"
#include "op_table.hpp"
#include "tensor_proto.hpp"
#include "translator.hpp"

namespace hal::onnx {

namespace {

using detail::Slot;
using detail::Translator;

// The newest opset libonnx 1.12's checker and schemas know.
constexpr int64_t kCheckerMaxOpset = 17;

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

[[noreturn]] void invalid(const std::string& msg) { throw Error(HAL_STATUS_INVALID_ARGUMENT, msg); }

int64_t default_opset(const ::onnx::ModelProto& m) {
  int64_t opset = -1;
  for (const auto& o : m.opset_import())
    if (is_default_domain(o.domain())) opset = o.version();
  if (opset < 0) invalid("the model imports no opset of the default domain (ai.onnx)");
  // A newer opset than the table knows is refused per node (translate_node
  // names the operator and the versions the table has): it may change any operator.
  if (opset < detail::kOldestOpset)
    throw Error(HAL_STATUS_UNIMPLEMENTED, "the model uses ai.onnx opset " + std::to_string(opset) + "; HAL supports opsets " +
                                              std::to_string(detail::kOldestOpset) + " to " +
                                              std::to_string(detail::newest_known_opset()) +
                                              " (convert it with onnx.version_converter)");
  return opset;
}

// What libonnx cannot check for opsets it does not know: names defined once,
// every read defined earlier (else a cycle, an unsorted graph or a dangling
// value, named), outputs defined.
void check_structure(const ::onnx::GraphProto& g) {
  std::map<std::string, std::string> defined;  // name -> what defines it
  std::map<std::string, size_t> produced_by;   // name -> node index
  for (size_t i = 0; i < static_cast<size_t>(g.node_size()); ++i)
    for (const std::string& o : g.node(static_cast<int>(i)).output())
      if (!o.empty()) produced_by.emplace(o, i);
  for (const auto& t : g.initializer()) defined.emplace(t.name(), "initializer");
  for (const auto& in : g.input()) defined.emplace(in.name(), "graph input");
  for (size_t i = 0; i < static_cast<size_t>(g.node_size()); ++i) {
    const auto& n = g.node(static_cast<int>(i));
    std::string label = "node " + std::to_string(i) + " '" + n.name() + "' (" + n.op_type() + ")";
    for (const std::string& in : n.input()) {
      if (in.empty() || defined.count(in)) continue;
      auto p = produced_by.find(in);
      if (p == produced_by.end()) invalid(label + " reads '" + in + "', which no input, initializer or node defines (dangling value)");
      const auto& later = g.node(static_cast<int>(p->second));
      invalid(label + " reads '" + in + "', produced by node " + std::to_string(p->second) + " '" + later.name() + "' (" +
              later.op_type() + ") " + (p->second == i ? "itself" : "after it") + ": a cycle, or nodes not in topological order");
    }
    for (const std::string& o : n.output()) {
      if (o.empty()) continue;
      auto [it, fresh] = defined.emplace(o, label);
      if (!fresh) invalid(label + " defines '" + o + "', already defined by " + it->second);
    }
  }
  for (const auto& o : g.output())
    if (!defined.count(o.name())) invalid("graph output '" + o.name() + "' is defined by no input, initializer or node");
}

}  // namespace

using Sequences = std::map<std::string, std::vector<ValueSpec>>;

struct Model::Staged {
  ::onnx::ModelProto proto;
  std::string external_root;
  std::map<std::string, HostTensor> bound;  // a bound model's input values
  Sequences sequences;                      // and its sequence inputs' elements
};

// What a stage's translation reports besides its graph.
struct StageTranslation {
  bool partial = false;            // stopped at a request past the bound values
  Graph::Value request;            // partial: the value asked for (invalid: dims)
  std::string request_what;
  std::vector<int64_t> request_dims, request_shape;
  std::vector<size_t> cuts;        // per request made: the graph's node count then
  bool request_rows = false;       // partial: the request is a count of rows (runtime_rows)
  // partial: the request is a view's target shape over SOURCE (runtime_view)
  bool request_view = false;
  Graph::Value request_view_source;
  bool request_view_allowzero = false;
  bool request_sizes = false;      // partial: the request is sizes of shapes (runtime_dims)
  std::vector<detail::Translator::RowsInput> rows;  // the inputs runtime_rows and runtime_view made
  std::vector<detail::Translator::Guard> guards;    // what the translation took of the symbols' hints
  bool symbolic_rows = true;
  std::vector<bool> concrete;      // per request: its value taken as it is (Model::stage)
};

struct Model::Deferred {
  ::onnx::ModelProto proto;
  std::string external_root;
  std::vector<std::string> value_inputs;
  std::vector<TensorInfo> value_infos;  // per value input: dtype and (fixed) shape
  std::vector<std::string> sequence_inputs;
};

// Fills a Model while translating (a friend of Model).
class ModelBuilder {
 public:
  // BOUND: graph inputs given as values (Model::bind), translated as
  // constants; nullptr at load, where a translation that needs input values
  // returns a deferred model instead (see Model::needs_input_values).
  // RUNTIME: the values of the requests earlier stages read back (a stage's
  // translation, Model::stage; REPORT receives where it stopped); nullptr
  // at load and in bind(), where a request makes the model run in stages.
  // SEQUENCES: the elements of sequence inputs (bind); at load a model with
  // sequence inputs is deferred until they are known.
  static Model build(::onnx::ModelProto& m, const std::string& external_root,
                     const std::map<std::string, HostTensor>* bound = nullptr,
                     const std::vector<HostTensor>* runtime = nullptr, StageTranslation* report = nullptr,
                     const Sequences* sequences = nullptr) {
    Model model;
    model.opset_ = default_opset(m);
    model.producer_ = m.producer_name() + (m.producer_version().empty() ? "" : " " + m.producer_version());
    if (!m.has_graph()) invalid("the model has no graph");
    ModelMetadata& meta = model.metadata_;
    meta.producer_name = m.producer_name();
    meta.producer_version = m.producer_version();
    meta.domain = m.domain();
    meta.model_version = m.model_version();
    meta.doc_string = m.doc_string();
    meta.graph_name = m.graph().name();
    meta.graph_doc_string = m.graph().doc_string();
    for (const auto& p : m.metadata_props()) meta.metadata_props[p.key()] = p.value();
    if (bound == nullptr && model.opset_ <= kCheckerMaxOpset && m.ir_version() <= ::onnx::IR_VERSION) {
      run_checker(m);
    }
    const ::onnx::GraphProto& g = m.graph();
    check_structure(g);

    Translator t(model.graph_);
    for (const auto& init : g.initializer()) {
      Slot s;
      s.host = detail::tensor_from_proto(init, external_root, "initializer '" + init.name() + "'");
      s.spec = {s.host->dtype, s.host->shape};
      t.define(init.name(), std::move(s));
    }
    for (const auto& in : g.input()) {
      if (t.defined(in.name())) continue;  // an initializer listed as an input (IR < 4 style): a constant
      if (bound != nullptr && bound->count(in.name())) {
        Slot s;
        s.host = bound->at(in.name());
        s.spec = {s.host->dtype, s.host->shape};
        t.define(in.name(), std::move(s));
        continue;
      }
      if (in.type().has_optional_type()) {
        TensorInfo info = optional_input(t, in, sequences);
        if (sequences == nullptr || !t.slot(in.name()).elements.empty()) model.inputs_.push_back(info);
        continue;
      }
      if (in.type().has_sequence_type()) {
        TensorInfo info = sequence_input(t, in, sequences);
        if (sequences == nullptr) {
          model.inputs_.push_back(info);
        } else {  // bound: its elements are the translation's inputs
          for (const Slot& e : t.slot(in.name()).elements)
            model.inputs_.push_back(ModelBuilder::info(t.graph(), t.graph().value_name(e.value.id), e.spec));
        }
        continue;
      }
      // With sequence inputs bound, every input takes its fed shape (the translation is per shapes).
      const std::vector<int64_t>* fixed = nullptr;
      if (sequences != nullptr) {
        auto it = sequences->find(in.name());
        if (it != sequences->end() && it->second.size() == 1) fixed = &it->second[0].shape;
      }
      model.inputs_.push_back(bind_input(t, in, fixed));
    }
    if (sequences == nullptr) {  // sequence inputs: translated once their elements are known
      std::vector<std::string> names;
      for (const TensorInfo& i : model.inputs_)
        if (i.sequence || i.optional) names.push_back(i.name);
      if (!names.empty()) {
        auto d = std::make_shared<Model::Deferred>();
        d->proto = m;
        d->external_root = external_root;
        d->sequence_inputs = names;
        model.graph_ = Graph();
        declared_outputs(m, model);
        model.deferred_ = std::move(d);
        return model;
      }
    } else {
      t.bind_runtime_values({});  // other inputs' values: read while the model runs
    }
    if (runtime != nullptr)
      t.bind_runtime_values(*runtime, report == nullptr || report->symbolic_rows,
                            report == nullptr ? std::vector<bool>{} : report->concrete);
    try {
      detail::translate_graph(t, g, model.opset_);
    } catch (const Error&) {
      if (t.pending_request()) {
        if (runtime == nullptr) {  // at load or bind: the model runs in stages
          auto st = std::make_shared<Model::Staged>();
          st->proto = m;
          st->external_root = external_root;
          if (bound != nullptr) st->bound = *bound;
          if (sequences != nullptr) st->sequences = *sequences;
          declared_outputs(m, model);
          model.graph_ = Graph();
          model.staged_ = std::move(st);
          return model;
        }
        report->partial = true;
        report->request = t.pending_request()->value;
        report->request_what = t.pending_request()->what;
        report->request_dims = t.pending_request()->dims;
        report->request_shape = t.pending_request()->shape;
        report->request_rows = t.pending_request()->rows;
        report->request_view = t.pending_request()->view;
        report->request_view_source = t.pending_request()->source;
        report->request_view_allowzero = t.pending_request()->allowzero;
        report->request_sizes = t.pending_request()->sizes;
        report->cuts = t.request_cuts();
        report->rows = t.rows_inputs();
        report->guards = t.guards();
        return model;
      }
      if (bound != nullptr || runtime != nullptr || !t.value_needed()) throw;
      if (!defer(m, external_root, model)) throw;
      return model;
    }
    if (report != nullptr) {
      report->cuts = t.request_cuts();
      report->rows = t.rows_inputs();
      report->guards = t.guards();
    }
    std::vector<uint32_t> marked;
    auto mark = [&](Graph::Value v, const ValueSpec& spec, const std::string& name, bool sequence) {
      bool produced = !model.graph_.is_constant(v.id);
      for (uint32_t in : model.graph_.inputs()) produced = produced && in != v.id;
      for (uint32_t prev : marked) produced = produced && prev != v.id;
      if (!produced) v = model.graph_.add_node("copy", {v}, {}, {spec})[0];  // outputs are produced by a node, once
      model.graph_.mark_output(v, name);
      marked.push_back(v.id);
      TensorInfo ti = info(model.graph_, name, model.graph_.values()[v.id]);
      ti.sequence = sequence;
      model.outputs_.push_back(ti);
    };
    for (const auto& o : g.output()) {
      const Slot* sp = &t.slot(o.name());
      if (sp->optional) {  // an optional output: its value (an empty one has no tensor to return)
        if (sp->elements.empty())
          throw Error(HAL_STATUS_UNIMPLEMENTED, "output '" + o.name() + "' is an empty optional (not returned: optional outputs must hold a value)");
        sp = &sp->elements[0];
      }
      const Slot& s = *sp;
      if (!s.sequence) {
        Graph::Value v = s.value;
        if (!v.valid() && sp != &t.slot(o.name()) && s.host)  // an optional's value known at load
          v = t.graph().constant(s.host->dtype, s.host->shape, s.host->data, o.name());
        if (!v.valid()) v = t.value_of(o.name());
        mark(v, s.spec, o.name(), false);
        continue;
      }
      if (s.elements.empty()) {  // a placeholder saying the sequence is empty
        ValueSpec none{s.spec.dtype == HAL_DTYPE_INVALID ? HAL_DTYPE_FLOAT32 : s.spec.dtype, {0}};
        mark(t.graph().add_node("fill", {}, {Attr::scalar("value", 0.0)}, {none})[0], none, o.name() + "[]", true);
        continue;
      }
      for (size_t i = 0; i < s.elements.size(); ++i) {
        const Slot& e = s.elements[i];
        Graph::Value v = e.value;
        if (!v.valid()) {
          std::optional<HostTensor> h = e.host;
          if (!h && e.ints && std::all_of(e.ints->begin(), e.ints->end(), [](const detail::Dim& d) { return d.known(); })) {
            std::vector<int64_t> ints;
            for (const detail::Dim& d : *e.ints) ints.push_back(d.value);
            h = detail::int_tensor(e.spec.dtype, ints, e.spec.shape);
          }
          if (!h) invalid("output '" + o.name() + "' element " + std::to_string(i) + " is shape arithmetic over run-time dims");
          v = t.graph().constant(h->dtype, h->shape, h->data, o.name() + "[" + std::to_string(i) + "]");
        }
        mark(v, e.spec, o.name() + "[" + std::to_string(i) + "]", true);
      }
    }
    model.graph_.verify();  // the translation's own consistency: every node against the catalog's rules
    return model;
  }

 private:

  // Turns MODEL (inputs bound, translation stopped at a node needing an
  // input's value) into a deferred model; false when no input can be bound.
  static bool defer(const ::onnx::ModelProto& m, const std::string& external_root, Model& model) {
    auto d = std::make_shared<Model::Deferred>();
    for (const TensorInfo& in : model.inputs_) {
      bool fixed = true;
      int64_t numel = 1;
      for (int64_t dim : in.shape) {
        fixed = fixed && dim >= 0;
        numel *= std::max<int64_t>(dim, 1);
      }
      const bool integral = in.dtype == HAL_DTYPE_BOOL || !common::is_floating(in.dtype);
      if (!fixed || numel > 4096 || (!integral && in.shape.size() > 1)) continue;
      d->value_inputs.push_back(in.name);
      d->value_infos.push_back(in);
    }
    if (d->value_inputs.empty()) return false;
    d->proto = m;
    d->external_root = external_root;
    model.graph_ = Graph();
    declared_outputs(m, model);
    model.deferred_ = std::move(d);
    return true;
  }

  // The outputs as the model declares them (a model translated later).
  static void declared_outputs(const ::onnx::ModelProto& m, Model& model) {
    model.outputs_.clear();
    for (const auto& o : m.graph().output()) {
      TensorInfo ti{o.name(), HAL_DTYPE_INVALID, {}, {}, o.type().has_sequence_type()};
      const bool seq_of_tensors = o.type().has_sequence_type() && o.type().sequence_type().elem_type().has_tensor_type();
      if (o.type().has_tensor_type() || seq_of_tensors)
        declare(ti, seq_of_tensors ? o.type().sequence_type().elem_type().tensor_type() : o.type().tensor_type());
      model.outputs_.push_back(std::move(ti));
    }
  }

  // TI's dtype, dims (-1 unless given) and dim names as tensor type TT declares them.
  static void declare(TensorInfo& ti, const ::onnx::TypeProto_Tensor& tt) {
    ti.dtype = dtype_from_onnx(tt.elem_type());
    for (const auto& dim : tt.shape().dim()) {
      ti.shape.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
      ti.dim_names.push_back(dim.has_dim_value() ? "" : dim.dim_param());
    }
  }

  friend class Model;

  // libonnx's checker, with external initializers hidden from it: it probes
  // their files relative to the working directory (not the model's folder)
  // and without HAL's containment rules, which tensor_from_proto applies.
  static void run_checker(::onnx::ModelProto& m) {
    using TP = ::onnx::TensorProto;
    struct Hidden {
      TP* tensor;
      google::protobuf::RepeatedPtrField<::onnx::StringStringEntryProto> entries;
    };
    std::vector<Hidden> hidden;
    for (TP& t : *m.mutable_graph()->mutable_initializer()) {
      if (t.data_location() != TP::EXTERNAL) continue;
      hidden.push_back({&t, {}});
      hidden.back().entries.Swap(t.mutable_external_data());
      t.clear_data_location();
      bool empty = std::any_of(t.dims().begin(), t.dims().end(), [](int64_t d) { return d == 0; });
      if (!empty) t.set_raw_data(std::string(1, '\0'));  // one (non-empty) value field, as the checker wants
    }
    std::string refusal;
    try {
      ::onnx::checker::check_model(m);
    } catch (const std::exception& e) {
      refusal = e.what();
    }
    for (Hidden& h : hidden) {
      h.tensor->clear_raw_data();
      h.tensor->set_data_location(TP::EXTERNAL);
      h.entries.Swap(h.tensor->mutable_external_data());
    }
    if (!refusal.empty()) invalid("the ONNX checker refused the model: " + refusal);
  }

  static TensorInfo info(const Graph& g, const std::string& name, const ValueSpec& spec) {
    TensorInfo ti{name, spec.dtype, spec.shape, {}};
    for (int64_t d : spec.shape) ti.dim_names.push_back(d < 0 ? g.symbol_name(d) : "");
    return ti;
  }

  // An optional graph input (of a tensor): with SEQUENCES given, its tensor
  // (one element) becomes the graph input of its name, or it is empty (none);
  // otherwise only described.
  static TensorInfo optional_input(Translator& t, const ::onnx::ValueInfoProto& in, const Sequences* sequences) {
    const std::string what = "graph input '" + in.name() + "'";
    const auto& ot = in.type().optional_type();
    TensorInfo info{in.name(), HAL_DTYPE_INVALID, {}, {}, false, true};
    const bool of_tensor = ot.has_elem_type() && ot.elem_type().has_tensor_type();
    if (of_tensor) declare(info, ot.elem_type().tensor_type());
    if (sequences == nullptr) return info;
    auto it = sequences->find(in.name());
    if (it == sequences->end()) invalid("Model::bind: nothing given for optional input '" + in.name() + "'");
    Slot opt;
    opt.optional = true;
    opt.spec = {info.dtype, {}};
    if (!it->second.empty()) {
      if (!of_tensor) throw Error(HAL_STATUS_UNIMPLEMENTED, what + " is an optional sequence holding a value (only empty ones)");
      const ValueSpec& e = it->second[0];
      if (e.dtype != info.dtype)
        invalid("Model::bind: optional input '" + in.name() + "' is " + common::dtype_name(e.dtype) + "; the model declares " +
                common::dtype_name(info.dtype));
      Slot el;
      el.spec = e;
      el.value = t.graph().input(e.dtype, e.shape, in.name());
      opt.spec = e;
      opt.elements.push_back(el);
      info = ModelBuilder::info(t.graph(), in.name(), e);
    }
    t.define(in.name(), opt);
    return info;
  }

  // A sequence graph input: with SEQUENCES given, its elements become graph
  // inputs "name[i]" (of the dtypes and shapes given); otherwise only described.
  static TensorInfo sequence_input(Translator& t, const ::onnx::ValueInfoProto& in, const Sequences* sequences) {
    const std::string what = "graph input '" + in.name() + "'";
    const auto& st = in.type().sequence_type();
    if (!st.has_elem_type() || !st.elem_type().has_tensor_type())
      invalid(what + " is a sequence of non-tensors (sequences of tensors only)");
    const auto& tt = st.elem_type().tensor_type();
    const hal_dtype_e dt = dtype_from_onnx(tt.elem_type());
    if (dt == HAL_DTYPE_INVALID)
      throw Error(HAL_STATUS_UNIMPLEMENTED, what + " holds element type " + onnx_dtype_name(tt.elem_type()) + ", which HAL has no dtype for");
    TensorInfo info{in.name(), HAL_DTYPE_INVALID, {}, {}, true};
    declare(info, tt);
    if (sequences == nullptr) return info;
    auto it = sequences->find(in.name());
    if (it == sequences->end()) invalid("Model::bind: no elements given for sequence input '" + in.name() + "'");
    Slot seq;
    seq.sequence = true;
    seq.spec = {dt, {}};
    for (size_t i = 0; i < it->second.size(); ++i) {
      const ValueSpec& e = it->second[i];
      if (e.dtype != dt)
        invalid("Model::bind: element " + std::to_string(i) + " of sequence input '" + in.name() + "' is " +
                common::dtype_name(e.dtype) + "; the model declares " + common::dtype_name(dt));
      // The fed shape (elements may differ in size even where they declare one dim_param); a
      // declared rank or dim_value must match.
      const std::vector<int64_t>& shape = e.shape;
      if (tt.has_shape()) {
        if (tt.shape().dim_size() != static_cast<int>(shape.size()))
          invalid("Model::bind: element " + std::to_string(i) + " of sequence input '" + in.name() + "' has rank " +
                  std::to_string(shape.size()) + "; the model declares " + std::to_string(tt.shape().dim_size()));
        for (size_t k = 0; k < shape.size(); ++k) {
          const auto& d = tt.shape().dim(static_cast<int>(k));
          if (d.has_dim_value() && d.dim_value() != shape[k])
            invalid("Model::bind: element " + std::to_string(i) + " of sequence input '" + in.name() + "' has dim " +
                    std::to_string(k) + " of " + std::to_string(shape[k]) + "; the model declares " + std::to_string(d.dim_value()));
        }
      }
      Slot el;
      el.spec = {e.dtype, shape};
      el.value = t.graph().input(e.dtype, shape, in.name() + "[" + std::to_string(i) + "]");
      seq.elements.push_back(el);
    }
    t.define(in.name(), seq);
    return info;
  }

  // FIXED: the shape to take instead of the declared one (its rank must match).
  static TensorInfo bind_input(Translator& t, const ::onnx::ValueInfoProto& in, const std::vector<int64_t>* fixed = nullptr) {
    const std::string what = "graph input '" + in.name() + "'";
    if (!in.type().has_tensor_type()) invalid(what + " is neither a tensor nor a sequence of tensors (optionals and maps are not supported)");
    const auto& tt = in.type().tensor_type();
    hal_dtype_e dt = dtype_from_onnx(tt.elem_type());
    if (dt == HAL_DTYPE_INVALID)
      throw Error(HAL_STATUS_UNIMPLEMENTED, what + " has element type " + onnx_dtype_name(tt.elem_type()) + ", which HAL has no dtype for");
    if (!tt.has_shape()) throw Error(HAL_STATUS_UNIMPLEMENTED, what + " has no shape (its rank must be known)");
    std::vector<int64_t> shape;
    for (int i = 0; i < tt.shape().dim_size(); ++i) {
      const auto& d = tt.shape().dim(i);
      if (d.has_dim_value()) {
        if (d.dim_value() < 0) invalid(what + " dim " + std::to_string(i) + " is " + std::to_string(d.dim_value()));
        shape.push_back(d.dim_value());
      } else {
        shape.push_back(t.named_symbol(d.has_dim_param() && !d.dim_param().empty() ? d.dim_param()
                                                                                    : in.name() + "_d" + std::to_string(i)));
      }
    }
    if (fixed != nullptr) {
      if (fixed->size() != shape.size())
        invalid(what + " is fed with rank " + std::to_string(fixed->size()) + "; the model declares " + std::to_string(shape.size()));
      shape = *fixed;
    }
    Graph::Value v = t.graph().input(dt, shape, in.name());
    Slot s;
    s.spec = {dt, shape};
    s.value = v;
    t.define(in.name(), s);
    return info(t.graph(), in.name(), s.spec);
  }
};

namespace {

Model load_proto(const void* data, size_t size, const std::string& external_root, const std::string& what) {
  if (data == nullptr && size != 0) invalid(what + ": null data");
  if (size == 0) invalid(what + " is empty, not an ONNX model");
  if (size > static_cast<size_t>(std::numeric_limits<int>::max())) invalid(what + " is larger than 2 GiB (protobuf's limit)");
  ::onnx::ModelProto m;
  if (!m.ParseFromArray(data, static_cast<int>(size)))
    invalid(what + " is not a valid ONNX model (the ModelProto does not parse: malformed or truncated)");
  try {
    return ModelBuilder::build(m, external_root);
  } catch (const Error& e) {
    throw Error(e.code(), what + ": " + e.what());
  } catch (const std::bad_alloc&) {
    throw Error(HAL_STATUS_OUT_OF_MEMORY, what + ": out of host memory while translating the model");
  } catch (const std::exception& e) {  // a malformed model tripping a library check
    throw Error(HAL_STATUS_INVALID_ARGUMENT, what + ": malformed model: " + e.what());
  }
}

// V's bytes, owned: WHAT names V in the element count's errors, WHO in the
// no-data one ("Model::bind: input 'x'").
HostTensor owned_copy(const HostTensorRef& v, const std::string& what, const std::string& who) {
  const size_t bytes = static_cast<size_t>(detail::checked_numel(v.shape, what)) * common::dtype_size(v.dtype);
  if (bytes > 0 && v.data == nullptr) invalid(who + " has no data");
  HostTensor h{v.dtype, v.shape, {}};
  h.data.assign(static_cast<const uint8_t*>(v.data), static_cast<const uint8_t*>(v.data) + bytes);
  return h;
}

}  // namespace

Model Model::load(const std::string& path, const LoadOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(HAL_STATUS_NOT_FOUND, "ONNX model '" + path + "' does not exist");
  if (fs::is_directory(path, ec)) invalid("ONNX model '" + path + "' is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(HAL_STATUS_NOT_FOUND, "ONNX model '" + path + "' cannot be opened");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string root = options.model_dir;
  if (root.empty()) {
    root = fs::path(path).parent_path().string();
    if (root.empty()) root = ".";
  }
  return load_proto(bytes.data(), bytes.size(), root, "ONNX model '" + path + "'");
}

Model Model::load_bytes(const void* data, size_t size, const LoadOptions& options) {
  return load_proto(data, size, options.model_dir, "ONNX model (" + std::to_string(size) + " bytes)");
}

const std::vector<std::string>& Model::value_inputs() const {
  static const std::vector<std::string> none;
  return deferred_ ? deferred_->value_inputs : none;
}

const std::vector<std::string>& Model::sequence_inputs() const {
  static const std::vector<std::string> none;
  return deferred_ ? deferred_->sequence_inputs : none;
}

Model Model::bind(const std::vector<HostTensorRef>& values, const std::map<std::string, std::vector<ValueSpec>>& sequences) const {
  if (!deferred_) invalid("Model::bind: the model needs no input values (needs_input_values() is false)");
  const Deferred& d = *deferred_;
  if (values.size() != d.value_inputs.size())
    invalid("Model::bind: " + std::to_string(values.size()) + " values for " + std::to_string(d.value_inputs.size()) +
            " value inputs");
  std::map<std::string, HostTensor> bound;
  for (size_t i = 0; i < values.size(); ++i) {
    const TensorInfo& info = d.value_infos[i];
    const HostTensorRef& v = values[i];
    if (v.dtype != info.dtype || v.shape != info.shape)
      invalid("Model::bind: input '" + info.name + "' is " + common::dtype_name(v.dtype) + " " +
              detail::shape_text(v.shape) + " but the model declares " + common::dtype_name(info.dtype) + " " +
              detail::shape_text(info.shape));
    bound.emplace(info.name, owned_copy(v, "input '" + info.name + "'", "Model::bind: input '" + info.name + "'"));
  }
  for (const std::string& name : d.sequence_inputs)
    if (!sequences.count(name)) invalid("Model::bind: no elements given for sequence input '" + name + "'");
  ::onnx::ModelProto proto = d.proto;  // build() may touch it (external data)
  try {
    return ModelBuilder::build(proto, d.external_root, &bound, nullptr, nullptr,
                               d.sequence_inputs.empty() ? nullptr : &sequences);
  } catch (const Error& e) {
    throw Error(e.code(), "ONNX model with run-time values bound: " + std::string(e.what()));
  }
}

Model Model::reading_values() const {
  if (!deferred_ || !deferred_->sequence_inputs.empty())
    invalid("Model::reading_values: the model does not need input values, or has sequence inputs");
  Model m = *this;
  auto st = std::make_shared<Staged>();
  st->proto = deferred_->proto;
  st->external_root = deferred_->external_root;
  m.deferred_.reset();
  m.staged_ = std::move(st);
  return m;
}

namespace {

// STAGE's graph: FULL (the model's translation with the requests so far
// bound; partial: stopped at the next request) without the nodes before
// CUT, whose results it takes as inputs after the model's; a partial one
// outputs every value it computes.
void cut_stage(Graph full, size_t cut, const StageTranslation& tr, ModelStage& stage) {
  const std::vector<Graph::Node> nodes = full.nodes();
  const size_t nv = full.values().size();
  // The model's inputs come first, then those runtime_rows made (in order).
  const size_t model_inputs = full.inputs().size() - tr.rows.size();
  stage.model_input_ids.assign(full.inputs().begin(), full.inputs().begin() + static_cast<std::ptrdiff_t>(model_inputs));
  for (size_t i = 0; i < tr.rows.size(); ++i) {
    if (full.inputs()[model_inputs + i] != tr.rows[i].input)
      throw Error(HAL_STATUS_INTERNAL, "ONNX stage: a rows input is not where the runner feeds it");
    const std::vector<int64_t>& shape = full.values()[tr.rows[i].input].shape;
    ModelStage::Rows r{tr.rows[i].source, tr.rows[i].request, 0};
    if (tr.rows[i].view || tr.rows[i].sizes) {
      r.view = tr.rows[i].view;
      r.sizes = tr.rows[i].sizes;
      r.shape = shape;
    } else if (shape[0] < 0) {
      r.symbol = shape[0];
    }
    stage.rows.push_back(std::move(r));
  }
  std::vector<char> before(nv, 0), used_after(nv, 0);
  for (size_t n = 0; n < cut; ++n)
    for (uint32_t o : nodes[n].outputs) before[o] = 1;
  for (size_t n = cut; n < nodes.size(); ++n)
    for (uint32_t i : nodes[n].inputs)
      if (i != HAL_GRAPH_NO_VALUE) used_after[i] = 1;
  if (tr.partial) {
    for (size_t n = cut; n < nodes.size(); ++n)
      for (uint32_t o : nodes[n].outputs) {
        full.mark_output(Graph::Value{o});
        stage.output_ids.push_back(o);
      }
    stage.request_what = tr.request_what;
    if (tr.request.valid()) {
      stage.request = tr.request.id;
      stage.request_rows = tr.request_rows;
      stage.request_view = tr.request_view;
      stage.request_view_source = tr.request_view_source.id;
      stage.request_view_allowzero = tr.request_view_allowzero;
      stage.request_sizes = tr.request_sizes;
    } else {
      stage.request_is_dims = true;
      stage.request_dims = tr.request_dims;
      stage.request_shape = tr.request_shape;
    }
  } else {
    // A model output computed by an earlier stage: copied here (outputs are produced by a node).
    const std::vector<uint32_t> outs = full.outputs();
    for (uint32_t o : outs) {
      if (!before[o]) continue;
      const size_t copy_node = full.nodes().size();
      Graph::Value c = full.add_node("copy", {Graph::Value{o}}, {}, {full.values()[o]})[0];
      full.replace_uses(Graph::Value{o}, c);
      full.set_node_input(copy_node, 0, Graph::Value{o});
      used_after[o] = 1;
    }
  }
  for (uint32_t id = 0; id < nv; ++id) {
    if (!before[id] || !used_after[id]) continue;
    Graph::Value x = full.input(full.values()[id].dtype, full.values()[id].shape, full.value_name(id));
    full.replace_uses(Graph::Value{id}, x);
    stage.input_ids.push_back(id);
  }
  std::vector<bool> remove(full.nodes().size(), false);
  for (size_t n = 0; n < cut; ++n) remove[n] = true;
  full.remove_nodes(remove);
  full.sort_nodes();
  full.remove_unused_values();
  full.verify();
  stage.graph = std::move(full);
}

}  // namespace

ModelStage Model::stage(const std::vector<HostTensorRef>& values, bool symbolic_rows, const std::vector<bool>& concrete) const {
  if (!staged_) invalid("Model::stage: the model does not run in stages (runs_in_stages() is false)");
  const Staged& st = *staged_;
  std::vector<HostTensor> runtime;
  for (const HostTensorRef& v : values) runtime.push_back(owned_copy(v, "a stage value", "Model::stage: a value"));
  ::onnx::ModelProto proto = st.proto;
  StageTranslation tr;
  tr.symbolic_rows = symbolic_rows;
  tr.concrete = concrete;
  Model full;
  try {
    full = ModelBuilder::build(proto, st.external_root, st.bound.empty() ? nullptr : &st.bound, &runtime, &tr,
                               st.sequences.empty() ? nullptr : &st.sequences);
  } catch (const Error& e) {
    throw Error(e.code(), "ONNX model, stage " + std::to_string(values.size() + 1) + ": " + std::string(e.what()));
  }
  ModelStage out;
  const size_t cut = values.empty() ? 0 : tr.cuts.at(values.size() - 1);
  out.final = !tr.partial;
  if (out.final) out.outputs = full.outputs_;
  cut_stage(std::move(full.graph_), cut, tr, out);
  for (const detail::Translator::Guard& g : tr.guards) out.guards.push_back({g.request, g.element, g.lo, g.hi});
  return out;
}

}  // namespace hal::onnx
