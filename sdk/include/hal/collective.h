/*
 * HAL C ABI: the collective communication interface (optional; advertised
 * with HAL_CAPABILITY_COLLECTIVE). Entries since ABI 1.6; a 1.0-1.5 table
 * (struct_size only) means "not implemented".
 *
 * MODEL (NCCL's): one process per rank. One rank makes a unique id
 * (comm_get_unique_id) and the host hands it to every rank (torch's Store,
 * a file, the command line); every rank then calls comm_init with the same
 * id, the world size and its rank. The host also passes a BOOTSTRAP, a
 * key/value store the plugin uses to exchange addresses while it builds the
 * communicator; HAL supplies transports, not a cluster manager.
 *
 * Every collective is called by every rank of the communicator in the same
 * order with matching arguments, and is stream-ordered: it returns once
 * queued on STREAM (a stream of the communicator's device) and runs when the
 * stream reaches it; STREAM NULL runs it before returning. Buffers are
 * (buffer, byte offset) pairs of the communicator's device holding COUNT
 * contiguous elements of DTYPE; send and receive may be the same range
 * (in place) but must not otherwise overlap. A plugin checks what it can
 * see across ranks (kind, count, dtype, op, root) and reports a mismatch as
 * INVALID_ARGUMENT on every rank instead of hanging.
 *
 * FAULTS: a rank that waits longer than the communicator's timeout for a
 * peer fails the operation with TIMEOUT and aborts the communicator, which
 * makes every pending and later operation of every rank fail with ABORTED
 * (naming the rank and the reason) instead of hanging. comm_abort does the
 * same on request (e.g. from a watchdog thread). Asynchronous failures of
 * queued operations surface at stream_synchronize of their stream and
 * through comm_get_async_error.
 *
 * GROUPS: between group_start and group_end (per thread, nestable),
 * operations are only recorded; the outermost group_end issues them
 * together, so matching sends and receives between ranks cannot deadlock
 * on one another. A group's operations use one communicator and stream.
 *
 * Every entry takes one args struct (struct_size, next, then the fields;
 * see hal/hal.h). A plugin reads fields only below the caller's
 * struct_size; errors leave out-pointers and receive buffers untouched
 * when the error is found before the operation runs.
 */
#ifndef HAL_COLLECTIVE_H_
#define HAL_COLLECTIVE_H_

#include "hal/extension.h"
#include "hal/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One rank's membership of a communicator. Created by comm_init or
 * comm_split, owned by the caller until comm_destroy. Thread-safe except
 * that operations of one communicator must be issued in the same order on
 * every rank (issue them from one thread, or order them yourself). */
typedef struct hal_comm_s hal_comm_t;

#define HAL_COMM_UNIQUE_ID_BYTES 128

/* Opaque to the host: bytes the plugin made, copied by value. */
typedef struct hal_comm_unique_id_t {
  uint8_t bytes[HAL_COMM_UNIQUE_ID_BYTES];
} hal_comm_unique_id_t;

/* Reductions. Values are frozen; new ones are appended (MINOR). Which
 * dtypes each takes:
 *   SUM, PROD  every dtype (integers wrap; bool: SUM is OR, PROD is AND).
 *   MIN, MAX   every dtype but complex (bool: MIN is AND, MAX is OR).
 *   AVG        every dtype but bool.
 *   BAND, BOR, BXOR  integer dtypes and bool only.
 * An op a dtype does not take is refused with UNSUPPORTED_DTYPE (naming
 * the op and the dtype) before anything is issued; a value that is not an
 * op (>= HAL_REDUCE_OP_COUNT_ of the plugin's headers) with
 * INVALID_ARGUMENT. */
typedef enum hal_reduce_op_e {
  HAL_REDUCE_SUM = 0,
  HAL_REDUCE_PROD = 1,
  HAL_REDUCE_MIN = 2,
  HAL_REDUCE_MAX = 3,
  /* Sum divided by the world size (integers: truncated toward zero). */
  HAL_REDUCE_AVG = 4,
  /* ABI 1.11: bitwise AND, OR and XOR of the elements' two's-complement
   * bits (bool: logical and, or, xor). A host may pass them only to a
   * plugin whose negotiated MINOR is >= 11; a plugin of MINOR < 11 refuses
   * them as unknown ops (INVALID_ARGUMENT), and libhal refuses them for
   * such a plugin with UNIMPLEMENTED before calling it. */
  HAL_REDUCE_BAND = 5,
  HAL_REDUCE_BOR = 6,
  HAL_REDUCE_BXOR = 7,
  HAL_REDUCE_OP_COUNT_ = 8 /* not an op: one past the last (grows with MINOR) */
} hal_reduce_op_e;

/* The host's key/value store, used only during comm_init / comm_split.
 * Owned by the host; valid for the duration of the call it is passed to.
 * The store must be private to the communicator being built (torch: a
 * PrefixStore per process group): keys are short ASCII, fixed by the
 * plugin. Both functions may be called from any thread. */
typedef struct hal_comm_bootstrap_t {
  size_t struct_size;
  void* context; /* passed back to set and get */
  /* Stores SIZE bytes of VALUE under KEY (replacing any value). Returns
   * NULL, or a status the caller (the plugin) destroys. */
  hal_status_t* (*set)(void* context, const char* key, const void* value, size_t size);
  /* Waits up to TIMEOUT_MS for KEY to exist, then copies
   * min(size, CAPACITY) bytes of its value to OUT_VALUE and writes the
   * value's full size to *OUT_SIZE. Errors: TIMEOUT (key absent when the
   * time ran out), or the store's own failure. */
  hal_status_t* (*get)(void* context, const char* key, uint64_t timeout_ms, void* out_value,
                       size_t capacity, size_t* out_size);
} hal_comm_bootstrap_t;

typedef struct hal_comm_get_unique_id_args_t {
  size_t struct_size;
  const hal_extension_base_t* next;
  hal_device_t* device;          /* non-NULL */
  hal_comm_unique_id_t* out_id;  /* non-NULL; written on success */
} hal_comm_get_unique_id_args_t;

typedef struct hal_comm_init_args_t {
  size_t struct_size;
  const hal_extension_base_t* next;
  hal_device_t* device; /* non-NULL: the device this rank's buffers live on */
  uint32_t world_size;  /* >= 1 */
  uint32_t rank;        /* < world_size */
  const hal_comm_unique_id_t* id;         /* non-NULL; the same on every rank */
  const hal_comm_bootstrap_t* bootstrap;  /* non-NULL unless world_size is 1 */
  /* Bound on any wait for a peer, here and in every operation of the
   * communicator; 0 means the plugin's default (documented by it). */
  uint64_t timeout_ms;
  hal_comm_t** out_comm; /* non-NULL; the new communicator */
} hal_comm_init_args_t;

/* Ranks of PARENT with the same COLOR form a new communicator, ranked by
 * (KEY, parent rank). Every rank of PARENT calls it; a rank passing
 * HAL_COMM_SPLIT_NO_COLOR joins none and gets *OUT_COMM = NULL. */
#define HAL_COMM_SPLIT_NO_COLOR (-1)
typedef struct hal_comm_split_args_t {
  size_t struct_size;
  const hal_extension_base_t* next;
  hal_comm_t* parent; /* non-NULL */
  int32_t color;      /* >= 0, or HAL_COMM_SPLIT_NO_COLOR */
  int32_t key;
  hal_comm_t** out_comm; /* non-NULL */
} hal_comm_split_args_t;

/* comm_destroy, comm_abort, barrier and group_* take this. */
typedef struct hal_comm_args_t {
  size_t struct_size;
  const hal_extension_base_t* next;
  hal_comm_t* comm;     /* non-NULL (group_start / group_end: ignored) */
  hal_stream_t* stream; /* barrier only: the stream, or NULL */
} hal_comm_args_t;

typedef struct hal_comm_info_t {
  size_t struct_size; /* set by the caller */
  uint32_t world_size;
  uint32_t rank;
  hal_device_t* device;
  uint64_t timeout_ms; /* the effective timeout */
  /* The transport in use ("shm", "tcp"); NUL-terminated, static in the
   * plugin. */
  const char* transport;
  /* ABI 1.12: how this rank reaches each rank of the communicator, in rank
   * order, comma-separated ("self,shm,tcp,tcp": world_size entries; "self"
   * at this rank). NUL-terminated, owned by the communicator, valid until
   * comm_destroy; NULL when the plugin does not say (a plugin below 1.12
   * leaves the field as the caller zeroed it). */
  const char* peer_transports;
} hal_comm_info_t;

typedef struct hal_comm_get_info_args_t {
  size_t struct_size;
  const hal_extension_base_t* next;
  hal_comm_t* comm;          /* non-NULL */
  hal_comm_info_t* out_info; /* non-NULL; filled up to its struct_size */
} hal_comm_get_info_args_t;

typedef struct hal_comm_get_async_error_args_t {
  size_t struct_size;
  const hal_extension_base_t* next;
  hal_comm_t* comm; /* non-NULL */
  /* Non-NULL. Receives NULL while the communicator is healthy, else a new
   * status (owned by the caller) with the error that broke it (TIMEOUT,
   * ABORTED, DEVICE_ERROR). */
  hal_status_t** out_error;
} hal_comm_get_async_error_args_t;

/* A data-moving collective. Which fields are read depends on KIND; the
 * counts are in elements of DTYPE:
 *   ALLREDUCE      COUNT from SEND to RECV on every rank, reduced with OP.
 *   BROADCAST      COUNT from ROOT's SEND to every RECV (ROOT: SEND may be RECV).
 *   REDUCE         COUNT reduced with OP into ROOT's RECV (others: RECV unused).
 *   ALLGATHER      COUNT from each SEND; RECV holds world*COUNT, rank r's at r*COUNT.
 *   REDUCE_SCATTER SEND holds world*COUNT; rank r's RECV gets block r reduced.
 *   ALLTOALL       SEND block p (COUNT elements, at p*COUNT) goes to rank p's
 *                  RECV block r; with SEND_COUNTS non-NULL the blocks are
 *                  SEND_COUNTS[p] at SEND_DISPLS[p] and RECV_COUNTS[p] at
 *                  RECV_DISPLS[p] (arrays of world_size; RECV_COUNTS[p] must
 *                  equal rank p's SEND_COUNTS[r]).
 *   SEND / RECV    COUNT to / from rank PEER (SEND reads SEND, RECV writes
 *                  RECV); a RECV takes the oldest SEND from PEER with the
 *                  same TAG not yet received (MPI's and Gloo's matching:
 *                  per (sender, receiver, tag) in issue order, so messages
 *                  of different tags may be received in any order). A SEND
 *                  and RECV that match by tag but differ in DTYPE or COUNT
 *                  are INVALID_ARGUMENT on both ranks. */
typedef enum hal_collective_kind_e {
  HAL_COLLECTIVE_ALLREDUCE = 0,
  HAL_COLLECTIVE_BROADCAST = 1,
  HAL_COLLECTIVE_REDUCE = 2,
  HAL_COLLECTIVE_ALLGATHER = 3,
  HAL_COLLECTIVE_REDUCE_SCATTER = 4,
  HAL_COLLECTIVE_ALLTOALL = 5,
  HAL_COLLECTIVE_SEND = 6,
  HAL_COLLECTIVE_RECV = 7,
  HAL_COLLECTIVE_KIND_COUNT_ = 8
} hal_collective_kind_e;

typedef struct hal_collective_args_t {
  size_t struct_size;
  const hal_extension_base_t* next;
  hal_comm_t* comm;     /* non-NULL */
  hal_stream_t* stream; /* a stream of the communicator's device, or NULL */
  uint32_t kind;        /* hal_collective_kind_e */
  uint32_t dtype;       /* hal_dtype_e */
  uint32_t op;          /* hal_reduce_op_e (ALLREDUCE, REDUCE, REDUCE_SCATTER) */
  uint32_t root;        /* BROADCAST, REDUCE: the root rank; SEND, RECV: the peer */
  uint64_t count;
  hal_buffer_t* send;   /* NULL where KIND reads no send buffer */
  uint64_t send_offset; /* bytes */
  hal_buffer_t* recv;   /* NULL where KIND writes no receive buffer */
  uint64_t recv_offset; /* bytes */
  /* ALLTOALL with unequal blocks (else NULL); element counts and offsets. */
  const uint64_t* send_counts;
  const uint64_t* send_displs;
  const uint64_t* recv_counts;
  const uint64_t* recv_displs;
  /* ---- ABI 1.13 ---- */
  /* SEND, RECV: the tag they match by (any value; 0 when the caller's
   * struct_size ends before it). Other kinds ignore it. */
  uint64_t tag;
} hal_collective_args_t;

typedef struct hal_collective_api_t {
  size_t struct_size;

  /* ---- ABI 1.6 ---- */

  /* Makes a new unique id (random; never repeats). Errors: INVALID_ARGUMENT. */
  hal_status_t* (*comm_get_unique_id)(const hal_comm_get_unique_id_args_t* args);
  /* Joins the communicator ARGS->id names; blocks until every rank joined
   * or the timeout passed. Errors: INVALID_ARGUMENT (rank out of range, an
   * id that is not one, or differs from rank 0's: another job's or a stale
   * one; world sizes that differ), TIMEOUT (a rank did not join: names it),
   * UNIMPLEMENTED (no transport reaches some peer). */
  hal_status_t* (*comm_init)(const hal_comm_init_args_t* args);
  /* See hal_comm_split_args_t. Blocks like comm_init; errors likewise. */
  hal_status_t* (*comm_split)(const hal_comm_split_args_t* args);
  /* Waits for the communicator's queued operations (they fail with ABORTED
   * if it was aborted), then releases it. Releases every shared resource
   * (shared memory, sockets) even when peers are gone. */
  hal_status_t* (*comm_destroy)(const hal_comm_args_t* args);
  /* Aborts ARGS->comm: its pending and later operations, and those of the
   * peers that can be reached, fail with ABORTED. Thread-safe, also while
   * another thread is blocked in an operation of the same communicator.
   * Still call comm_destroy. */
  hal_status_t* (*comm_abort)(const hal_comm_args_t* args);
  hal_status_t* (*comm_get_info)(const hal_comm_get_info_args_t* args);
  hal_status_t* (*comm_get_async_error)(const hal_comm_get_async_error_args_t* args);
  /* Queues the collective ARGS->kind (see hal_collective_args_t). Errors
   * found before it is queued: INVALID_ARGUMENT (NULL or foreign buffers,
   * ranks out of range, overlapping ranges, a stream of another device),
   * OUT_OF_RANGE (a range past its buffer's end), UNSUPPORTED_DTYPE (an
   * op the dtype does not take: MIN of complex, BAND of float32; see
   * hal_reduce_op_e), ABORTED; errors while it runs (mismatched arguments
   * across ranks, TIMEOUT, ABORTED) fail the operation on every rank that
   * sees them, at stream_synchronize for a queued one. */
  hal_status_t* (*collective)(const hal_collective_args_t* args);
  /* Returns (or, on a stream, completes) once every rank has reached it. */
  hal_status_t* (*barrier)(const hal_comm_args_t* args);
  /* See GROUPS above. group_end: the outermost one issues the recorded
   * operations; an error in one is returned and the rest are not issued. */
  hal_status_t* (*group_start)(const hal_comm_args_t* args);
  hal_status_t* (*group_end)(const hal_comm_args_t* args);
} hal_collective_api_t;

/* The smallest table a 1.6 plugin offering collectives fills. */
#define HAL_COLLECTIVE_API_1_6_SIZE HAL_STRUCT_SIZE_TO(hal_collective_api_t, group_end)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* HAL_COLLECTIVE_H_ */
