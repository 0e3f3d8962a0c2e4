// The "validation" layer: checks what the ABI says callers must do, before
// the plugin sees the call, and reports a violation as an error naming the
// entry, the argument and the rule (the call does not reach the plugin);
// HAL_VALIDATION=abort (or option on_error = "abort") prints it and aborts
// instead, for a debugger. Rules:
//
//   live-handle     buffers, streams, events and executables passed to a
//                   call were created through this plugin and not yet
//                   released (use after free, double free, foreign handle)
//   same-device     a launch's tensors, stream and executable belong to the
//                   device it runs on; a copy's stream to its buffer's device
//   struct-size     args structs and tensors carry a struct_size covering
//                   their fields, and extension chains are well formed
//   extent          a tensor (or a copy or fill range) lies inside its
//                   buffer; rank <= HAL_TENSOR_MAX_RANK
//   stream-order    a buffer is freed only after the work queued on a
//                   stream that uses it has completed (stream_synchronize,
//                   stream_query idle, or an event recorded after the work
//                   and then synchronised or queried complete)
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <unordered_map>

#include "hal/common/dtype.hpp"
#include "hal/common/extension.hpp"
#include "hal/runtime/error.hpp"
#include "hal/sdk/status.hpp"
#include "layers/builtin.hpp"

namespace hal::detail {
namespace {

struct BufferState {
  const void* device;
  uint64_t size;
  std::unordered_map<const void*, uint64_t> uses;  // stream -> its work count at the last use
};
struct StreamState {
  const void* device;
  uint64_t queued = 0, completed = 0;
};
struct EventState {
  const void* device;
  const void* stream = nullptr;  // of the latest record
  uint64_t at = 0;               // the stream's work count then
};

class ValidationLayer final : public BuiltinLayer {
 public:
  explicit ValidationLayer(const hal_layer_create_args_t& args) {
    LayerOptionMap options("validation", args, {"on_error"});
    std::string source;
    const std::string mode = options.get("on_error", "HAL_VALIDATION", "error", &source);
    if (mode == "abort")
      abort_ = true;
    else if (mode != "error" && mode != "1" && mode != "on")
      throw Error(HAL_STATUS_INVALID_ARGUMENT, source + " = '" + mode + "': expected 'error' or 'abort'");
  }

  hal_status_t* begin(const hal_layer_call_t& call, void**) override {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string violation = check(call);
    if (violation.empty()) return nullptr;
    const std::string message =
        "layer validation: " + std::string(call.plugin) + ": " + call.name + ": " + violation;
    if (abort_) {
      std::fprintf(stderr, "[hal error] %s\n[hal error] HAL_VALIDATION=abort: aborting\n", message.c_str());
      std::abort();
    }
    return sdk::make_status(violation.find("(rule stream-order)") != std::string::npos
                                ? HAL_STATUS_FAILED_PRECONDITION
                                : HAL_STATUS_INVALID_ARGUMENT,
                            message);
  }

  hal_status_t* end(const hal_layer_call_t& call, void*, hal_status_t* status) override {
    if (status != nullptr) return status;
    names_.learn(call);
    std::lock_guard<std::mutex> lock(mutex_);
    record(call);
    return nullptr;
  }

 private:
  static std::string ptr(const void* p) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%p", p);
    return buf;
  }

  // A buffer argument: its state when live and (DEVICE given) on DEVICE,
  // else nullptr with *BAD saying why.
  const BufferState* live(const void* b, const char* what, std::string* bad, const void* device = nullptr) {
    auto it = buffers_.find(b);
    if (it == buffers_.end()) {
      *bad = std::string(what) + " " + ptr(b) +
             " is not a live buffer of this plugin (freed already, or never allocated) (rule live-handle)";
      return nullptr;
    }
    if (device != nullptr && it->second.device != device) {
      *bad = std::string(what) + " " + ptr(b) + " belongs to " + names_.device(it->second.device) + ", not " +
             names_.device(device) + " (rule same-device)";
      return nullptr;
    }
    return &it->second;
  }
  std::string live_buffer(const void* b, const char* what, const void* device = nullptr) {
    std::string bad;
    live(b, what, &bad, device);
    return bad;
  }
  std::string live_stream(const void* s, const char* what, const void* device = nullptr) {
    if (s == nullptr) return {};
    auto it = streams_.find(s);
    if (it == streams_.end())
      return std::string(what) + " " + ptr(s) + " is not a live stream (destroyed, or never created) (rule live-handle)";
    if (device != nullptr && it->second.device != device)
      return std::string(what) + " " + ptr(s) + " is a stream of " + names_.device(it->second.device) + ", not " +
             names_.device(device) + " (rule same-device)";
    return {};
  }
  std::string live_event(const void* e, const char* what) {
    if (events_.count(e) == 0)
      return std::string(what) + " " + ptr(e) + " is not a live event (destroyed, or never created) (rule live-handle)";
    return {};
  }
  std::string range(const BufferState& b, uint64_t offset, uint64_t size, const char* what) {
    const uint64_t have = b.size;
    if (offset > have || size > have - offset)
      return std::string(what) + ": bytes [" + std::to_string(offset) + ", " + std::to_string(offset + size) +
             ") lie outside the buffer's " + std::to_string(have) + " bytes (rule extent)";
    return {};
  }

  // Tensor ROLE ("input"/"output") I of a call; OP names it in messages
  // (the launched op, or empty for an executable). Nothing is formatted
  // unless a rule is broken: this runs on every launch.
  std::string tensor(const hal_tensor_t* t, const char* role, size_t i, const hal_op_args_t* op, const void* device) {
    if (t == nullptr) return {};
    auto what = [&] {
      return (op != nullptr ? names_.op(plugin_, op->op) + " " : std::string()) + role + " " + std::to_string(i);
    };
    if (t->struct_size < HAL_STRUCT_SIZE_TO(hal_tensor_t, strides))
      return what() + ": struct_size " + std::to_string(t->struct_size) + " is below hal_tensor_t's " +
             std::to_string(HAL_STRUCT_SIZE_TO(hal_tensor_t, strides)) + " (rule struct-size)";
    if (t->rank > HAL_TENSOR_MAX_RANK)
      return what() + ": rank " + std::to_string(t->rank) + " exceeds HAL_TENSOR_MAX_RANK (rule extent)";
    if (t->rank > 0 && t->shape == nullptr)
      return what() + ": rank " + std::to_string(t->rank) + " but shape is NULL (rule extent)";
    bool empty = false;
    for (uint32_t d = 0; d < t->rank; ++d) {
      const int64_t n = t->shape[d];
      const int64_t stride = t->strides != nullptr ? t->strides[d] : 0;
      if (n < 0 || stride < 0)
        return what() + ": dim " + std::to_string(d) + " has size " + std::to_string(n) + ", stride " +
               std::to_string(stride) + " (rule extent)";
      empty = empty || n == 0;
    }
    if (empty) return {};
    if (t->buffer == nullptr) return what() + ": has elements but no buffer (rule extent)";
    auto it = buffers_.find(t->buffer);
    if (it == buffers_.end() || (device != nullptr && it->second.device != device))
      return live_buffer(t->buffer, (what() + "'s buffer").c_str(), device);
    const uint64_t item = common::dtype_size(t->dtype);
    if (item == 0) return {};  // the plugin refuses unknown dtypes itself
    // The byte past the last element, in unsigned arithmetic that reports
    // wrapping: huge sizes or strides must not wrap into a small extent.
    uint64_t last = 0, contiguous = 1, end = 0;  // last: element offset of the last element
    bool wraps = false;
    for (uint32_t d = t->rank; d-- > 0;) {
      const uint64_t n = static_cast<uint64_t>(t->shape[d]);
      const uint64_t stride = t->strides != nullptr ? static_cast<uint64_t>(t->strides[d]) : contiguous;
      uint64_t step = 0;
      wraps = wraps || __builtin_mul_overflow(n - 1, stride, &step) || __builtin_add_overflow(last, step, &last);
      if (t->strides == nullptr) wraps = wraps || __builtin_mul_overflow(contiguous, n, &contiguous);
    }
    wraps = wraps || __builtin_mul_overflow(last + 1, item, &end) || __builtin_add_overflow(end, t->byte_offset, &end);
    if (wraps || end > it->second.size)
      return what() + ": elements reach byte " + (wraps ? std::string("2^64 or beyond") : std::to_string(end)) +
             " (offset " + std::to_string(t->byte_offset) + ") of a " + std::to_string(it->second.size) +
             "-byte buffer (rule extent)";
    return {};
  }

  std::string chain(const void* first, const char* owner) {
    if (auto e = common::extension_chain_error(first, owner)) return *e + " (rule struct-size)";
    return {};
  }

  std::string op_args(const hal_op_args_t* a, const void* device, bool launch) {
    if (a == nullptr) return "args is NULL (rule struct-size)";
    if (a->struct_size < HAL_STRUCT_SIZE_TO(hal_op_args_t, attr_count))
      return "hal_op_args_t.struct_size " + std::to_string(a->struct_size) + " is below " +
             std::to_string(HAL_STRUCT_SIZE_TO(hal_op_args_t, attr_count)) + " (rule struct-size)";
    if ((a->input_count > 0 && a->inputs == nullptr) || (a->output_count > 0 && a->outputs == nullptr))
      return "hal_op_args_t has " + std::to_string(a->input_count) + " input(s) and " +
             std::to_string(a->output_count) + " output(s) but a NULL array for them (rule struct-size)";
    std::string bad = chain(a->next, "hal_op_args_t");
    if (!bad.empty() || !launch) return bad;
    for (size_t i = 0; i < a->input_count && bad.empty(); ++i) bad = tensor(a->inputs[i], "input", i, a, device);
    for (size_t i = 0; i < a->output_count && bad.empty(); ++i) bad = tensor(a->outputs[i], "output", i, a, device);
    return bad;
  }

  std::string check(const hal_layer_call_t& c) {
    plugin_ = c.plugin;
    switch (c.entry) {
      case HAL_LAYER_ENTRY_BUFFER_FREE: {
        const void* b = arg<hal_buffer_t*>(c, 0);
        auto it = buffers_.find(b);
        if (it == buffers_.end())
          return "buffer " + ptr(b) + " is not a live buffer (a double free, or never allocated) (rule live-handle)";
        for (const auto& [stream, at] : it->second.uses) {
          auto s = streams_.find(stream);
          if (s != streams_.end() && s->second.completed < at)
            return "buffer " + ptr(b) + " is freed while stream " + ptr(stream) + " may still use it (work #" +
                   std::to_string(at) + " on that stream uses it; completed so far: #" +
                   std::to_string(s->second.completed) +
                   "; synchronise the stream or an event recorded after that work first) (rule stream-order)";
        }
        return {};
      }
      case HAL_LAYER_ENTRY_BUFFER_GET_INFO:
        return live_buffer(arg<hal_buffer_t*>(c, 0), "buffer");
      case HAL_LAYER_ENTRY_COPY_HOST_TO_DEVICE:
      case HAL_LAYER_ENTRY_BUFFER_FILL: {
        std::string bad;
        const BufferState* b = live(arg<hal_buffer_t*>(c, 0), "destination buffer", &bad);
        if (b != nullptr) bad = live_stream(arg<hal_stream_t*>(c, 4), "stream", b->device);
        if (b != nullptr && bad.empty())
          bad = range(*b, arg<uint64_t>(c, 1), arg<uint64_t>(c, c.entry == HAL_LAYER_ENTRY_BUFFER_FILL ? 2 : 3),
                      "destination");
        return bad;
      }
      case HAL_LAYER_ENTRY_COPY_DEVICE_TO_HOST: {
        std::string bad;
        const BufferState* b = live(arg<hal_buffer_t*>(c, 1), "source buffer", &bad);
        if (b != nullptr) bad = live_stream(arg<hal_stream_t*>(c, 4), "stream", b->device);
        if (b != nullptr && bad.empty()) bad = range(*b, arg<uint64_t>(c, 2), arg<uint64_t>(c, 3), "source");
        return bad;
      }
      case HAL_LAYER_ENTRY_COPY_DEVICE_TO_DEVICE: {
        const uint64_t size = arg<uint64_t>(c, 4);
        std::string bad;
        const BufferState* dst = live(arg<hal_buffer_t*>(c, 0), "destination buffer", &bad);
        const BufferState* src = dst != nullptr ? live(arg<hal_buffer_t*>(c, 2), "source buffer", &bad) : nullptr;
        if (src != nullptr) bad = live_stream(arg<hal_stream_t*>(c, 5), "stream", dst->device);
        if (src != nullptr && bad.empty()) bad = range(*dst, arg<uint64_t>(c, 1), size, "destination");
        if (src != nullptr && bad.empty()) bad = range(*src, arg<uint64_t>(c, 3), size, "source");
        return bad;
      }
      case HAL_LAYER_ENTRY_HOST_FREE: {
        auto it = host_.find(arg<void*>(c, 1));
        if (it == host_.end())
          return "pointer " + ptr(arg<void*>(c, 1)) +
                 " did not come from host_allocate or was freed already (rule live-handle)";
        if (it->second != arg<hal_device_t*>(c, 0))
          return "pointer " + ptr(it->first) + " was allocated on " + names_.device(it->second) + " (rule same-device)";
        return {};
      }
      case HAL_LAYER_ENTRY_STREAM_DESTROY:
      case HAL_LAYER_ENTRY_STREAM_SYNCHRONIZE:
      case HAL_LAYER_ENTRY_STREAM_QUERY:
      case HAL_LAYER_ENTRY_STREAM_ENQUEUE_HOST_FUNC: {
        const void* s = arg<hal_stream_t*>(c, 0);
        if (s == nullptr) return "stream is NULL (rule live-handle)";
        return live_stream(s, "stream");
      }
      case HAL_LAYER_ENTRY_STREAM_WAIT_EVENT: {
        std::string bad = arg<hal_stream_t*>(c, 0) == nullptr ? "stream is NULL (rule live-handle)"
                                                               : live_stream(arg<hal_stream_t*>(c, 0), "stream");
        return bad.empty() ? live_event(arg<hal_event_t*>(c, 1), "event") : bad;
      }
      case HAL_LAYER_ENTRY_EVENT_DESTROY:
      case HAL_LAYER_ENTRY_EVENT_QUERY:
      case HAL_LAYER_ENTRY_EVENT_SYNCHRONIZE:
        return live_event(arg<hal_event_t*>(c, 0), "event");
      case HAL_LAYER_ENTRY_EVENT_RECORD: {
        std::string bad = live_event(arg<hal_event_t*>(c, 0), "event");
        if (bad.empty() && arg<hal_stream_t*>(c, 1) == nullptr) return "stream is NULL (rule live-handle)";
        return bad.empty() ? live_stream(arg<hal_stream_t*>(c, 1), "stream") : bad;
      }
      case HAL_LAYER_ENTRY_EVENT_ELAPSED_TIME: {
        std::string bad = live_event(arg<hal_event_t*>(c, 0), "start event");
        return bad.empty() ? live_event(arg<hal_event_t*>(c, 1), "end event") : bad;
      }
      case HAL_LAYER_ENTRY_OP_CHECK:
        return op_args(arg<const hal_op_args_t*>(c, 1), arg<hal_device_t*>(c, 0), false);
      case HAL_LAYER_ENTRY_OP_LAUNCH: {
        const void* device = arg<hal_device_t*>(c, 0);
        std::string bad = live_stream(arg<hal_stream_t*>(c, 2), "stream", device);
        return bad.empty() ? op_args(arg<const hal_op_args_t*>(c, 1), device, true) : bad;
      }
      case HAL_LAYER_ENTRY_EXECUTABLE_DESTROY:
      case HAL_LAYER_ENTRY_EXECUTABLE_GET_INFO:
        if (executables_.count(arg<hal_executable_t*>(c, 0)) == 0)
          return "executable " + ptr(arg<hal_executable_t*>(c, 0)) +
                 " is not a live executable (destroyed, or never compiled) (rule live-handle)";
        return {};
      case HAL_LAYER_ENTRY_EXECUTABLE_EXECUTE: {
        auto it = executables_.find(arg<hal_executable_t*>(c, 0));
        if (it == executables_.end())
          return "executable " + ptr(arg<hal_executable_t*>(c, 0)) +
                 " is not a live executable (destroyed, or never compiled) (rule live-handle)";
        const void* device = it->second;
        std::string bad = live_stream(arg<hal_stream_t*>(c, 5), "stream", device);
        const hal_tensor_t* const* in = arg<const hal_tensor_t* const*>(c, 1);
        const hal_tensor_t* const* out = arg<const hal_tensor_t* const*>(c, 3);
        for (size_t i = 0; bad.empty() && in != nullptr && i < arg<size_t>(c, 2); ++i)
          bad = tensor(in[i], "input", i, nullptr, device);
        for (size_t i = 0; bad.empty() && out != nullptr && i < arg<size_t>(c, 4); ++i)
          bad = tensor(out[i], "output", i, nullptr, device);
        return bad;
      }
      case HAL_LAYER_ENTRY_GRAPH_PARTITION:
      case HAL_LAYER_ENTRY_GRAPH_COMPILE: {
        const hal_graph_t* g = arg<const hal_graph_t*>(c, 1);
        if (g == nullptr) return "graph is NULL (rule struct-size)";
        return chain(g->next, "hal_graph_t");
      }
      default:
        return {};
    }
  }

  // Marks buffers of a queued operation as used by STREAM from now on.
  void use(const void* stream, std::initializer_list<const void*> buffers) {
    if (stream == nullptr) return;
    auto s = streams_.find(stream);
    if (s == streams_.end()) return;
    const uint64_t at = ++s->second.queued;
    for (const void* b : buffers) {
      auto it = buffers_.find(b);
      if (it != buffers_.end()) it->second.uses[stream] = at;
    }
  }
  void use_tensors(const void* stream, const hal_tensor_t* const* ts, size_t n) {
    for (size_t i = 0; ts != nullptr && i < n; ++i)
      if (ts[i] != nullptr && ts[i]->buffer != nullptr) use(stream, {ts[i]->buffer});
  }
  void complete(const void* stream, uint64_t upto) {
    auto s = streams_.find(stream);
    if (s != streams_.end() && s->second.completed < upto) s->second.completed = upto;
  }

  void record(const hal_layer_call_t& c) {
    switch (c.entry) {
      case HAL_LAYER_ENTRY_BUFFER_ALLOCATE:
        buffers_[*arg<hal_buffer_t**>(c, 3)] = {arg<hal_device_t*>(c, 0), arg<uint64_t>(c, 1), {}};
        break;
      case HAL_LAYER_ENTRY_BUFFER_FREE:
        buffers_.erase(arg<hal_buffer_t*>(c, 0));
        break;
      case HAL_LAYER_ENTRY_HOST_ALLOCATE:
        host_[*arg<void**>(c, 2)] = arg<hal_device_t*>(c, 0);
        break;
      case HAL_LAYER_ENTRY_HOST_FREE:
        host_.erase(arg<void*>(c, 1));
        break;
      case HAL_LAYER_ENTRY_COPY_HOST_TO_DEVICE:
      case HAL_LAYER_ENTRY_BUFFER_FILL:
        use(arg<hal_stream_t*>(c, 4), {arg<hal_buffer_t*>(c, 0)});
        break;
      case HAL_LAYER_ENTRY_COPY_DEVICE_TO_HOST:
        use(arg<hal_stream_t*>(c, 4), {arg<hal_buffer_t*>(c, 1)});
        break;
      case HAL_LAYER_ENTRY_COPY_DEVICE_TO_DEVICE:
        use(arg<hal_stream_t*>(c, 5), {arg<hal_buffer_t*>(c, 0), arg<hal_buffer_t*>(c, 2)});
        break;
      case HAL_LAYER_ENTRY_OP_LAUNCH: {
        const hal_op_args_t* a = arg<const hal_op_args_t*>(c, 1);
        use_tensors(arg<hal_stream_t*>(c, 2), a->inputs, a->input_count);
        use_tensors(arg<hal_stream_t*>(c, 2), a->outputs, a->output_count);
        break;
      }
      case HAL_LAYER_ENTRY_EXECUTABLE_EXECUTE:
        use_tensors(arg<hal_stream_t*>(c, 5), arg<const hal_tensor_t* const*>(c, 1), arg<size_t>(c, 2));
        use_tensors(arg<hal_stream_t*>(c, 5), arg<const hal_tensor_t* const*>(c, 3), arg<size_t>(c, 4));
        break;
      case HAL_LAYER_ENTRY_STREAM_CREATE:
        streams_[*arg<hal_stream_t**>(c, 2)] = {arg<hal_device_t*>(c, 0)};
        break;
      case HAL_LAYER_ENTRY_STREAM_DESTROY: {
        const void* s = arg<hal_stream_t*>(c, 0);
        streams_.erase(s);  // it waited for its work: no use of it is pending
        break;
      }
      case HAL_LAYER_ENTRY_STREAM_SYNCHRONIZE: {
        auto s = streams_.find(arg<hal_stream_t*>(c, 0));
        if (s != streams_.end()) s->second.completed = s->second.queued;
        break;
      }
      case HAL_LAYER_ENTRY_STREAM_QUERY: {
        auto s = streams_.find(arg<hal_stream_t*>(c, 0));
        if (s != streams_.end() && *arg<bool*>(c, 1)) s->second.completed = s->second.queued;
        break;
      }
      case HAL_LAYER_ENTRY_EVENT_CREATE:
        events_[*arg<hal_event_t**>(c, 2)] = {arg<hal_device_t*>(c, 0)};
        break;
      case HAL_LAYER_ENTRY_EVENT_DESTROY:
        events_.erase(arg<hal_event_t*>(c, 0));
        break;
      case HAL_LAYER_ENTRY_EVENT_RECORD: {
        const void* s = arg<hal_stream_t*>(c, 1);
        auto e = events_.find(arg<hal_event_t*>(c, 0));
        auto st = streams_.find(s);
        if (e != events_.end() && st != streams_.end()) e->second.stream = s, e->second.at = st->second.queued;
        break;
      }
      case HAL_LAYER_ENTRY_EVENT_SYNCHRONIZE:
      case HAL_LAYER_ENTRY_EVENT_QUERY: {
        auto e = events_.find(arg<hal_event_t*>(c, 0));
        const bool done = c.entry == HAL_LAYER_ENTRY_EVENT_SYNCHRONIZE || *arg<bool*>(c, 1);
        if (e != events_.end() && done && e->second.stream != nullptr) complete(e->second.stream, e->second.at);
        break;
      }
      case HAL_LAYER_ENTRY_GRAPH_COMPILE:
        executables_[*arg<hal_executable_t**>(c, 2)] = arg<hal_device_t*>(c, 0);
        break;
      case HAL_LAYER_ENTRY_EXECUTABLE_DESERIALIZE: {
        const auto* a = arg<const hal_executable_deserialize_args_t*>(c, 0);
        if (a != nullptr && a->out_executable != nullptr) executables_[*a->out_executable] = a->device;
        break;
      }
      case HAL_LAYER_ENTRY_EXECUTABLE_DESTROY:
        executables_.erase(arg<hal_executable_t*>(c, 0));
        break;
      default:
        break;
    }
  }

  bool abort_ = false;
  CallNames names_;
  std::mutex mutex_;
  const char* plugin_ = "";
  std::unordered_map<const void*, BufferState> buffers_;
  std::unordered_map<const void*, StreamState> streams_;
  std::unordered_map<const void*, EventState> events_;
  std::unordered_map<const void*, const void*> executables_;  // -> device
  std::unordered_map<const void*, const void*> host_;         // host_allocate pointer -> device
};

}  // namespace

const hal_layer_api_t* validation_layer_api() {
  return builtin_api<ValidationLayer>("validation", "checks handles, devices, struct sizes, extents and stream "
                                                    "order; violations are errors naming the rule");
}

}  // namespace hal::detail
