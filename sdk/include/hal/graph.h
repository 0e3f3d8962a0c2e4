/*
 * HAL C ABI: the graph-compile interface — a plugin claims nodes of a graph
 * in the HAL graph IR, compiles each claimed group into an executable, and
 * executes it on a stream. Optional; a plugin advertises it with
 * HAL_CAPABILITY_GRAPH on its devices and a non-NULL hal_plugin_api_t.graph.
 * The entries were added in ABI 1.2: a host reads them only when the
 * negotiated MINOR is >= 2 and the table's struct_size covers them; a 1.0 or
 * 1.1 plugin's table (struct_size only) means "graph not implemented".
 *
 * THE GRAPH IR. A graph is a list of VALUES (typed tensors: dtype, rank,
 * shape) and a list of NODES in topological order. Each node names a catalog
 * op (docs/ops.md) and lists the ids of its input and output values (an id
 * is an index into VALUES) and its attributes (hal_attr_t, exactly as an op
 * launch takes them; catalog defaults apply to the ones not given). A value
 * is either a graph input or the output of exactly one node; every node
 * input is a graph input or the output of an earlier node. Graph OUTPUTS
 * name the values the caller reads after execution.
 *
 * SYMBOLIC DIMS. A dim < 0 in a value's shape is a symbol: the same negative
 * number stands for the same (unknown, >= 0) size everywhere in the graph
 * (-1 in two values means both dims are equal). Concrete sizes arrive at
 * execute, with the tensors; a plugin that cannot compile for unknown sizes
 * does not claim such nodes (or compiles lazily, per concrete shape).
 *
 * PARTITION, COMPILE, EXECUTE. The host asks graph_partition which nodes the
 * device takes and how they group; it then cuts each group out as a
 * self-contained subgraph (its inputs and outputs are the values that cross
 * the group's boundary) and passes it to graph_compile, which returns an
 * executable. Nodes nobody claims are run by the host op by op (operator
 * interface) or on the fallback device.
 *
 * GROWTH. The arrays of values, nodes and execute tensors are arrays of
 * POINTERS: each element carries its own struct_size, so a newer caller's
 * larger structs never shift an older reader's indexing. (Attributes are an
 * array of hal_attr_t, as in hal_op_args_t.)
 *
 * OWNERSHIP. Graphs and tensors passed in are owned by the caller and read
 * only during the call (a plugin copies what it keeps). Executables are
 * owned by the caller of graph_compile (or executable_deserialize) until
 * executable_destroy.
 *
 * SERIALISATION (ABI 1.5). executable_serialize writes what a plugin needs
 * to rebuild an executable without compiling (kernel source or program
 * binary, launch plan) into caller memory; executable_deserialize turns
 * those bytes back into an executable, given the same subgraph graph_compile
 * received (the host keys its cache on the graph, so it has it). The bytes
 * are the plugin's private format: it must refuse (INVALID_ARGUMENT naming
 * what is wrong, never crash) bytes that are truncated, corrupt, or written
 * by another version of itself or for another device. A host reads both
 * entries only when the negotiated MINOR is >= 5 and the table's
 * struct_size covers them; a 1.2-1.4 plugin's table means "executables are
 * not serialisable" (the host compiles every time).
 *
 * CONSTANT INPUTS (ABI 1.7). A host may hang a hal_graph_constants_t on
 * hal_graph_t.next (graph_partition, graph_compile, executable_deserialize):
 * it names graph inputs whose contents are fixed (a model's weights) and
 * gives their bytes. The host still passes those inputs at every execute,
 * with exactly these bytes, for the executable's whole life; a plugin may
 * copy or pre-pack them at compile (a blocked weight layout) and read its
 * copy instead. A plugin that does not know the extension skips it (the
 * extension rules) and sees ordinary inputs.
 *
 * OUTPUT ALIASES (ABI 1.14). A host may hang a hal_graph_output_aliases_t
 * on hal_graph_t.next (graph_compile, executable_deserialize; partition
 * ignores it): it pairs outputs with inputs of the same dtype and shape, as
 * PJRT's input-output aliases (buffer donation) do. For such a pair the
 * host may pass, at an execute, the output as the very tensor it passes
 * for the input (same buffer, byte offset and shape; contiguous): the
 * execution then reads the input's contents as they were before it and
 * leaves the output's in that memory (a variable updated in place: an
 * optimizer step's parameters and moments), with no copy by the host. A
 * pair is a permission: separate memory for the output stays valid. An
 * executable that honours the pairs sets HAL_EXECUTABLE_FLAG_OUTPUT_ALIASES;
 * a plugin that does not know the extension skips it and leaves the flag
 * clear, and a host then never passes an output as its input (execute
 * refuses overlapping tensors).
 */
#ifndef HAL_GRAPH_H_
#define HAL_GRAPH_H_

#include "hal/extension.h"
#include "hal/op.h"
#include "hal/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A value id that names no value: an absent optional node input. */
#define HAL_GRAPH_NO_VALUE UINT32_MAX

/* A compiled (sub)graph. Created by graph_compile on one device, owned by
 * the caller, released with executable_destroy. May be executed from
 * several threads at once. */
typedef struct hal_executable_s hal_executable_t;

/* One value (a tensor flowing along graph edges). */
typedef struct hal_graph_value_t {
  size_t struct_size;
  uint32_t dtype; /* hal_dtype_e */
  uint32_t rank;  /* 0 .. HAL_TENSOR_MAX_RANK */
  /* RANK dims; a dim < 0 is a symbol (see SYMBOLIC DIMS). NULL when RANK
   * is 0. */
  const int64_t* shape;
} hal_graph_value_t;

/* One op application. */
typedef struct hal_graph_node_t {
  size_t struct_size;
  const char* op; /* catalog op name ("add"); never NULL */
  /* Value ids of the op's inputs in catalog order; HAL_GRAPH_NO_VALUE for
   * an absent optional input; trailing optional inputs may be left out of
   * INPUT_COUNT. INPUTS may be NULL when INPUT_COUNT is 0. */
  const uint32_t* inputs;
  size_t input_count;
  /* Value ids of the op's outputs in catalog order; each produced by this
   * node only. */
  const uint32_t* outputs;
  size_t output_count;
  const hal_attr_t* attrs; /* may be NULL when ATTR_COUNT is 0 */
  size_t attr_count;
} hal_graph_node_t;

/* A graph. Every array may be NULL when its count is 0. */
typedef struct hal_graph_t {
  size_t struct_size;
  /* Extension chain: NULL, or the first element of a chain of
   * hal_extension_base_t structs (hal/extension.h; readers skip unknown
   * types and refuse malformed chains with INVALID_ARGUMENT). Declared
   * void* since ABI 1.0 and kept so: retyping it would break C++ sources
   * that assign or read a void*. */
  void* next;
  /* VALUE_COUNT (< HAL_GRAPH_NO_VALUE) values; a value id is an index. */
  const hal_graph_value_t* const* values;
  size_t value_count;
  /* NODE_COUNT nodes in topological order. */
  const hal_graph_node_t* const* nodes;
  size_t node_count;
  /* Value ids fed by the caller at execute, in execute's input order. */
  const uint32_t* inputs;
  size_t input_count;
  /* Value ids written at execute, in execute's output order. */
  const uint32_t* outputs;
  size_t output_count;
} hal_graph_t;

/* ABI 1.7: the constant inputs of a graph (see CONSTANT INPUTS). Owned by
 * the caller; read only during the call it is passed to (a plugin copies
 * what it keeps). Readers refuse with INVALID_ARGUMENT (naming the entry):
 * an index out of range or listed twice, a value whose shape has a
 * symbolic dim, SIZES[k] other than the value's byte size, DATA[k] NULL
 * when SIZES[k] > 0. */
typedef struct hal_graph_constants_t {
  hal_extension_base_t base; /* type = HAL_EXTENSION_TYPE_GRAPH_CONSTANTS */
  size_t count;
  /* COUNT indices into hal_graph_t.inputs (not value ids). */
  const size_t* input_indices;
  /* COUNT pointers: the input's elements, row-major and contiguous. */
  const void* const* data;
  /* COUNT byte counts: each the value's element count times its dtype's
   * size. */
  const uint64_t* sizes;
} hal_graph_constants_t;

/* ABI 1.14: outputs that may be passed as an input's tensor (see OUTPUT
 * ALIASES). Owned by the caller; read only during the call it is passed to.
 * Readers refuse with INVALID_ARGUMENT (naming the pair): an index out of
 * range, an output or an input listed twice, an input that is a constant
 * (hal_graph_constants_t), or values of different dtypes or shapes (a
 * symbolic dim must be the same symbol in both). */
typedef struct hal_graph_output_aliases_t {
  hal_extension_base_t base; /* type = HAL_EXTENSION_TYPE_GRAPH_OUTPUT_ALIASES */
  size_t count;
  /* COUNT indices into hal_graph_t.outputs (not value ids). */
  const size_t* output_indices;
  /* COUNT indices into hal_graph_t.inputs: OUTPUT_INDICES[k]'s input. */
  const size_t* input_indices;
} hal_graph_output_aliases_t;

/* What an executable is. Filled by executable_get_info up to the caller's
 * struct_size. */
typedef struct hal_executable_info_t {
  size_t struct_size;
  /* Device kernels one execute launches (a fused graph: 1; a plugin that
   * runs its ops one by one: the number of ops). */
  uint32_t kernel_count;
  /* NUL-terminated free text for logs ("fused add+mul, 1 kernel"). */
  char description[256];
  /* ABI 1.7: HAL_EXECUTABLE_FLAG_* bits (0 from an older plugin, which
   * leaves the field as the caller zero-filled it). */
  uint32_t flags;
  /* ABI 1.10: the executable's plan in full, for a host's explain(): which
   * nodes run in which kernel, one line per kernel or op-by-op node (no
   * length limit, unlike DESCRIPTION). NUL-terminated text, or NULL when the
   * plugin has nothing beyond DESCRIPTION (an older plugin leaves the field
   * as the caller zero-filled it). Owned by the EXECUTABLE: valid and
   * unchanged until executable_destroy; the caller neither frees nor
   * writes it. */
  const char* plan;
} hal_executable_info_t;

/* executable_execute reads inputs of any strides (a transposed view): the
 * host need not make contiguous copies for it. Without the flag a host
 * passes row-major contiguous inputs. */
#define HAL_EXECUTABLE_FLAG_STRIDED_INPUTS (1u << 0)
/* ABI 1.14: execute honours the output aliases the executable was compiled
 * (or deserialised) with: an aliased output may be its input's tensor. */
#define HAL_EXECUTABLE_FLAG_OUTPUT_ALIASES (1u << 1)

/* executable_serialize's arguments (ABI 1.5). */
typedef struct hal_executable_serialize_args_t {
  size_t struct_size;
  const hal_extension_base_t* next; /* extension chain; NULL when none */
  hal_executable_t* executable;     /* non-NULL; a live executable of this plugin */
  /* Caller memory of CAPACITY bytes receiving the serialised executable, or
   * NULL to ask for the size only. */
  void* out_data;
  size_t capacity;
  /* Non-NULL; receives the byte count (written in both cases). */
  size_t* out_size;
} hal_executable_serialize_args_t;

/* executable_deserialize's arguments (ABI 1.5). */
typedef struct hal_executable_deserialize_args_t {
  size_t struct_size;
  const hal_extension_base_t* next; /* extension chain; NULL when none */
  hal_device_t* device;             /* non-NULL; the device to run on */
  /* The subgraph graph_compile received for the serialised executable
   * (the same values, nodes, inputs and outputs). Read during the call. */
  const hal_graph_t* subgraph;
  const void* data; /* SIZE bytes from executable_serialize; read during the call */
  size_t size;
  /* Non-NULL; receives the new executable, owned by the caller until
   * executable_destroy. Untouched on error. */
  hal_executable_t** out_executable;
} hal_executable_deserialize_args_t;

typedef struct hal_graph_api_t {
  size_t struct_size;

  /* ---- ABI 1.2 ---- */

  /* Which nodes of GRAPH would DEVICE take? Writes GRAPH->node_count
   * entries to OUT_NODE_GROUP: 0 = not claimed; k > 0 = claimed, and nodes
   * with the same k are compiled together (the host passes each group to
   * graph_compile as one subgraph). A group should be convex (no path
   * leaves it and re-enters it); the host refuses a partition whose groups
   * cannot be ordered. Reads no data; claiming nothing is a valid answer.
   * Errors: INVALID_ARGUMENT (a malformed graph: names the node or value
   * and what is wrong), with OUT_NODE_GROUP untouched. Thread-safe. */
  hal_status_t* (*graph_partition)(hal_device_t* device, const hal_graph_t* graph,
                                   uint32_t* out_node_group);

  /* Compiles SUBGRAPH (self-contained: its inputs are the values it reads
   * that no node of it produces, its outputs the values read after it) for
   * DEVICE. On success the caller owns *OUT_EXECUTABLE. Errors:
   * INVALID_ARGUMENT (malformed graph, as above), UNIMPLEMENTED /
   * UNSUPPORTED_DTYPE (a node the device cannot compile: names it),
   * DEVICE_ERROR (the compiler failed: the native message inside).
   * Thread-safe. */
  hal_status_t* (*graph_compile)(hal_device_t* device, const hal_graph_t* subgraph,
                                 hal_executable_t** out_executable);

  /* Releases EXECUTABLE. No execution of it may still be queued (synchronize
   * the streams it ran on first). Errors: INVALID_ARGUMENT (not a live
   * executable of this plugin). */
  hal_status_t* (*executable_destroy)(hal_executable_t* executable);

  /* Fills OUT_INFO (up to its struct_size). Thread-safe. */
  hal_status_t* (*executable_get_info)(hal_executable_t* executable,
                                       hal_executable_info_t* out_info);

  /* Validates the tensors and queues one execution on STREAM, returning
   * before it runs; STREAM NULL runs it synchronously. INPUTS[i] feeds the
   * graph's input i and OUTPUTS[j] receives its output j (preallocated by
   * the caller; non-NULL pointers). Each tensor's dtype and rank must be
   * its value's, each concrete dim equal, and each symbolic dim bound to
   * one size across all tensors. Buffers must belong to the executable's
   * device, hold their tensors, and outputs must overlap no input or other
   * output, except that an output paired with an input by the executable's
   * output aliases may be that input's very tensor (contiguous) when the
   * executable has HAL_EXECUTABLE_FLAG_OUTPUT_ALIASES (ABI 1.14). Inputs
   * must not change and outputs must not be read until the
   * stream reaches the execution. Errors: INVALID_ARGUMENT naming the
   * value and the mismatch ("input 1 (value 4): dim 0 is 5 but symbol -1
   * is 3"), OUT_OF_RANGE (a tensor outside its buffer); on error nothing is
   * queued and no output is written. Thread-safe. */
  hal_status_t* (*executable_execute)(hal_executable_t* executable,
                                      const hal_tensor_t* const* inputs, size_t input_count,
                                      const hal_tensor_t* const* outputs, size_t output_count,
                                      hal_stream_t* stream);

  /* ---- ABI 1.5 ---- */

  /* Serialises ARGS->executable (see SERIALISATION). Two calls: with
   * OUT_DATA NULL it writes the size to *OUT_SIZE; then with OUT_DATA of
   * CAPACITY >= that size it writes the bytes and the size. Errors:
   * INVALID_ARGUMENT (NULL arguments, struct_size too small, not a live
   * executable), OUT_OF_RANGE (CAPACITY below the size: nothing written),
   * UNIMPLEMENTED (this executable cannot be serialised: the host compiles
   * it again next time). Thread-safe. */
  hal_status_t* (*executable_serialize)(const hal_executable_serialize_args_t* args);

  /* Rebuilds an executable from serialised bytes (see SERIALISATION).
   * Errors: INVALID_ARGUMENT (NULL arguments, a malformed subgraph, bytes
   * truncated, corrupt, of another plugin version or for another device:
   * the message says which), DEVICE_ERROR (the device refused the kernel
   * binary). On error *OUT_EXECUTABLE is untouched. Thread-safe. */
  hal_status_t* (*executable_deserialize)(const hal_executable_deserialize_args_t* args);
} hal_graph_api_t;

/* Smallest hal_graph_api_t.struct_size the core accepts: the table as
 * declared in ABI 1.0 (struct_size only; such a table means "graph not
 * implemented"). */
#define HAL_GRAPH_API_MIN_SIZE HAL_STRUCT_SIZE_TO(hal_graph_api_t, struct_size)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HAL_GRAPH_H_ */
