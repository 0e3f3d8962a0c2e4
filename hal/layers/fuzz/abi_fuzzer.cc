// libFuzzer target: the C ABI entry points through the validation layer.
// The CPU plugin (two devices) is loaded once with layers = ["validation"];
// each input is a sequence of calls through the plugin's tables as the layer
// wraps them: buffer allocate/free/info, copies and fills, host memory,
// streams, events, op check and launch with random tensor descriptors
// (dtype, rank, shape, strides, offset, struct_size, buffers) and
// attributes. Handles come from small tables, so calls name live,
// destroyed, NULL and garbage handles. Every call must return (an error is
// fine); a crash, hang, leak or sanitizer report is a bug, and so is a
// release of a handle that was not live succeeding. After each input the
// fuzzer releases whatever is still live (streams first).
// Built only with -DHAL_BUILD_FUZZ=ON and clang; the kept corpus is fuzz/corpus/.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "hal/common/op_catalog.hpp"
#include "testing/fuzz_util.hpp"

namespace {

using hal::testing::fuzz_fail;

constexpr size_t kSlots = 6;                 // handles of each kind the input can name
constexpr uint64_t kMaxAlloc = 1 << 20;      // bytes; keeps runs fast
constexpr size_t kMaxCalls = 64;             // per input
constexpr size_t kPad = 64;                  // bytes after structs whose struct_size may exceed sizeof

struct Plugin {
  std::shared_ptr<hal::Runtime> rt;
  const hal_memory_api_t* mem;
  const hal_stream_api_t* streams;
  const hal_op_api_t* ops;
  std::vector<hal_device_t*> devices;
  struct Op {
    hal_op_id_t id;
    const hal::common::OpSchema* schema;  // nullptr for a vendor op
  };
  std::vector<Op> resolved;  // every op of the plugin
};

Plugin& plugin() {
  static Plugin* p = [] {
    auto* q = new Plugin;  // never destroyed: the plugin may be gone by exit
    q->rt = hal::testing::fuzz_cpu_runtime("\"validation\"", 2);
    const hal::Plugin& pl = *q->rt->plugins().at(0);
    q->mem = &pl.memory_api();
    q->streams = &pl.stream_api();
    q->ops = &pl.op_api();
    for (const auto& d : q->rt->devices()) q->devices.push_back(d->handle());
    uint32_t count = 0;
    if (q->ops->op_count(pl.handle(), &count) != nullptr) fuzz_fail("op_count failed");
    for (uint32_t i = 0; i < count; ++i) {
      const char* name = nullptr;
      hal_op_id_t id = 0;
      if (q->ops->op_get_name(pl.handle(), i, &name) != nullptr || q->ops->op_resolve(pl.handle(), name, &id) != nullptr)
        fuzz_fail("op_get_name/op_resolve failed for op " + std::to_string(i));
      q->resolved.push_back({id, hal::common::catalog::find_schema(name)});
    }
    return q;
  }();
  return *p;
}

// HAL_FUZZ_VERBOSE=1: print each call (to triage a crash input).
bool verbose() {
  static const bool on = std::getenv("HAL_FUZZ_VERBOSE") != nullptr;
  return on;
}

// Releases a status after checking it is well formed.
void consume(hal_status_t* s) {
  if (s == nullptr) return;
  if (s->code == HAL_STATUS_OK || s->code >= HAL_STATUS_CODE_COUNT_ || s->message == nullptr || s->destroy == nullptr)
    fuzz_fail("malformed status");
  (void)std::strlen(s->message);  // readable to its NUL
  s->destroy(s);
}

// Handles of one kind: the slots the input names (live, released or NULL)
// and the set of live ones.
template <class T>
struct Handles {
  std::array<T*, kSlots> slot{};
  std::unordered_set<T*> live;
  void made(size_t i, T* h) {
    slot[i] = h;
    live.insert(h);
  }
  // A successful release of H: it must have been live.
  void released(T* h, const char* what) {
    if (live.erase(h) == 0) fuzz_fail(std::string(what) + " of a handle that was not live succeeded");
  }
};

class Interpreter {
 public:
  Interpreter(const uint8_t* data, size_t size) : in_(data, size), p_(plugin()) {}
  ~Interpreter() { release_all(); }

  void run() {
    for (size_t n = 0; n < kMaxCalls && in_.remaining_bytes() > 0; ++n) call();
  }

 private:
  hal_device_t* device() { return p_.devices[in_.ConsumeIntegralInRange<size_t>(0, p_.devices.size() - 1)]; }
  size_t slot() { return in_.ConsumeIntegralInRange<size_t>(0, kSlots - 1); }
  // A slot's handle (live, released or never set), NULL, or garbage.
  template <class T>
  T* pick(const Handles<T>& h) {
    const uint8_t c = in_.ConsumeIntegralInRange<uint8_t>(0, kSlots + 1);
    if (c < kSlots) return h.slot[c];
    if (c == kSlots) return nullptr;
    return reinterpret_cast<T*>(static_cast<uintptr_t>(in_.ConsumeIntegral<uint64_t>()));
  }
  // Sizes and offsets: mostly small, sometimes at the edges of the types.
  uint64_t u64(uint64_t small) {
    switch (in_.ConsumeIntegralInRange<int>(0, 7)) {
      case 0: return std::numeric_limits<uint64_t>::max() - in_.ConsumeIntegralInRange<uint64_t>(0, 16);
      case 1: return uint64_t{1} << in_.ConsumeIntegralInRange<int>(0, 63);
      case 2: return in_.ConsumeIntegral<uint64_t>();
      default: return in_.ConsumeIntegralInRange<uint64_t>(0, small);
    }
  }
  int64_t i64(int64_t small) {
    switch (in_.ConsumeIntegralInRange<int>(0, 9)) {
      case 0: return std::numeric_limits<int64_t>::min() + in_.ConsumeIntegralInRange<int64_t>(0, 1);
      case 1: return std::numeric_limits<int64_t>::max() - in_.ConsumeIntegralInRange<int64_t>(0, 1);
      case 2: return -in_.ConsumeIntegralInRange<int64_t>(1, 3);
      case 3: return int64_t{1} << in_.ConsumeIntegralInRange<int>(16, 62);
      default: return in_.ConsumeIntegralInRange<int64_t>(0, small);
    }
  }
  // A struct_size for a struct of SIZE bytes followed by kPad spare bytes.
  size_t struct_size(size_t size) {
    switch (in_.ConsumeIntegralInRange<int>(0, 9)) {
      case 0: return in_.ConsumeIntegralInRange<size_t>(0, size - 1);
      case 1: return size + in_.ConsumeIntegralInRange<size_t>(1, kPad);
      default: return size;
    }
  }
  // Host memory for copies: CAP bytes, so a host size is at most that.
  uint64_t host_size() { return in_.ConsumeIntegralInRange<uint64_t>(0, in_.ConsumeBool() ? 64 : host_.size()); }

  void call() {
    const hal_memory_api_t& m = *p_.mem;
    const hal_stream_api_t& s = *p_.streams;
    const int kind = in_.ConsumeIntegralInRange<int>(0, 21);
    if (verbose()) std::fprintf(stderr, "call kind %d\n", kind);
    switch (kind) {
      case 0: {  // buffer_allocate
        const size_t i = slot();
        // Up to kMaxAlloc, or so large that the device refuses it before allocating.
        const uint64_t size = in_.ConsumeIntegralInRange(0, 7) != 0 ? in_.ConsumeIntegralInRange<uint64_t>(0, kMaxAlloc)
                                                                    : std::numeric_limits<uint64_t>::max() - in_.ConsumeIntegralInRange<uint64_t>(0, 16);
        // Powers of two capped at 64 KiB: ASan's allocator maps (and
        // poisons) alignment-sized regions, and fails a CHECK near 2^63.
        uint64_t align = in_.ConsumeBool() ? 0 : u64(256);
        if ((align & (align - 1)) == 0) align = std::min<uint64_t>(align, 1 << 16);
        hal_device_t* d = device();
        hal_buffer_t* b = nullptr;
        hal_buffer_t** out = in_.ConsumeIntegralInRange(0, 15) == 0 ? nullptr : &b;
        hal_status_t* st = m.buffer_allocate(d, size, align, out);
        if (st == nullptr && b != nullptr) buffers_.made(i, b);
        consume(st);
        break;
      }
      case 1: {  // buffer_free
        hal_buffer_t* b = pick(buffers_);
        hal_status_t* st = m.buffer_free(b);
        if (st == nullptr) buffers_.released(b, "buffer_free");
        consume(st);
        break;
      }
      case 2: {  // buffer_get_info
        struct {
          hal_buffer_info_t info;
          char pad[kPad];
        } out{};
        out.info.struct_size = struct_size(sizeof(out.info));
        consume(m.buffer_get_info(pick(buffers_), &out.info));
        break;
      }
      case 3: {  // copy_host_to_device
        hal_buffer_t* b = pick(buffers_);
        const uint64_t off = u64(4096), size = host_size();
        consume(m.copy_host_to_device(b, off, host_.data(), size, pick(streams_)));
        break;
      }
      case 4: {  // copy_device_to_host
        hal_buffer_t* b = pick(buffers_);
        const uint64_t off = u64(4096), size = host_size();
        consume(m.copy_device_to_host(host_.data(), b, off, size, pick(streams_)));
        break;
      }
      case 5: {  // copy_device_to_device
        hal_buffer_t* dst = pick(buffers_);
        const uint64_t dst_off = u64(4096);
        hal_buffer_t* src = pick(buffers_);
        const uint64_t src_off = u64(4096), size = u64(kMaxAlloc);
        consume(m.copy_device_to_device(dst, dst_off, src, src_off, size, pick(streams_)));
        break;
      }
      case 6: {  // buffer_fill
        hal_buffer_t* b = pick(buffers_);
        const uint64_t off = u64(4096), size = u64(kMaxAlloc);
        consume(m.buffer_fill(b, off, size, in_.ConsumeIntegral<uint8_t>(), pick(streams_)));
        break;
      }
      case 7: {  // host_allocate
        const size_t i = slot();
        void* h = nullptr;
        hal_device_t* d = device();
        hal_status_t* st = m.host_allocate(d, in_.ConsumeIntegralInRange<uint64_t>(0, 4096), &h);
        if (st == nullptr) host_ptrs_.made(i, static_cast<char*>(h)), host_device_[h] = d;
        consume(st);
        break;
      }
      case 8: {  // host_free
        char* h = pick(host_ptrs_);
        hal_device_t* d = device();
        hal_status_t* st = m.host_free(d, h);
        if (st == nullptr) host_ptrs_.released(h, "host_free");
        consume(st);
        break;
      }
      case 9: {  // memory_get_info
        uint64_t free_bytes = 0, total = 0;
        hal_device_t* d = device();
        const bool null_out = in_.ConsumeIntegralInRange(0, 7) == 0;
        consume(m.memory_get_info(d, null_out ? nullptr : &free_bytes, &total));
        break;
      }
      case 10: {  // stream_create
        const size_t i = slot();
        hal_stream_t* st_out = nullptr;
        hal_device_t* d = device();
        const uint32_t flags = in_.ConsumeIntegralInRange(0, 7) == 0 ? in_.ConsumeIntegral<uint32_t>() : 0;
        hal_status_t* st = s.stream_create(d, flags, &st_out);
        if (st == nullptr && st_out != nullptr) streams_.made(i, st_out);
        consume(st);
        break;
      }
      case 11: {  // stream_destroy
        hal_stream_t* h = pick(streams_);
        hal_status_t* st = s.stream_destroy(h);
        if (st == nullptr) streams_.released(h, "stream_destroy");
        consume(st);
        break;
      }
      case 12:  // stream_synchronize
        consume(s.stream_synchronize(pick(streams_)));
        break;
      case 13: {  // stream_query
        bool idle = false;
        hal_stream_t* h = pick(streams_);
        consume(s.stream_query(h, in_.ConsumeIntegralInRange(0, 7) == 0 ? nullptr : &idle));
        break;
      }
      case 14: {  // stream_enqueue_host_func
        hal_stream_t* h = pick(streams_);
        const hal_host_func_t fn = in_.ConsumeIntegralInRange(0, 7) == 0 ? nullptr : +[](void*) {};
        consume(s.stream_enqueue_host_func(h, fn, nullptr));
        break;
      }
      case 15: {  // event_create
        const size_t i = slot();
        hal_event_t* e = nullptr;
        hal_status_t* st = s.event_create(device(), 0, &e);
        if (st == nullptr && e != nullptr) events_.made(i, e);
        consume(st);
        break;
      }
      case 16: {  // event_destroy
        hal_event_t* e = pick(events_);
        hal_status_t* st = s.event_destroy(e);
        if (st == nullptr) events_.released(e, "event_destroy");
        consume(st);
        break;
      }
      case 17: {  // event_record / stream_wait_event
        hal_event_t* e = pick(events_);
        hal_stream_t* h = pick(streams_);
        consume(in_.ConsumeBool() ? s.event_record(e, h) : s.stream_wait_event(h, e));
        break;
      }
      case 18: {  // event_query / event_synchronize
        hal_event_t* e = pick(events_);
        bool done = false;
        consume(in_.ConsumeBool() ? s.event_query(e, &done) : s.event_synchronize(e));
        break;
      }
      case 19: {  // event_elapsed_time
        hal_event_t* a = pick(events_);
        hal_event_t* b = pick(events_);
        uint64_t ns = 0;
        consume(s.event_elapsed_time(a, b, &ns));
        break;
      }
      default:  // op_check / op_launch
        op_call();
        break;
    }
  }

  // One tensor descriptor; storage lives in the Interpreter until the call returns.
  struct TensorStore {
    struct {
      hal_tensor_t t;
      char pad[kPad];
    } s{};
    std::vector<int64_t> shape, strides;
  };
  const hal_tensor_t* tensor(const TensorStore* previous) {
    tensors_.emplace_back();
    TensorStore& ts = tensors_.back();
    hal_tensor_t& t = ts.s.t;
    t.struct_size = struct_size(sizeof(t));
    t.buffer = pick(buffers_);
    t.byte_offset = in_.ConsumeBool() ? 0 : u64(256);
    t.dtype = in_.ConsumeIntegralInRange<uint32_t>(0, 3) == 0 ? in_.ConsumeIntegralInRange<uint32_t>(0, HAL_DTYPE_COUNT_ + 1)
                                                               : HAL_DTYPE_FLOAT32;
    if (previous != nullptr && in_.ConsumeBool()) {  // ops mostly want equal shapes
      ts.shape = previous->shape;
      t.rank = previous->s.t.rank;
    } else {
      t.rank = in_.ConsumeIntegralInRange<uint32_t>(0, 15) == 0 ? in_.ConsumeIntegral<uint32_t>()
                                                                 : in_.ConsumeIntegralInRange<uint32_t>(0, 4);
      // Exactly RANK entries (at most 16): a reader past them is caught by ASan.
      ts.shape.resize(std::min<uint32_t>(t.rank, 16));
      for (int64_t& d : ts.shape) d = i64(4);
    }
    if (in_.ConsumeIntegralInRange(0, 3) == 0) {
      ts.strides.resize(ts.shape.size());
      for (int64_t& d : ts.strides) d = i64(8);
    }
    const bool null_shape = t.rank > 0 && in_.ConsumeIntegralInRange(0, 31) == 0;  // an ABI violation
    t.shape = ts.shape.empty() || null_shape ? nullptr : ts.shape.data();
    t.strides = ts.strides.empty() ? nullptr : ts.strides.data();
    return &t;
  }

  void op_call() {
    const bool known = !p_.resolved.empty() && in_.ConsumeIntegralInRange(0, 15) != 0;
    const Plugin::Op op = known ? p_.resolved[in_.ConsumeIntegralInRange<size_t>(0, p_.resolved.size() - 1)]
                                : Plugin::Op{in_.ConsumeIntegral<hal_op_id_t>(), nullptr};
    tensors_.clear();
    tensors_.reserve(2 * 8);  // pointers into it stay valid
    auto list = [&](size_t want) {
      std::vector<const hal_tensor_t*> out;
      const size_t n = in_.ConsumeIntegralInRange(0, 3) == 0 ? in_.ConsumeIntegralInRange<size_t>(0, 8) : want;
      for (size_t i = 0; i < std::min<size_t>(n, 8); ++i)
        out.push_back(in_.ConsumeIntegralInRange(0, 15) == 0 ? nullptr : tensor(tensors_.empty() ? nullptr : &tensors_.back()));
      return out;
    };
    std::vector<const hal_tensor_t*> inputs = list(op.schema ? op.schema->input_count : 2);
    std::vector<const hal_tensor_t*> outputs = list(op.schema ? op.schema->output_count : 1);

    // Attributes: the op's own names (any type and value), or an unknown one.
    const size_t attr_count = in_.ConsumeIntegralInRange<size_t>(0, 3);
    std::vector<hal_attr_t> attrs(attr_count);
    std::vector<std::vector<int64_t>> ints(attr_count);
    std::vector<std::vector<double>> floats(attr_count);
    for (size_t i = 0; i < attr_count; ++i) {
      hal_attr_t& a = attrs[i];
      a.struct_size = in_.ConsumeIntegralInRange(0, 15) == 0 ? in_.ConsumeIntegralInRange<size_t>(0, sizeof(a))
                                                              : sizeof(a);
      a.name = op.schema && op.schema->attr_count > 0 && in_.ConsumeIntegralInRange(0, 7) != 0
                   ? op.schema->attrs[in_.ConsumeIntegralInRange<size_t>(0, op.schema->attr_count - 1)].name
                   : "no_such_attr";
      a.type = in_.ConsumeIntegralInRange<uint32_t>(0, 8);
      switch (a.type) {
        case HAL_ATTR_TYPE_FLOAT: a.value.f = in_.ConsumeFloatingPoint<double>(); break;
        case HAL_ATTR_TYPE_STRING: a.value.s = in_.ConsumeBool() ? "" : "mean"; break;
        case HAL_ATTR_TYPE_INTS:
          ints[i].resize(in_.ConsumeIntegralInRange<size_t>(0, 8));
          for (int64_t& v : ints[i]) v = in_.ConsumeBool() ? i64(4) - 2 : i64(4);
          a.value.ints = ints[i].data();
          a.count = ints[i].size();
          break;
        case HAL_ATTR_TYPE_FLOATS:
          floats[i].resize(in_.ConsumeIntegralInRange<size_t>(0, 8));
          for (double& v : floats[i]) v = in_.ConsumeFloatingPoint<double>();
          a.value.floats = floats[i].data();
          a.count = floats[i].size();
          break;
        default: a.value.i = in_.ConsumeBool() ? i64(4) - 2 : i64(20); break;
      }
    }

    // An extension chain: absent, or two elements that may be malformed or a cycle.
    std::array<hal_extension_base_t, 2> chain{};
    for (hal_extension_base_t& e : chain) {
      e.struct_size = in_.ConsumeIntegralInRange<size_t>(0, sizeof(e));
      e.type = in_.ConsumeIntegral<uint32_t>();
    }
    chain[0].next = in_.ConsumeBool() ? &chain[1] : nullptr;
    chain[1].next = in_.ConsumeBool() ? &chain[0] : nullptr;

    struct {
      hal_op_args_t a;
      char pad[kPad];
    } args{};
    args.a.struct_size = struct_size(sizeof(args.a));
    args.a.next = in_.ConsumeIntegralInRange(0, 7) == 0 ? &chain[0] : nullptr;
    args.a.op = op.id;
    const bool null_arrays = in_.ConsumeIntegralInRange(0, 31) == 0;  // counts without arrays: an ABI violation
    args.a.inputs = null_arrays || inputs.empty() ? nullptr : inputs.data();
    args.a.input_count = inputs.size();
    args.a.outputs = null_arrays || outputs.empty() ? nullptr : outputs.data();
    args.a.output_count = outputs.size();
    args.a.attrs = attrs.empty() ? nullptr : attrs.data();
    args.a.attr_count = attrs.size();
    hal_device_t* d = device();
    if (verbose()) {
      std::fprintf(stderr, "  op %s: %zu inputs, %zu outputs, %zu attrs\n", op.schema ? op.schema->name : "(unknown id)",
                   inputs.size(), outputs.size(), attrs.size());
      for (const hal_tensor_t* t : tensors_ptrs(inputs, outputs)) {
        std::fprintf(stderr, "    tensor dtype %u rank %u offset %llu shape", t->dtype, t->rank,
                     static_cast<unsigned long long>(t->byte_offset));
        for (uint32_t i = 0; t->shape != nullptr && i < std::min<uint32_t>(t->rank, 16); ++i)
          std::fprintf(stderr, " %lld/%lld", static_cast<long long>(t->shape[i]),
                       static_cast<long long>(t->strides ? t->strides[i] : -1));
        std::fprintf(stderr, "\n");
      }
    }
    if (in_.ConsumeIntegralInRange(0, 3) == 0) {
      consume(p_.ops->op_check(d, &args.a));
    } else {
      hal_stream_t* stream = pick(streams_);
      consume(p_.ops->op_launch(d, &args.a, stream));
    }
  }

  static std::vector<const hal_tensor_t*> tensors_ptrs(const std::vector<const hal_tensor_t*>& a,
                                                       const std::vector<const hal_tensor_t*>& b) {
    std::vector<const hal_tensor_t*> all;
    for (const auto* list : {&a, &b})
      for (const hal_tensor_t* t : *list)
        if (t != nullptr) all.push_back(t);
    return all;
  }

  // Releases everything still live; each release must succeed.
  void release_all() {
    const hal_memory_api_t& m = *p_.mem;
    const hal_stream_api_t& s = *p_.streams;
    for (hal_stream_t* h : streams_.live) {
      consume(s.stream_synchronize(h));  // may report an asynchronous failure
      if (hal_status_t* st = s.stream_destroy(h)) fuzz_fail(std::string("cleanup: stream_destroy: ") + st->message);
    }
    for (hal_event_t* e : events_.live)
      if (hal_status_t* st = s.event_destroy(e)) fuzz_fail(std::string("cleanup: event_destroy: ") + st->message);
    for (hal_buffer_t* b : buffers_.live)
      if (hal_status_t* st = m.buffer_free(b)) fuzz_fail(std::string("cleanup: buffer_free: ") + st->message);
    for (char* h : host_ptrs_.live)
      if (hal_status_t* st = m.host_free(host_device_.at(h), h))
        fuzz_fail(std::string("cleanup: host_free: ") + st->message);
  }

  FuzzedDataProvider in_;
  Plugin& p_;
  Handles<hal_buffer_t> buffers_;
  Handles<hal_stream_t> streams_;
  Handles<hal_event_t> events_;
  Handles<char> host_ptrs_;
  std::unordered_map<void*, hal_device_t*> host_device_;  // host_allocate pointer -> its device
  std::vector<TensorStore> tensors_;
  static inline std::vector<char> host_ = std::vector<char>(kMaxAlloc);  // source and target of host copies
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Interpreter(data, size).run();
  return 0;
}
