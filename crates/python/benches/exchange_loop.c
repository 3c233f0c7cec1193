/* The C level of the interchange bench (interchange.py): a consumer taking tensors from
 * a producer's DLPack C exchange table in a loop, as a framework does per operator call,
 * and the floor — the same loop over a producer written by hand that makes the one
 * allocation an export needs and fills the descriptor.
 *
 * Loaded with ctypes.PyDLL, so the GIL is held during the loops, as the table's
 * `*_py_object_*` functions require. Only the parts of dlpack.h these loops touch are
 * declared; the layouts are dlpack.h 1.x's. */

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

typedef struct {
    uint32_t major, minor;
} Version;

typedef struct {
    int32_t device_type, device_id;
} Device;

typedef struct {
    uint8_t code, bits;
    uint16_t lanes;
} DataType;

typedef struct {
    void *data;
    Device device;
    int32_t ndim;
    DataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} Tensor;

typedef struct Managed {
    Version version;
    void *manager_ctx;
    void (*deleter)(struct Managed *);
    uint64_t flags;
    Tensor dl_tensor;
} Managed;

typedef struct {
    Version version;
    void *prev_api;
} ApiHeader;

typedef struct {
    ApiHeader header;
    void *managed_tensor_allocator;
    int (*managed_tensor_from_py_object_no_sync)(void *py_object, Managed **out);
} Api;

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* n exchanges through `api` (gpuport's table): take the tensor, read it, delete it.
 * Returns the loop's nanoseconds, or -1 when an exchange fails (a Python exception is
 * then set). */
double gp_exchange_loop(const Api *api, void *py_object, long n) {
    volatile int64_t sink = 0;
    double start = now_ns();
    for (long i = 0; i < n; i++) {
        Managed *t = NULL;
        if (api->managed_tensor_from_py_object_no_sync(py_object, &t) != 0 || t == NULL) {
            return -1.0;
        }
        sink += t->dl_tensor.shape[0];
        if (t->deleter) {
            t->deleter(t);
        }
    }
    return now_ns() - start;
}

/* The hand-written producer: one allocation holding the managed tensor, its shape and
 * strides, filled from fixed facts (an 8 x 16 float32 array). */
typedef struct {
    Managed managed;
    int64_t dims[4];
} HandExport;

static void hand_delete(Managed *t) { free(t); }

/* Called through a pointer, as a producer's table function is. */
static int hand_export(void *py_object, Managed **out) {
    HandExport *e = malloc(sizeof *e);
    if (e == NULL) {
        return -1;
    }
    e->dims[0] = 8;
    e->dims[1] = 16;
    e->dims[2] = 16;
    e->dims[3] = 1;
    e->managed.version = (Version){1, 3};
    e->managed.manager_ctx = e;
    e->managed.deleter = hand_delete;
    e->managed.flags = 0;
    e->managed.dl_tensor = (Tensor){py_object, {1, 0}, 2, {2, 32, 1}, e->dims, e->dims + 2, 0};
    *out = &e->managed;
    return 0;
}

static int (*volatile hand_producer)(void *, Managed **) = hand_export;

/* The floor: n exchanges through the hand-written producer, read and deleted alike. */
double hand_exchange_loop(void *py_object, long n) {
    volatile int64_t sink = 0;
    double start = now_ns();
    for (long i = 0; i < n; i++) {
        Managed *t = NULL;
        if (hand_producer(py_object, &t) != 0) {
            return -1.0;
        }
        sink += t->dl_tensor.shape[0];
        t->deleter(t);
    }
    return now_ns() - start;
}
