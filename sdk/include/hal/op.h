/*
 * HAL C ABI: the operator interface — ops of the standard op catalog
 * (docs/ops.md) resolved by name, checked, and launched on streams.
 * Optional; a plugin advertises it with HAL_CAPABILITY_OPERATOR on its
 * devices and a non-NULL hal_plugin_api_t.op. Added in ABI 1.1: a host
 * reads the entries below only when the negotiated MINOR is >= 1 and the
 * table's struct_size covers them.
 *
 * OPS. The catalog names each op ("add", "conv2d", ...), its inputs and
 * outputs in order, its typed attributes with defaults, its dtype, shape,
 * broadcasting and type-promotion rules. A plugin resolves a name to its own
 * integer id once (op_resolve); launches then go by id. A plugin may also
 * offer vendor ops under a "vendor::" prefixed name.
 *
 * TENSORS. A hal_tensor_t describes a strided view of a buffer: the element
 * at index (i0, ..., ik) lives at byte
 *   byte_offset + (i0*strides[0] + ... + ik*strides[k]) * dtype_size.
 * Strides are in elements and may be 0 (broadcast views) but not negative.
 * Non-contiguous tensors are normal; every op accepts them.
 *
 * OUTPUTS are always preallocated by the caller with the shape and dtype the
 * catalog's rules give (hal::sdk and libhal compute them); an output of the
 * wrong shape or dtype is INVALID_ARGUMENT. Ops whose output size depends on
 * data (nonzero, ...) take an upper-bound output and write the real size to
 * a 0-d int64 output ("count"); the catalog entry documents the protocol.
 *
 * INPUT MODES (ABI 1.4). An op's kernel takes its inputs either MIXED (it
 * promotes inputs of different dtypes itself, as the catalog's promotion
 * rules say) or UNIFORM (every input that takes part in promotion arrives
 * already in the call's compute dtype: what vendor kernel libraries offer).
 * A uniform op declines a call with other input dtypes with
 * HAL_STATUS_MIXED_DTYPES before anything runs; libhal's op launch then
 * casts those inputs on the device (the plugin's own "copy" op where it
 * converts them, else through the config's fallback device) and launches
 * again. Inputs outside promotion (indices, masks) keep their own dtypes.
 *
 * ERRORS. A refused launch writes nothing to its outputs. Messages name the
 * op, the argument and the offending values.
 */
#ifndef HAL_OP_H_
#define HAL_OP_H_

#include "hal/extension.h"
#include "hal/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest rank a hal_tensor_t may have. */
#define HAL_TENSOR_MAX_RANK 8

/* A plugin's id for a resolved op; meaningful only to the plugin that
 * returned it. */
typedef uint32_t hal_op_id_t;

/* A strided view of device memory. Owned by the caller; read by the callee
 * only during the call it is passed to (a launch copies what it keeps). */
typedef struct hal_tensor_t {
  size_t struct_size;
  /* The buffer holding the elements; NULL only for a tensor with zero
   * elements. Must belong to the device the op runs on. */
  hal_buffer_t* buffer;
  uint64_t byte_offset; /* of element (0, ..., 0) */
  uint32_t dtype;       /* hal_dtype_e */
  uint32_t rank;        /* 0 (a scalar) .. HAL_TENSOR_MAX_RANK */
  /* RANK sizes, each >= 0; NULL when RANK is 0. */
  const int64_t* shape;
  /* RANK strides in elements, each >= 0; NULL means contiguous row-major. */
  const int64_t* strides;
} hal_tensor_t;

/* Attribute value types. Values are frozen; new ones are appended (MINOR). */
typedef enum hal_attr_type_e {
  HAL_ATTR_TYPE_INVALID = 0,
  HAL_ATTR_TYPE_INT = 1,    /* value.i */
  HAL_ATTR_TYPE_FLOAT = 2,  /* value.f */
  HAL_ATTR_TYPE_BOOL = 3,   /* value.i: 0 or 1 */
  HAL_ATTR_TYPE_STRING = 4, /* value.s: NUL-terminated UTF-8 */
  HAL_ATTR_TYPE_INTS = 5,   /* value.ints[0..count) */
  HAL_ATTR_TYPE_FLOATS = 6, /* value.floats[0..count) */
  HAL_ATTR_TYPE_DTYPE = 7   /* value.i: a hal_dtype_e */
} hal_attr_type_e;

/* One named, typed attribute ("alpha" = 2.0). Owned by the caller; read only
 * during the call. A catalog attribute of kind "scalar" accepts INT, FLOAT
 * or BOOL values. */
typedef struct hal_attr_t {
  size_t struct_size;
  const char* name; /* never NULL */
  uint32_t type;    /* hal_attr_type_e */
  union {
    int64_t i;
    double f;
    const char* s;
    const int64_t* ints;
    const double* floats;
  } value;
  size_t count; /* element count for INTS / FLOATS, else ignored */
} hal_attr_t;

/* Everything an op call names. Owned by the caller; read only during the
 * call. INPUTS and OUTPUTS are arrays of pointers (each tensor carries its
 * own struct_size); an absent optional input is a NULL entry, and trailing
 * optional inputs may be left out of INPUT_COUNT. Attributes not given take
 * the catalog's defaults; unknown names are INVALID_ARGUMENT. */
typedef struct hal_op_args_t {
  size_t struct_size;
  /* Extension chain: NULL, or the first element of a chain of
   * hal_extension_base_t structs (hal/extension.h; readers skip unknown
   * types and refuse malformed chains with INVALID_ARGUMENT). Declared
   * void* since ABI 1.0 and kept so: retyping it would break C++ sources
   * that assign or read a void*. */
  void* next;
  hal_op_id_t op;
  const hal_tensor_t* const* inputs;
  size_t input_count;
  const hal_tensor_t* const* outputs;
  size_t output_count;
  const hal_attr_t* attrs; /* may be NULL when ATTR_COUNT is 0 */
  size_t attr_count;
} hal_op_args_t;

/* How an op's kernel takes its inputs (hal_op_info_t.input_mode). Values
 * are frozen; a reader that sees an unknown mode treats it as MIXED. */
typedef enum hal_op_input_mode_e {
  /* Inputs of any catalog-allowed dtypes; the kernel promotes. The meaning
   * of every op of a plugin without op_get_info (ABI < 1.4). */
  HAL_OP_INPUTS_MIXED = 0,
  /* Every promoted input in the call's compute dtype; other calls are
   * declined with HAL_STATUS_MIXED_DTYPES. */
  HAL_OP_INPUTS_UNIFORM = 1
} hal_op_input_mode_e;

/* What a plugin says about one of its ops (ABI 1.4). Filled by the plugin
 * up to the caller's struct_size; owned by the caller. */
typedef struct hal_op_info_t {
  size_t struct_size;
  const hal_extension_base_t* next; /* extension chain; NULL */
  uint32_t input_mode;              /* hal_op_input_mode_e */
  /* HAL_DTYPE_BIT mask of the compute dtypes the plugin runs the op in (on
   * at least one device); the catalog's own dtype rules apply as well. */
  uint64_t compute_dtypes;
} hal_op_info_t;

/* Arguments of op_get_info. Owned by the caller; read only during the
 * call. */
typedef struct hal_op_get_info_args_t {
  size_t struct_size;
  const hal_extension_base_t* next; /* extension chain; NULL */
  hal_plugin_t* plugin;
  hal_op_id_t op;          /* from op_resolve */
  hal_op_info_t* out_info; /* non-NULL; its struct_size set by the caller */
} hal_op_get_info_args_t;

/* ABI 1.8. LAYOUTS. A plugin may say in which memory layout an op's kernel
 * runs fastest, so that the host (libhal's graph runner) can allocate the
 * tensors it owns between op-by-op launches that way instead of the kernel
 * reordering them at every launch (oneDNN's channels-last convolutions,
 * a vendor's tiled formats expressed as a dim order).
 *
 * A layout is a DIM ORDER: the tensor's dims from outermost (largest
 * stride) to innermost (stride 1), the tensor dense in that order. Row-major
 * is 0, 1, ..., rank-1; channels-last of an [N, C, H, W] tensor is 0, 2, 3,
 * 1. A layout only ever changes strides: every op still accepts every
 * strided tensor (above), so a host that ignores layouts stays correct. */

/* What a plugin says about one tensor of a call (hal_op_layout_t.preference).
 * Values are frozen; a reader that sees an unknown value treats it as ANY. */
typedef enum hal_op_layout_preference_e {
  /* No preference: the host chooses. libhal then lays out an output as the
   * first input of the same shape that is not row-major (PyTorch's rule for
   * elementwise ops), else as its consumers agree, else row-major. */
  HAL_OP_LAYOUT_ANY = 0,
  /* The kernel runs fastest with the tensor dense in dim_order. */
  HAL_OP_LAYOUT_PREFERRED = 1
} hal_op_layout_preference_e;

/* One tensor's preferred layout. Allocated and owned by the caller, who
 * sets struct_size; the plugin writes the fields below struct_size. */
typedef struct hal_op_layout_t {
  size_t struct_size;
  uint32_t preference; /* hal_op_layout_preference_e */
  /* PREFERRED: the dim order, a permutation of 0..rank-1 of the call's
   * tensor (its rank); entries from rank on are ignored. */
  uint32_t dim_order[HAL_TENSOR_MAX_RANK];
} hal_op_layout_t;

/* Arguments of op_get_layouts. Owned by the caller; read only during the
 * call. */
typedef struct hal_op_get_layouts_args_t {
  size_t struct_size;
  const hal_extension_base_t* next; /* extension chain; NULL */
  hal_device_t* device;             /* non-NULL */
  /* The call, as op_check takes it (buffers may be NULL). Inputs carry the
   * strides they will have at launch (the host has chosen them already);
   * outputs' strides are ignored. Non-NULL. */
  const hal_op_args_t* call;
  /* CALL->input_count and CALL->output_count pointers to caller-owned
   * layouts (an entry may be NULL: not asked). Each one's struct_size is set
   * by the caller; the plugin sets preference (and dim_order) in each. */
  hal_op_layout_t* const* out_inputs;
  hal_op_layout_t* const* out_outputs;
} hal_op_get_layouts_args_t;

typedef struct hal_op_api_t {
  size_t struct_size;

  /* Catalog version the plugin implements (HAL_OP_CATALOG_VERSION_* of
   * hal/op_catalog.h). Ops keep their meaning within a catalog MAJOR. */
  uint32_t catalog_version_major;
  uint32_t catalog_version_minor;

  /* Number of ops this plugin implements (on at least one device). */
  hal_status_t* (*op_count)(hal_plugin_t* plugin, uint32_t* out_count);
  /* Name of op INDEX (< op_count). *OUT_NAME is static in the plugin: valid
   * until the library is unloaded. Errors: OUT_OF_RANGE. */
  hal_status_t* (*op_get_name)(hal_plugin_t* plugin, uint32_t index, const char** out_name);
  /* Resolves op NAME to this plugin's id. Call once, at load time; ids are
   * stable for the plugin instance's lifetime. Errors: UNIMPLEMENTED when
   * the plugin does not implement NAME (the message says whether the name
   * is in the catalog at all). */
  hal_status_t* (*op_resolve)(hal_plugin_t* plugin, const char* name, hal_op_id_t* out_id);

  /* Would DEVICE accept this launch? Checks the op id, dtypes, shapes,
   * strides, attributes and output shapes exactly as op_launch does, but
   * reads no data; tensor buffers may be NULL. Returns NULL when it would,
   * else the reason (UNSUPPORTED_DTYPE, UNIMPLEMENTED, INVALID_ARGUMENT,
   * ...). Thread-safe. */
  hal_status_t* (*op_check)(hal_device_t* device, const hal_op_args_t* args);

  /* Validates ARGS (as op_check, plus buffers: live, of DEVICE, tensors
   * inside them) and queues the op on STREAM, returning before it runs;
   * STREAM NULL runs it synchronously. Inputs must not change and outputs
   * must not be read until the stream reaches the op. On error nothing is
   * queued and no output is written. Thread-safe. */
  hal_status_t* (*op_launch)(hal_device_t* device, const hal_op_args_t* args,
                             hal_stream_t* stream);

  /* ABI 1.4. Describes op ARGS->op of ARGS->plugin into *ARGS->out_info
   * (its input mode and compute dtypes). Call once per resolved op; the
   * answer does not change for the plugin instance's lifetime. Thread-safe.
   * Errors: INVALID_ARGUMENT (NULL, a struct_size too small, an id
   * op_resolve did not return); *out_info is untouched then. */
  hal_status_t* (*op_get_info)(const hal_op_get_info_args_t* args);

  /* ABI 1.8. The layouts ARGS->call's kernel on ARGS->device prefers for its
   * inputs and outputs (LAYOUTS, above), written to *ARGS->out_inputs[i]
   * and *ARGS->out_outputs[j]. Validates the call as op_check does and
   * reads no data. The answer depends only on the call (op, dtypes, shapes,
   * input strides, attributes), so a caller may keep it for equal calls.
   * Thread-safe. Errors: those of op_check for the call; INVALID_ARGUMENT
   * for a NULL args, device, call or array, a struct_size too small; the
   * layouts are untouched then. A host reads this entry only when the
   * negotiated MINOR is >= 8 and the table's struct_size covers it; without
   * it every tensor is ANY. */
  hal_status_t* (*op_get_layouts)(const hal_op_get_layouts_args_t* args);
} hal_op_api_t;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HAL_OP_H_ */
