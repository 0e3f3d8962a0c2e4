/*
 * HAL C ABI — the contract between the HAL core and vendor plugins.
 *
 * This umbrella header includes every ABI header. All ABI headers are pure C
 * (C11 and C++17); no C++ type, exception or allocator ownership crosses the
 * boundary.
 *
 * VERSIONING RULES
 *
 *   HAL_ABI_VERSION_MAJOR changes when an existing binary would misbehave:
 *     - a field or function-table entry is removed, reordered, retyped or has
 *       its meaning changed;
 *     - the entry point's signature or the layout of the frozen header of
 *       hal_plugin_api_t / hal_host_api_t (struct_size, abi_version_major,
 *       abi_version_minor — the first three fields) changes.
 *     The core refuses (skips, with a reason) a plugin whose MAJOR differs.
 *
 *   HAL_ABI_VERSION_MINOR changes for compatible growth only:
 *     - a field or table entry is APPENDED to a struct;
 *     - a new enum value, status code, dtype, flag bit or optional table is
 *       added (readers treat unknown values as "unsupported", never as errors
 *       that crash).
 *     MINOR is negotiated down: the host announces its version in
 *     hal_host_api_t, the plugin announces its version in hal_plugin_api_t,
 *     and each side uses only what both know (min of the two MINORs).
 *
 *   NEW ENTRIES TAKE ONE ARGS STRUCT (from ABI 1.3 on). A table entry added
 *   from now on has the form
 *       hal_status_t* (*thing_do)(const hal_thing_do_args_t* args);
 *   where the args struct starts with `size_t struct_size` followed by
 *   `const hal_extension_base_t* next` (an extension chain), then the
 *   inputs and the out-pointers, instead of positional parameters. A later
 *   parameter is then an appended field (MINOR), read by the callee only
 *   below the caller's struct_size, not a second entry. Entries published
 *   before 1.3 keep their signatures. (The collective entries start so.)
 *
 *   EXTENSION CHAINS (hal/extension.h, ABI 1.3). The `next` fields are
 *   chains of typed structs (hal_extension_base_t: struct_size, type,
 *   next). Readers skip types they do not know and refuse a malformed chain
 *   (an element smaller than the base, of type 0, or a cycle) with
 *   INVALID_ARGUMENT naming the struct, the element and the value. Adding a
 *   standard extension type is MINOR; vendors use the private id range.
 *
 *   VERSION HISTORY (MAJOR 1)
 *     1.0  device, memory, stream/event tables; collective, op and graph
 *          tables declared with struct_size only.
 *     1.1  operator entries appended to hal_op_api_t (hal/op.h).
 *     1.2  graph-compile entries appended to hal_graph_api_t (hal/graph.h):
 *          graph_partition, graph_compile, executable_destroy,
 *          executable_get_info, executable_execute. A host reads them only
 *          from a plugin of MINOR >= 2 whose table's struct_size covers
 *          them; an older plugin's graph table means "not implemented".
 *     1.3  typed extension chains (hal/extension.h): hal_extension_base_t,
 *          the type registry, `next` documented as such a chain everywhere,
 *          and `next` appended to hal_host_api_t and hal_plugin_api_t. Each
 *          side reads the other's `next` only when the negotiated MINOR is
 *          >= 3 and the struct_size covers it. The one-args-struct rule for
 *          new entries.
 *     1.4  input modes (hal/op.h): hal_op_api_t.op_get_info tells whether an
 *          op takes mixed input dtypes (promoting itself) or uniform ones
 *          (every promoted input in the call's compute dtype), and status
 *          HAL_STATUS_MIXED_DTYPES with which a uniform op declines a mixed
 *          call. A host reads op_get_info only when the negotiated MINOR is
 *          >= 4 and the op table's struct_size covers it; without it every
 *          op counts as mixed (what plugins of 1.1-1.3 did).
 *     1.5  executable serialisation (hal/graph.h): hal_graph_api_t gains
 *          executable_serialize and executable_deserialize (one args struct
 *          each), so a host can cache compiled executables on disk. A host
 *          reads them only when the negotiated MINOR is >= 5 and the graph
 *          table's struct_size covers them; without them executables are
 *          not serialisable (the host recompiles).
 *     1.6  collectives (hal/collective.h): hal_collective_api_t's entries
 *          (unique id, comm init/split/destroy/abort/info/async error,
 *          collective, barrier, group start/end; one args struct each) and
 *          status HAL_STATUS_ABORTED. A host reads the table only when the
 *          negotiated MINOR is >= 6 and its struct_size covers
 *          HAL_COLLECTIVE_API_1_6_SIZE; an older table means "no
 *          collectives".
 *     1.7  constant graph inputs (hal/graph.h): the extension
 *          hal_graph_constants_t (HAL_EXTENSION_TYPE_GRAPH_CONSTANTS) on
 *          hal_graph_t.next lists the inputs whose bytes never change
 *          (weights) and hands over those bytes at partition, compile and
 *          deserialise, so a plugin may pre-pack them. An older plugin
 *          skips the element (unknown type) and reads them as ordinary
 *          inputs, which the host still passes at every execute.
 *          hal_executable_info_t gains flags: HAL_EXECUTABLE_FLAG_STRIDED_
 *          INPUTS says execute reads strided inputs (no contiguous copies).
 *     1.8  op layouts (hal/op.h): hal_op_api_t.op_get_layouts tells in
 *          which dim order an op's kernel prefers each input and output
 *          (hal_op_layout_t), so the host lays out the tensors between
 *          op-by-op launches that way. A host reads it only when the
 *          negotiated MINOR is >= 8 and the op table's struct_size covers
 *          it; without it every tensor is row-major or follows its inputs.
 *     1.9  layers (hal/layer.h): hal_layer_api_t and its entry point, so
 *          validation, tracing and fault injection sit between the core and
 *          any plugin without the plugin's help; status
 *          HAL_STATUS_DEVICE_LOST (a plugin reports a device that is gone;
 *          a host of < 1.9 reads it as INTERNAL). Nothing changes for a
 *          plugin.
 *     1.10 executable plans (hal/graph.h): hal_executable_info_t gains
 *          plan, the executable's whole plan as text (which nodes run in
 *          which kernel), owned by the executable, where DESCRIPTION holds
 *          255 bytes. A host reads it only when the negotiated MINOR is
 *          >= 10 and the plugin set it; otherwise it shows DESCRIPTION.
 *     1.11 bitwise reductions (hal/collective.h): HAL_REDUCE_BAND, BOR and
 *          BXOR in hal_reduce_op_e, for integer and bool dtypes. A host
 *          passes them only to a plugin whose negotiated MINOR is >= 11
 *          (libhal refuses them with UNIMPLEMENTED for an older one, which
 *          would refuse them as unknown ops). The SDK's host
 *          communicator implements them; a plugin with reductions of its
 *          own refuses those it lacks (UNIMPLEMENTED, naming the op).
 *     1.12 per-peer transports (hal/collective.h): hal_comm_info_t gains
 *          peer_transports, how this rank reaches each rank ("self,shm,
 *          tcp"), owned by the communicator. A host reads it only when
 *          the plugin set it (an older plugin writes up to its own
 *          struct size, leaving it NULL). Nothing changes for a plugin.
 *     1.13 send/recv tags (hal/collective.h): hal_collective_args_t gains
 *          TAG; a RECV takes the oldest unreceived SEND from its peer with
 *          the same tag (tag 0 alone keeps 1.6's issue order). A host
 *          passes a nonzero tag only to a plugin whose negotiated MINOR is
 *          >= 13 (libhal refuses it with UNIMPLEMENTED for an older one,
 *          which would not read the field and match out of order).
 *     1.14 output aliases (hal/graph.h): the extension
 *          hal_graph_output_aliases_t (HAL_EXTENSION_TYPE_GRAPH_OUTPUT_
 *          ALIASES) on hal_graph_t.next names outputs the host may pass as
 *          the very tensor of an input (a variable updated in place: an
 *          optimizer's parameters), and HAL_EXECUTABLE_FLAG_OUTPUT_ALIASES
 *          says an executable honours them. A host passes such a pair
 *          only to an executable with the flag; an older plugin skips the
 *          element (unknown type), leaves the flag clear and still gets
 *          separate outputs.
 *
 *   Every struct that crosses the boundary starts with `size_t struct_size`
 *   set by whoever fills the struct to sizeof() of the version it was built
 *   against. Readers never touch a field that lies at or beyond struct_size
 *   (use HAL_STRUCT_HAS_FIELD). A function-table entry that is NULL, or lies
 *   beyond the table's struct_size, is "not implemented": callers report
 *   HAL_STATUS_UNIMPLEMENTED and never call it.
 *
 * ERRORS
 *
 *   Every fallible call returns `hal_status_t*`: NULL means success; non-NULL
 *   is an error object created by the callee and OWNED BY THE CALLER from then
 *   on, who must release it exactly once with `status->destroy(status)` (the
 *   destroy function travels with the object, so a status created by a plugin
 *   is freed by that plugin's allocator and vice versa). On error a call
 *   leaves its out-parameters untouched.
 *
 * THREAD-SAFETY
 *
 *   Unless an entry says otherwise, every entry may be called concurrently
 *   from several threads on different or the same objects; an object may not
 *   be used concurrently with (or after) its own destroy/free call.
 */
#ifndef HAL_HAL_H_
#define HAL_HAL_H_

#include "hal/types.h"
#include "hal/extension.h"
#include "hal/status.h"
#include "hal/device.h"
#include "hal/memory.h"
#include "hal/stream.h"
#include "hal/collective.h"
#include "hal/op.h"
#include "hal/graph.h"
#include "hal/plugin.h"
#include "hal/layer.h"

#endif /* HAL_HAL_H_ */
