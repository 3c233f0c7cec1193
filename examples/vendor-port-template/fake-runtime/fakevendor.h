/* fakevendor.h: the C API of the fake vendor runtime the gpuport vendor port template
 * ports to. A real vendor's header has this shape: status codes, opaque handles, and one
 * entry symbol handing out a versioned table of functions.
 *
 * Every function returns an fvStatus; FV_SUCCESS is 0. Calls are made on behalf of the
 * calling thread's current device (fvSetDevice; device 0 until set). Functions queued on a
 * stream run in order on a thread of the runtime; a host function may make no call into
 * the runtime. A NULL stream is the device's default stream, which is ordered with every
 * stream created without FV_STREAM_NON_BLOCKING. Device memory is not host memory: reach
 * it only through the runtime's copies. */
#ifndef FAKEVENDOR_H
#define FAKEVENDOR_H

#include <stddef.h>
#include <stdint.h>

#define FV_API_VERSION 1u

typedef uint32_t fvStatus;
#define FV_SUCCESS 0u
#define FV_ERROR_INVALID_VALUE 1u
#define FV_ERROR_OUT_OF_MEMORY 2u
#define FV_ERROR_NOT_INITIALIZED 3u
#define FV_ERROR_NO_DEVICE 100u
#define FV_ERROR_INVALID_DEVICE 101u
#define FV_ERROR_INVALID_IMAGE 200u
#define FV_ERROR_INVALID_CONTEXT 201u
#define FV_ERROR_INVALID_HANDLE 400u
#define FV_ERROR_NOT_FOUND 500u
#define FV_ERROR_NOT_READY 600u
#define FV_ERROR_ILLEGAL_ADDRESS 700u
#define FV_ERROR_PEER_ACCESS_ALREADY_ENABLED 704u
#define FV_ERROR_PEER_ACCESS_NOT_ENABLED 705u
#define FV_ERROR_LAUNCH_FAILURE 719u
#define FV_ERROR_NOT_PERMITTED 800u
#define FV_ERROR_NOT_SUPPORTED 801u
#define FV_ERROR_UNKNOWN 999u

typedef uint64_t fvDevicePtr;
typedef struct fvStream_st *fvStream;
typedef struct fvEvent_st *fvEvent;
typedef struct fvModule_st *fvModule;
typedef struct fvFunction_st *fvFunction;
typedef void (*fvHostFn)(void *user);

#define FV_STREAM_NON_BLOCKING 0x1u
#define FV_EVENT_DISABLE_TIMING 0x2u

/* fvPointerAttributes.kind */
#define FV_MEMORY_UNREGISTERED 0
#define FV_MEMORY_DEVICE 1
#define FV_MEMORY_HOST 2
#define FV_MEMORY_MANAGED 3

typedef struct fvPointerAttributes {
    int32_t kind;
    int32_t device;
    fvDevicePtr start;
    size_t size;
} fvPointerAttributes;

typedef struct fvApi {
    uint32_t size;    /* sizeof(fvApi) as the library was built: fields are only appended */
    uint32_t version; /* FV_API_VERSION of the library */
    fvStatus (*init)(uint32_t flags);
    const char *(*statusName)(fvStatus status);
    const char *(*statusString)(fvStatus status);
    fvStatus (*deviceCount)(int32_t *count);
    fvStatus (*setDevice)(int32_t device);
    fvStatus (*getDevice)(int32_t *device);
    fvStatus (*deviceName)(char *name, int32_t len, int32_t device);
    fvStatus (*deviceTotalMem)(size_t *bytes, int32_t device);
    fvStatus (*deviceComputeUnits)(int32_t *units, int32_t device);
    fvStatus (*deviceCanAccessPeer)(int32_t *can, int32_t device, int32_t peer);
    fvStatus (*deviceEnablePeerAccess)(int32_t peer);
    fvStatus (*deviceSynchronize)(void);
    fvStatus (*streamPriorityRange)(int32_t *least, int32_t *greatest);
    fvStatus (*malloc)(fvDevicePtr *ptr, size_t size);
    fvStatus (*free)(fvDevicePtr ptr);
    fvStatus (*mallocHost)(void **ptr, size_t size);
    fvStatus (*freeHost)(void *ptr);
    fvStatus (*mallocManaged)(fvDevicePtr *ptr, size_t size);
    fvStatus (*mallocAsync)(fvDevicePtr *ptr, size_t size, fvStream stream);
    fvStatus (*freeAsync)(fvDevicePtr ptr, fvStream stream);
    fvStatus (*pointerGetAttributes)(fvPointerAttributes *attributes, fvDevicePtr ptr);
    fvStatus (*memset)(fvDevicePtr dst, uint8_t value, size_t size);
    fvStatus (*memsetAsync)(fvDevicePtr dst, uint8_t value, size_t size, fvStream stream);
    fvStatus (*memcpyAsync)(fvDevicePtr dst, fvDevicePtr src, size_t size, fvStream stream);
    fvStatus (*memcpyPeerAsync)(fvDevicePtr dst, int32_t dstDevice, fvDevicePtr src, int32_t srcDevice,
                                size_t size, fvStream stream);
    fvStatus (*streamCreate)(fvStream *stream, uint32_t flags, int32_t priority);
    fvStatus (*streamDestroy)(fvStream stream);
    fvStatus (*streamSynchronize)(fvStream stream);
    fvStatus (*streamQuery)(fvStream stream); /* FV_ERROR_NOT_READY while work is pending */
    fvStatus (*streamWaitEvent)(fvStream stream, fvEvent event);
    fvStatus (*launchHostFunc)(fvStream stream, fvHostFn fn, void *user);
    fvStatus (*eventCreate)(fvEvent *event, uint32_t flags);
    fvStatus (*eventDestroy)(fvEvent event);
    fvStatus (*eventRecord)(fvEvent event, fvStream stream);
    fvStatus (*eventQuery)(fvEvent event); /* FV_ERROR_NOT_READY while pending */
    fvStatus (*eventSynchronize)(fvEvent event);
    fvStatus (*eventElapsedTime)(float *ms, fvEvent start, fvEvent end);
    /* A module image is text: the line "fakevendor module", then one "kernel NAME" line
     * per kernel. The runtime runs fill_u32(u32 *ptr, u32 n, u32 value). */
    fvStatus (*moduleLoadData)(fvModule *module, const void *image, size_t size);
    fvStatus (*moduleUnload)(fvModule module);
    fvStatus (*moduleGetFunction)(fvFunction *function, fvModule module, const char *name);
    fvStatus (*launchKernel)(fvFunction function, const uint32_t grid[3], const uint32_t block[3],
                             uint32_t sharedMemBytes, fvStream stream, void **params);
} fvApi;

/* The function table for API major version `version`, or NULL when the library does not
 * serve it. The table lives as long as the process. */
const fvApi *fvGetApi(uint32_t version);

#endif
