// torch_hal backend: the HAL runtime as PyTorch's PrivateUse1 device "hal".
//
// Devices hal:0..N-1 are the hal::Runtime's devices in its order (hal.toml
// via HAL_CONFIG, else default discovery; torch_hal.init() overrides before
// first use). The runtime is created at first use, not at import, so a
// missing plugin is reported where the user first touches the device.
//
// Tensor memory is a hal::Buffer from the device's caching allocator. The
// DataPtr's address is a unique, never-dereferenced token (the memory need
// not be host-addressable); the Buffer is found from the DataPtr's context,
// and every byte moves through hal::Buffer copies or catalog ops.
#ifndef TORCH_HAL_CSRC_BACKEND_HPP_
#define TORCH_HAL_CSRC_BACKEND_HPP_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Storage.h>
#include <c10/core/Stream.h>

#include <cstdint>
#include <initializer_list>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hal/runtime/op.hpp"
#include "hal/runtime/runtime.hpp"

namespace torch_hal {

// ---- runtime ----

// Replaces the runtime's sources before first use: CONFIG (a hal.toml path)
// and/or PLUGINS (plugin files; only these load). Throws c10::Error once the
// runtime exists. Thread-safe.
void set_init_options(std::optional<std::string> config, std::vector<std::string> plugins);
// Whether the runtime has been created. Thread-safe.
bool is_initialized() noexcept;
// Creates the runtime on first call. Throws c10::Error when the config is
// broken or no device is available (naming every skipped plugin and why).
hal::Runtime& runtime();
// Number of devices; 0 when the runtime cannot be created (never throws:
// PyTorch calls this from noexcept paths). Creates the runtime.
c10::DeviceIndex device_count() noexcept;
// Device INDEX (hal:INDEX). Throws c10::Error naming how many exist.
const std::shared_ptr<hal::Device>& device(c10::DeviceIndex index);
// For an error on hal:INDEX: "" while it works; once its plugin reported it
// lost, a sentence naming it and the hal:K the user can move work to (its
// hal.toml failover device), for the end of the message.
std::string lost_device_hint(c10::DeviceIndex index);
// The calling thread's current device (default 0) and its setters: checked
// (throws c10::Error for a missing device) and unchecked (the guard's).
c10::DeviceIndex current_device() noexcept;
void set_current_device(c10::DeviceIndex index);
void set_current_device_unchecked(c10::DeviceIndex index) noexcept;

// ---- streams (stream.cc; the device guard and events live there too) ----

// Stream id 0 of each device is its default stream: HAL's synchronous NULL
// stream (a launch or copy has completed when it returns), as PyTorch's
// default stream is ordered before everything queued after it. Ids
// 1..kStreamPoolSize name HAL streams made on first use and handed out
// round-robin by new_stream() (as CUDA's stream pool); they live until exit.
// Work on a pool stream is ordered against the default stream only through
// events (Stream.wait_stream/wait_event), as with PyTorch's CUDA streams.
constexpr int kStreamPoolSize = 8;
// Thread-safe; each throws c10::Error for a missing device, and new_stream
// also when the plugin has no streams.
c10::Stream default_stream(c10::DeviceIndex device);
c10::Stream new_stream(c10::DeviceIndex device);
// The calling thread's current stream on DEVICE (default stream until set).
c10::Stream current_stream(c10::DeviceIndex device);
// Makes S current on its device for the calling thread; returns the old one.
c10::Stream exchange_stream(c10::Stream s);
// The HAL stream behind S (nullptr for a default stream); valid until exit.
const hal::Stream* hal_stream(c10::Stream s);
// hal_stream(current_stream(DEVICE)) without checks (the launch path).
const hal::Stream* current_hal_stream(c10::DeviceIndex device) noexcept;
// Blocks until S (or every stream of DEVICE) has run its queued work;
// reports the first asynchronous failure as c10::Error.
void synchronize_stream(c10::Stream s);
void synchronize_device(c10::DeviceIndex device);

// ---- memory ----

// One tensor allocation: owns the hal::Buffer, lives as the DataPtr's
// context; its deleter releases the Buffer and keeps the object for reuse. TOKEN is the DataPtr address.
struct Allocation {
  hal::Buffer buffer;
  uintptr_t token = 0;
  size_t nbytes = 0;
  c10::DeviceIndex device = 0;
};

// The PrivateUse1 allocator (registered with c10::SetAllocator; a
// c10::DeviceAllocator, so torch.accelerator's memory statistics reach the
// core caching allocator). allocate() uses the current device and its
// current stream; 0 bytes gives an empty DataPtr with no Buffer.
// Thread-safe.
c10::DeviceAllocator* allocator();
// Allocates NBYTES on DEVICE for its current stream. Throws
// c10::OutOfMemoryError (requested and free sizes in the message) or
// c10::Error.
c10::DataPtr allocate_on(c10::DeviceIndex device, size_t nbytes);
// A new dense (contiguous) tensor of SHAPE and DTYPE on hal:DEVICE, as
// at::empty would give it, built here without a trip through the
// dispatcher and a device guard (the mapped kernels' hot path). Errors as
// allocate_on's.
at::Tensor empty_dense(c10::IntArrayRef shape, c10::ScalarType dtype, c10::DeviceIndex device);
// The host allocator behind pin_memory=True (hooks' getPinnedMemoryAllocator)
// and whether P lies in memory it handed out (hooks' isPinnedPtr). The memory
// is ordinary host memory (the HAL has no page-locked host allocation); it
// is "pinned" in PyTorch's sense: it came from this allocator. Thread-safe.
c10::Allocator* pinned_allocator();
bool is_pinned_ptr(const void* p) noexcept;
// The Allocation behind a hal storage (one torch_hal allocated, or one
// sharing another's Allocation: SharedAllocation); nullptr for an empty
// (0-byte) one. Throws c10::Error for any other storage.
Allocation* allocation_of(const c10::Storage& storage);
// The same for a storage's DataPtr P.
Allocation* allocation_of(const c10::DataPtr& p);
// The live Allocation whose token range holds address P, and P's byte
// offset in it; {nullptr, 0} for any other address. Thread-safe.
std::pair<Allocation*, uint64_t> allocation_at(const void* p) noexcept;

// ---- sharing an Allocation (DLPack import, storage.cc) ----

// The context of a DataPtr that shares an Allocation it does not own: a
// storage made by tensor_sharing. Its address is the Allocation's token, so
// every view of it addresses the Buffer as the owner's views do. RELEASE
// lets go of what keeps the owner alive (a DLPack capsule's deleter).
struct SharedAllocation {
  Allocation* allocation = nullptr;
  std::function<void()> release;
};
// SharedAllocation's DataPtr deleter: runs RELEASE, deletes the context.
void release_shared_allocation(void* ctx);
// A hal tensor over memory a live hal tensor owns, as a DLPack capsule
// describes it: DATA is an address inside a live Allocation (a hal
// DataPtr's token plus an offset), BYTE_OFFSET is added to it, SIZES and
// STRIDES are in elements (STRIDES nullopt: contiguous), DEVICE is the
// device the capsule names. The new storage spans the whole Allocation, so
// the tensor shares the owner's storage bytes (writes are seen both ways);
// RELEASE runs once the new storage dies and must keep the owner alive until
// then. Throws c10::Error naming what is wrong (DATA is no live hal memory,
// another device, a negative size or stride, an offset not a multiple of
// the element size, a view past the allocation); RELEASE is then not run.
at::Tensor tensor_sharing(const void* data, uint64_t byte_offset, c10::DeviceIndex device, c10::IntArrayRef sizes,
                          std::optional<c10::IntArrayRef> strides, c10::ScalarType dtype, std::function<void()> release);
// The Buffer behind non-empty hal tensor T's storage; throws c10::Error
// naming T when its storage is empty (freed, or resized to 0 as FSDP does).
hal::Buffer& buffer_of(const at::Tensor& t);

// Grows STORAGE to NBYTES (same device), keeping its old bytes. Used by
// resize_ and the hooks' resizePrivateUse1Bytes.
void resize_storage_bytes(const c10::Storage& storage, size_t nbytes);

// ---- tensors as HAL descriptors ----

// HAL dtype of a PyTorch dtype; throws c10::Error for one HAL lacks.
hal_dtype_e to_hal_dtype(c10::ScalarType type);
// The HAL dtype of TYPE, or nullopt when HAL has none (ComplexHalf, Float8...).
std::optional<hal_dtype_e> hal_dtype_of(c10::ScalarType type) noexcept;
// The PyTorch dtype of a HAL dtype; throws c10::Error for one PyTorch lacks.
c10::ScalarType scalar_type_of(hal_dtype_e dtype);
// The strided descriptor of hal tensor T (no copy). T's storage must
// outlive every launch using the view.
hal::TensorView view_of(const at::Tensor& t);
// VIEW made view_of(T) in place: its vectors keep their capacity, so a view
// refilled run after run allocates nothing.
void assign_view(hal::TensorView& view, const at::Tensor& t);
// The same as a TensorRef pointing at T's own sizes and strides (the
// launch hot path: nothing copied). Valid while T lives unchanged.
hal::TensorRef ref_of(const at::Tensor& t);
// The bytes of T's storage its view spans, [begin, end), from its storage
// offset to its last element (T non-empty).
std::pair<int64_t, int64_t> byte_span(const at::Tensor& t);
// Whether A and B are the same view of the same storage (offset, dtype,
// sizes, strides): an exact alias, as in-place ops write.
bool same_view(const at::Tensor& a, const at::Tensor& b);

// The catalog op NAME on DEVICE, resolved once per (device, name) and
// cached. Throws hal::Error (UNIMPLEMENTED when the plugin lacks it).
const hal::OpRunner& op_runner(c10::DeviceIndex device, const std::string& name);

// ---- launches and transfers (transfer.cc) ----
//
// All run on the calling thread's current stream of the device: complete on
// return on the default stream, queued on a pool stream (download then
// waits for it; upload stages its source, so the caller may reuse it).

// Runs catalog op CATALOG on hal:DEV (the cached OpRunner). Every launch of
// the bridge goes through here. Throws hal::Error as OpRunner::launch does.
void launch(c10::DeviceIndex dev, const std::string& catalog, const std::vector<const hal::TensorView*>& inputs,
            const std::vector<const hal::TensorView*>& outputs, const std::vector<hal::Attr>& attrs = {});
// RUNNER's op (from op_runner(DEV, ...)) on TensorRefs (ref_of), on hal:DEV's
// current stream: the mapped kernels' launch.
void launch(const hal::OpRunner& runner, c10::DeviceIndex dev, const std::vector<const hal::TensorRef*>& inputs,
            const std::vector<const hal::TensorRef*>& outputs, const std::vector<hal::Attr>& attrs);
// The same on hal tensors (an undefined input is absent; every tensor
// outlives the call).
void launch(const hal::OpRunner& runner, c10::DeviceIndex dev, c10::ArrayRef<at::Tensor> inputs,
            c10::ArrayRef<at::Tensor> outputs, const std::vector<hal::Attr>& attrs);
// Whether E says the plugin cannot run the call as asked (no such op, a
// dtype or dtype mix it declines): the caller decomposes or falls back.
bool declined(const hal::Error& e) noexcept;
// Throws E as a c10 error "WHAT on hal:DEV (plugin P): <message>": a
// ValueError for INVALID_ARGUMENT, an IndexError for OUT_OF_RANGE (as
// PyTorch's CPU kernels raise them), else a RuntimeError.
[[noreturn]] void raise_plugin_error(const std::string& what, c10::DeviceIndex dev, const hal::Error& e);
// Runs catalog op CATALOG on REF's hal device with INPUTS (undefined =
// absent) into new dense outputs, OUTPUTS[k] = {shape, dtype}, returned in
// order; ATEN ("aten::foo") names the call in explain() records and errors.
// Returns nullopt when the plugin lacks the op or declines the dtypes (the
// caller decomposes or falls back); throws c10 errors naming ATEN for
// anything else (INVALID_ARGUMENT: ValueError, OUT_OF_RANGE: IndexError).
struct OutputSpec {
  std::vector<int64_t> shape;
  c10::ScalarType dtype;
};
std::optional<std::vector<at::Tensor>> run_catalog(const char* aten, const char* catalog, const at::Tensor& ref,
                                                   std::initializer_list<at::Tensor> inputs,
                                                   std::initializer_list<OutputSpec> outputs);
// A contiguous CPU copy of hal tensor T (same dtype).
at::Tensor download(const at::Tensor& t);
// DST (hal) = SRC (CPU), with copy_'s dtype conversion and broadcast done on the CPU side.
void upload(const at::Tensor& src, const at::Tensor& dst);
// DST = SRC on one hal device: a buffer copy when both are dense with one
// dtype and shape, else the catalog's "copy" (dtype, broadcast, strides);
// a plugin without that copy goes through the host (counted as a fallback).
void device_copy(const at::Tensor& src, const at::Tensor& dst);
// Conjugates (CONJ) and/or negates (NEG) hal tensor T's stored elements in
// place, ignoring T's own lazy conj/neg bits (through the host: rare paths).
void apply_math_bits(const at::Tensor& t, bool conj, bool neg);

// ---- random numbers (random.cc) ----

// The default Philox generator of hal:DEVICE (-1: current device), created
// on first use; and a new one. Throw c10::Error for a missing device.
// Callers lock the generator's mutex() around state reads and writes.
const at::Generator& default_generator(c10::DeviceIndex device);
at::Generator new_generator(c10::DeviceIndex device);
// Seeds hal:DEVICE's default generator (DEVICE -1: every device). Before the
// generators exist (first random op or RNG query), the seed is kept and
// applied when they are made, so torch.manual_seed does not start the
// runtime. Thread-safe.
void manual_seed(c10::DeviceIndex device, uint64_t seed);

// ---- CPU fallback accounting ----

// Counts one CPU fallback of OP (warning once per op unless
// HAL_FALLBACK_WARN=0). REASON says why it did not run on the device.
void count_fallback(const std::string& op, const std::string& reason);
// Per-op fallback counts since start (or the last reset). Thread-safe.
std::map<std::string, uint64_t> fallback_stats();
void reset_fallback_stats();

}  // namespace torch_hal

#endif  // TORCH_HAL_CSRC_BACKEND_HPP_
