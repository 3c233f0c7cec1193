/*
 * gpuport_plugin.h: the C ABI of a gpuport device plugin.
 *
 * A device plugin is a shared library that exports one function, gpuport_plugin_entry,
 * returning a table of functions: the calls a device runtime answers (memory, streams,
 * events, copies, host functions, modules, kernel launches), in the shape of a GPU
 * vendor's driver API. gpuport drives the table with the same kit it drives its CUDA and
 * ROCm backends with, so a plugin gets handle ownership, kept stream errors, deferred
 * release and the whole Device/Stream/Event contract without writing them.
 *
 * This header is the source of truth; the Rust declarations in gpuport-plugin-abi are
 * checked against it (field offsets and sizes) by the tests.
 *
 * Evolution (as XLA's PJRT C API):
 *   - Every struct starts with struct_size: sizeof the struct as its writer was built.
 *   - Fields are only ever appended. A reader never reads past the size the writer
 *     declared; a field the writer's size does not reach is absent (a function pointer:
 *     the call is unsupported).
 *   - A plugin built against another ABI major version is refused at load, with both
 *     versions named. A newer minor version of either side is accepted.
 *   - Structs the caller passes for the plugin to fill (gpuport_device_info,
 *     gpuport_pointer_attributes) carry the caller's size; the plugin writes no byte past
 *     it.
 *
 * Errors: every call that can fail returns a gpuport_error*, NULL on success. The error
 * is the plugin's object: gpuport reads its kind and message through the table and then
 * destroys it, once. Nothing unwinds across this boundary: a C++ plugin catches its
 * exceptions; gpuport's Rust side catches its panics.
 *
 * Threads: every function may be called from any thread, concurrently, except where it
 * says otherwise. Host functions queued with stream_launch_host_func run on a thread of
 * the plugin's choosing, in stream order; from there gpuport makes no blocking call into
 * the plugin (no synchronize of the same device), only the non-blocking ones a vendor
 * runtime allows in its callbacks. Releases (stream_destroy, event_destroy, mem_free*,
 * module_unload, error_destroy, device_close) are never made from a host function.
 */
#ifndef GPUPORT_PLUGIN_H
#define GPUPORT_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUPORT_PLUGIN_ABI_MAJOR 1
#define GPUPORT_PLUGIN_ABI_MINOR 2

/* The one exported symbol. */
#define GPUPORT_PLUGIN_ENTRY_SYMBOL "gpuport_plugin_entry"

/* Handles: opaque to gpuport; never 0 for a live object. A stream or event handle is
 * also what a user sees as its raw handle, and what wrap_stream / wrap_event take. */
typedef struct gpuport_error gpuport_error;
typedef struct gpuport_device gpuport_device;
typedef uintptr_t gpuport_stream;
typedef uintptr_t gpuport_event;
typedef uintptr_t gpuport_module;
typedef uintptr_t gpuport_function;

/* Error kinds: gpuport's Error variants a plugin may report. */
typedef enum gpuport_error_kind {
    GPUPORT_ERROR_INVALID_ARGUMENT = 1, /* a bad argument; the message says which */
    GPUPORT_ERROR_OUT_OF_MEMORY = 2,    /* an allocation that cannot be satisfied */
    GPUPORT_ERROR_UNSUPPORTED = 3,      /* a feature this device does not have */
    GPUPORT_ERROR_NOT_READY = 4,        /* the work asked about has not completed */
    GPUPORT_ERROR_INVALID_HANDLE = 5,   /* a handle of nothing live */
    GPUPORT_ERROR_NO_DEVICE = 6,        /* the runtime has no usable device */
    GPUPORT_ERROR_DEVICE_NOT_FOUND = 7, /* an ordinal past the last device */
    GPUPORT_ERROR_WOULD_DEADLOCK = 8,   /* a blocking call that would wait for itself */
    GPUPORT_ERROR_FAILED = 9            /* anything else: the runtime's own failure */
} gpuport_error_kind;

/* Stream creation flags. */
#define GPUPORT_STREAM_NON_BLOCKING 0x1u /* no implicit sync with the legacy stream */

/* Event creation flags. */
#define GPUPORT_EVENT_BLOCKING_SYNC 0x1u
#define GPUPORT_EVENT_DISABLE_TIMING 0x2u

/* Pinned host allocation flags. */
#define GPUPORT_HOST_ALLOC_PORTABLE 0x1u
#define GPUPORT_HOST_ALLOC_DEVICE_MAP 0x2u
#define GPUPORT_HOST_ALLOC_WRITE_COMBINED 0x4u

/* What kind of memory an address is. */
typedef enum gpuport_memory_kind {
    GPUPORT_MEMORY_UNREGISTERED = 0, /* not the plugin's */
    GPUPORT_MEMORY_DEVICE = 1,
    GPUPORT_MEMORY_PINNED_HOST = 2,
    GPUPORT_MEMORY_MANAGED = 3,
    GPUPORT_MEMORY_HOST = 4
} gpuport_memory_kind;

/* Facts of one device; filled by device_info. */
typedef struct gpuport_device_info {
    size_t struct_size;        /* set by the caller */
    char name[256];            /* NUL-terminated, not empty */
    uint64_t total_memory;     /* bytes */
    uint32_t multiprocessors;  /* compute units; 0 = unknown */
    int32_t compute_major;     /* -1 = none */
    int32_t compute_minor;     /* -1 = none */
    char arch[64];             /* NUL-terminated; empty = unknown */
} gpuport_device_info;

/* What the plugin knows of an address; filled by pointer_attributes. */
typedef struct gpuport_pointer_attributes {
    size_t struct_size;        /* set by the caller */
    int32_t memory;            /* gpuport_memory_kind */
    int32_t device_ordinal;    /* the owning device; -1 = none */
    uint8_t host_accessible;
    uint8_t device_accessible;
    uint8_t managed;
    uint8_t reserved;
    uint64_t allocation_base;  /* 0 with allocation_len 0 = unknown */
    uint64_t allocation_len;
} gpuport_pointer_attributes;

/* One kernel argument of a launch. */
typedef enum gpuport_kernel_arg_kind {
    GPUPORT_KERNEL_ARG_ADDRESS = 1, /* value: a device address (buffer base + offset) */
    GPUPORT_KERNEL_ARG_SCALAR = 2   /* bytes: the scalar's little-endian bytes */
} gpuport_kernel_arg_kind;

typedef struct gpuport_kernel_arg {
    int32_t kind;              /* gpuport_kernel_arg_kind */
    uint32_t size;             /* bytes of the scalar (1 to 8); 8 for an address */
    uint64_t value;            /* the address, or the scalar in the low bytes */
    uint8_t dtype_code;        /* the scalar's DLDataTypeCode (0 int, 1 uint, 2 float, ...);
                                  1 for an address */
    uint8_t dtype_bits;        /* its bits per lane */
    uint16_t dtype_lanes;      /* its lanes (1 for a plain scalar) */
    uint32_t reserved;         /* zero */
} gpuport_kernel_arg;

/* A launch's geometry. */
typedef struct gpuport_launch_config {
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shared_mem_bytes;
} gpuport_launch_config;

/* A host function queued on a stream: called once, with its user pointer, when
 * everything queued before it on the stream has completed (the host functions queued
 * before it have returned); work queued after it waits until it returns. gpuport relies
 * on that order: what a stream's host functions share is freed by its last one. */
typedef void (*gpuport_host_func)(void *user);

/* Where a stream's progress can be read without a call (see stream_progress). Three
 * words the plugin keeps in its own memory, changed only with sequentially consistent
 * atomic operations (C11 atomic_fetch_add / atomic_store, C++ std::atomic, lock-free;
 * submitted and completed 8-byte aligned, publishing 4-byte aligned), which gpuport reads
 * with atomic loads:
 *   - submitted: operations queued on the stream so far. Counted before the call that
 *     queues one returns.
 *   - completed: operations of the stream completed so far (never more than submitted).
 *     Counted once an operation has finished and its effects are visible to the host
 *     (copied bytes, a host function returned).
 *   - publishing: NULL where the plugin never needs it; else nonzero while an operation
 *     counted in completed still has effects to publish that a reader of a done stream
 *     must see (an event it records completing). Raised before that count and lowered
 *     after the effects are published.
 * gpuport's query reads submitted, then completed, then publishing: completed below
 * submitted is "not done"; otherwise a publishing of zero is "done", and a nonzero one
 * makes it call stream_query. A stream whose progress is published is therefore never
 * asked about its queued work's failures by a query: they are reported by
 * stream_synchronize (and device_synchronize), as the contract allows. */
typedef struct gpuport_stream_progress {
    size_t struct_size;          /* sizeof(gpuport_stream_progress) as the plugin was built */
    const uint64_t *submitted;
    const uint64_t *completed;
    const uint32_t *publishing;
} gpuport_stream_progress;

/* The function table. */
typedef struct gpuport_plugin_api {
    size_t struct_size; /* sizeof(gpuport_plugin_api) as the plugin was built */
    uint32_t abi_major; /* GPUPORT_PLUGIN_ABI_MAJOR */
    uint32_t abi_minor; /* GPUPORT_PLUGIN_ABI_MINOR */

    /* The backend: its name (lower-case letters, digits, '-' and '_'; a device is
     * "name:ordinal"), its version text, and the DLPack device types of its memory
     * (DLDeviceType numbers; -1 where it has no such memory). */
    const char *name;
    const char *version;
    int32_t dlpack_device;
    int32_t dlpack_pinned_host;
    int32_t dlpack_managed;
    uint32_t reserved;

    /* Errors. The message stays valid until error_destroy. */
    int32_t (*error_kind)(const gpuport_error *error);
    const char *(*error_message)(const gpuport_error *error);
    void (*error_destroy)(gpuport_error *error);

    /* Called once, before any other call except the error functions. */
    gpuport_error *(*initialize)(void);
    gpuport_error *(*device_count)(uint32_t *count);
    /* Opens device `ordinal` (gpuport opens each once and shares it). */
    gpuport_error *(*device_open)(uint32_t ordinal, gpuport_device **device);
    /* After the last handle of the device and its streams, events, memory and modules
     * is gone. */
    gpuport_error *(*device_close)(gpuport_device *device);

    /* The device. */
    gpuport_error *(*device_info)(gpuport_device *device, gpuport_device_info *info);
    gpuport_error *(*can_access_peer)(gpuport_device *device, gpuport_device *peer, bool *can);
    gpuport_error *(*enable_peer_access)(gpuport_device *device, gpuport_device *peer);
    gpuport_error *(*pointer_attributes)(gpuport_device *device, uint64_t address,
                                         gpuport_pointer_attributes *attributes);
    gpuport_error *(*device_synchronize)(gpuport_device *device);

    /* Streams. The legacy default stream synchronizes implicitly with every stream
     * created without GPUPORT_STREAM_NON_BLOCKING, as CUDA's does; it is never destroyed. */
    gpuport_error *(*stream_priority_range)(gpuport_device *device, int32_t *least, int32_t *greatest);
    gpuport_error *(*stream_create)(gpuport_device *device, uint32_t flags, int32_t priority,
                                    gpuport_stream *stream);
    gpuport_error *(*legacy_stream)(gpuport_device *device, gpuport_stream *stream);
    /* The calling thread's per-thread default stream; UNSUPPORTED where there is none. */
    gpuport_error *(*per_thread_stream)(gpuport_device *device, gpuport_stream *stream);
    /* Its queued work still completes. */
    gpuport_error *(*stream_destroy)(gpuport_device *device, gpuport_stream stream);
    gpuport_error *(*stream_query)(gpuport_device *device, gpuport_stream stream, bool *done);
    gpuport_error *(*stream_synchronize)(gpuport_device *device, gpuport_stream stream);
    /* Later work on `stream` waits for the record of `event` current now. */
    gpuport_error *(*stream_wait_event)(gpuport_device *device, gpuport_stream stream, gpuport_event event);
    gpuport_error *(*stream_launch_host_func)(gpuport_device *device, gpuport_stream stream,
                                              gpuport_host_func func, void *user);

    /* Events. */
    gpuport_error *(*event_create)(gpuport_device *device, uint32_t flags, gpuport_event *event);
    /* It may still be pending. */
    gpuport_error *(*event_destroy)(gpuport_device *device, gpuport_event event);
    gpuport_error *(*event_record)(gpuport_device *device, gpuport_event event, gpuport_stream stream);
    /* Done when its latest record has completed, and when never recorded. */
    gpuport_error *(*event_query)(gpuport_device *device, gpuport_event event, bool *done);
    gpuport_error *(*event_synchronize)(gpuport_device *device, gpuport_event event);
    /* NOT_READY while either record is pending. */
    gpuport_error *(*event_elapsed_ms)(gpuport_device *device, gpuport_event start, gpuport_event end,
                                       float *ms);

    /* Memory. Addresses are in one address space shared by the plugin's devices and the
     * host's pageable memory, as CUDA's unified addressing; device memory need not be
     * host-accessible. gpuport never asks for more than total_memory at once. */
    gpuport_error *(*mem_alloc)(gpuport_device *device, uint64_t bytes, uint64_t *address);
    /* UNSUPPORTED where the device has no managed memory. */
    gpuport_error *(*mem_alloc_managed)(gpuport_device *device, uint64_t bytes, uint64_t *address);
    gpuport_error *(*mem_alloc_host)(gpuport_device *device, uint64_t bytes, uint32_t flags,
                                     uint64_t *address);
    /* Stream-ordered allocation; NULL function pointers where the device has none. */
    gpuport_error *(*mem_alloc_async)(gpuport_device *device, uint64_t bytes, gpuport_stream stream,
                                      uint64_t *address);
    gpuport_error *(*mem_free_async)(gpuport_device *device, uint64_t address, gpuport_stream stream);
    /* Memory no queued work uses any more. */
    gpuport_error *(*mem_free)(gpuport_device *device, uint64_t address);
    gpuport_error *(*mem_free_host)(gpuport_device *device, uint64_t address);

    /* The stream data path. Ranges were checked by gpuport and stay valid until the work
     * has run. Either address of a copy may be device, pinned, managed or pageable host
     * memory. */
    gpuport_error *(*memcpy_async)(gpuport_device *device, uint64_t dst, uint64_t src, uint64_t bytes,
                                   gpuport_stream stream);
    gpuport_error *(*memcpy_peer_async)(gpuport_device *device, uint64_t dst, gpuport_device *dst_device,
                                        uint64_t src, gpuport_device *src_device, uint64_t bytes,
                                        gpuport_stream stream);
    gpuport_error *(*memset_async)(gpuport_device *device, uint64_t dst, uint8_t value, uint64_t bytes,
                                   gpuport_stream stream);

    /* Modules and kernels. `format` names the image's format (a plugin's own tag, or
     * "registered" for a name its own registry resolves); an image of another format is
     * UNSUPPORTED, a malformed one INVALID_ARGUMENT. */
    gpuport_error *(*module_load)(gpuport_device *device, const char *format, const uint8_t *image,
                                  size_t image_len, gpuport_module *module);
    /* No kernel of it is launched afterwards; launches already queued complete. */
    gpuport_error *(*module_unload)(gpuport_device *device, gpuport_module module);
    gpuport_error *(*module_function)(gpuport_device *device, gpuport_module module, const char *name,
                                      gpuport_function *function);
    /* INVALID_ARGUMENT for arguments the kernel does not take. */
    gpuport_error *(*launch_kernel)(gpuport_device *device, gpuport_function function,
                                    const gpuport_launch_config *config, gpuport_stream stream,
                                    const gpuport_kernel_arg *args, size_t arg_count);

    /* --- Minor version 1 --- */

    /* A 2D copy on the stream data path: `height` rows of `width` bytes, row i read at
     * src + i * src_pitch and written at dst + i * dst_pitch (cuMemcpy2DAsync's shape),
     * either side any memory memcpy_async takes. gpuport passes at least one row of at
     * least one byte, pitches from `width` to 2^31 - 1, both spans (first row's start to
     * last row's end) checked, and never two devices' memory (those copies go row by row
     * through memcpy_peer_async). Optional: NULL, or a table too short to reach it, and
     * gpuport queues one memcpy_async per row. */
    gpuport_error *(*memcpy_2d_async)(gpuport_device *device, uint64_t dst, uint64_t dst_pitch, uint64_t src,
                                      uint64_t src_pitch, uint64_t width, uint64_t height,
                                      gpuport_stream stream);

    /* --- Minor version 2 --- */

    /* The stream's progress words (gpuport_stream_progress), so that a query reads them
     * instead of calling stream_query. The struct and its words stay valid, in place,
     * until the stream is destroyed (the legacy stream: until device_close; the
     * per-thread default stream: as long as the calling thread). gpuport asks once per
     * stream handle it makes: after stream_create, legacy_stream, per_thread_stream, and
     * for a raw handle it wraps. Optional: NULL, a table too short to reach it, or
     * UNSUPPORTED for a stream, and gpuport calls stream_query on every query of it. A
     * struct shorter than its first version, or a NULL or misaligned counter, is refused
     * (the stream's creation fails, naming the fault). */
    gpuport_error *(*stream_progress)(gpuport_device *device, gpuport_stream stream,
                                      const gpuport_stream_progress **progress);
} gpuport_plugin_api;

/* The entry point every plugin exports: its table, valid for the life of the process
 * (a plugin is never unloaded). NULL when the plugin cannot run at all. */
typedef const gpuport_plugin_api *(*gpuport_plugin_entry_fn)(void);
const gpuport_plugin_api *gpuport_plugin_entry(void);

#ifdef __cplusplus
}
#endif

#endif /* GPUPORT_PLUGIN_H */
