/*
 * A gpuport device plugin in plain C11 with POSIX threads: a software device with its own
 * memory space, asynchronous in-order streams (one worker thread each), the legacy
 * default stream's implicit synchronisation, real events with timestamps, host functions
 * and one kernel (fill_u32). It implements gpuport_plugin.h and nothing else; gpuport's
 * vendor kit builds the whole Device/Stream/Event contract on it.
 *
 * Build: cc -std=c11 -O2 -fPIC -shared -I<gpuport>/crates/plugin-abi/include \
 *           c_plugin.c -o libgpuport_c_plugin.so -lpthread
 * Load:  GPUPORT_PLUGINS=/path/libgpuport_c_plugin.so (devices "cplugin:0", "cplugin:1").
 *
 * Compiled with one of the BROKEN_* macros it breaks one rule of the contract, and the
 * conformance suite must fail it (tests/plugins/c). Compiled with one of the BREACH_*
 * macros it breaks a rule the loader itself checks (running a host function twice,
 * handing out an address twice, ...), and gpuport must refuse or report it without
 * touching freed memory (tests/plugins/c/tests/contract.rs).
 */
#define _POSIX_C_SOURCE 200809L

#include "gpuport_plugin.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The backend's name; each broken variant is built under a name of its own. */
#ifndef PLUGIN_NAME
#define PLUGIN_NAME "cplugin"
#endif

#define DEVICE_COUNT 2
#define CAPACITY (1ull << 30) /* bytes of each device's memory */
#define ALIGNMENT 256         /* of every allocation */

/* ---- Errors: the plugin's error objects ------------------------------------------- */

struct gpuport_error {
    int32_t kind;
    char message[256];
};

static gpuport_error *error(int32_t kind, const char *fmt, ...) {
    gpuport_error *e = malloc(sizeof *e);
    if (e == NULL) {
        static gpuport_error out_of_memory = {GPUPORT_ERROR_OUT_OF_MEMORY, "no memory for an error"};
        return &out_of_memory; /* never destroyed: see error_destroy */
    }
    e->kind = kind;
    va_list args;
    va_start(args, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, args);
    va_end(args);
    return e;
}

static int32_t error_kind(const gpuport_error *e) { return e->kind; }
static const char *error_message(const gpuport_error *e) { return e->message; }
static void error_destroy(gpuport_error *e) {
    if (e != NULL && !(e->kind == GPUPORT_ERROR_OUT_OF_MEMORY && strcmp(e->message, "no memory for an error") == 0)) {
        free(e);
    }
}

/* ---- Memory: every allocation, for pointer attributes and range checks ------------- */

typedef struct allocation {
    uint64_t base, len;
    void *block; /* what aligned_alloc gave (base, but for BREACH_MISALIGNED) */
    int device;
    int32_t kind; /* GPUPORT_MEMORY_DEVICE or GPUPORT_MEMORY_PINNED_HOST */
    struct allocation *next;
} allocation;

static pthread_mutex_t memory_lock = PTHREAD_MUTEX_INITIALIZER;
static allocation *allocations;
static uint64_t in_use[DEVICE_COUNT];

/* The allocation holding [address, address + len), copied out; 0 when none does. */
static int find_allocation(uint64_t address, uint64_t len, allocation *out) {
    int found = 0;
    pthread_mutex_lock(&memory_lock);
    for (allocation *a = allocations; a != NULL; a = a->next) {
        if (address >= a->base && address - a->base < a->len && len <= a->len - (address - a->base)) {
            *out = *a;
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&memory_lock);
    return found;
}

/* ---- Streams, events and the work on them ------------------------------------------ */

typedef struct stream stream;
typedef struct event event;

/* What an operation waits for before it runs: a stream's sequence number, or an event's
 * record. Each holds a reference to its stream or event. */
typedef struct wait_for {
    stream *stream;
    uint64_t seq;
    event *event;
    uint64_t generation;
} wait_for;

enum op_kind { OP_COPY, OP_COPY_2D, OP_SET, OP_HOST, OP_RECORD, OP_FILL, OP_WAIT };

typedef struct op {
    enum op_kind kind;
    uint64_t dst, src, len; /* copy; set (len bytes of value); fill (len u32s of value) */
    uint64_t rows, dst_pitch, src_pitch; /* 2D copy: rows of len bytes, each side's rows a pitch apart */
    uint32_t value;
    gpuport_host_func func;
    void *user;
    event *record;          /* OP_RECORD: the event and the generation it completes */
    uint64_t generation;
    wait_for *waits;
    size_t wait_count;
    struct op *next;
} op;

typedef struct gpuport_device device;

struct stream {
    device *dev;
    int blocking; /* created without GPUPORT_STREAM_NON_BLOCKING */
    int legacy;   /* the device's legacy default stream */
    atomic_int refs;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    op *head, *tail;
    /* Changed under the lock, and atomic: gpuport reads them without a call through
     * `progress` (stream_progress). */
    _Atomic uint64_t enqueued, completed;
    _Atomic uint32_t publishing; /* raised while a counted record's event is being told */
#ifdef BROKEN_EVENT_BEFORE_COUNT
    _Atomic uint64_t published; /* the count it publishes, behind `completed` */
#endif
    gpuport_stream_progress progress;
    int closing;
    stream *next_of_device; /* the device's list, under its lock */
};

struct event {
    atomic_int refs;
    int timing;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    uint64_t recorded, completed;
    struct timespec at;
};

struct gpuport_device {
    int ordinal;
    pthread_mutex_t lock; /* its stream list, and the order of implicit synchronisation */
    stream *streams;
    stream *legacy;
    int opened;
};

static device devices[DEVICE_COUNT] = {
    {0, PTHREAD_MUTEX_INITIALIZER, NULL, NULL, 0},
    {1, PTHREAD_MUTEX_INITIALIZER, NULL, NULL, 0},
};

static void stream_release(stream *s) {
    if (atomic_fetch_sub(&s->refs, 1) == 1) {
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->changed);
        free(s);
    }
}

static void event_release(event *e) {
    if (atomic_fetch_sub(&e->refs, 1) == 1) {
        pthread_mutex_destroy(&e->lock);
        pthread_cond_destroy(&e->changed);
        free(e);
    }
}

static void op_free(op *o) {
    for (size_t i = 0; i < o->wait_count; i++) {
        if (o->waits[i].stream != NULL) stream_release(o->waits[i].stream);
        if (o->waits[i].event != NULL) event_release(o->waits[i].event);
    }
    if (o->record != NULL) event_release(o->record);
    free(o->waits);
    free(o);
}

static void wait_for_stream(stream *s, uint64_t seq) {
    pthread_mutex_lock(&s->lock);
    while (s->completed < seq) pthread_cond_wait(&s->changed, &s->lock);
    pthread_mutex_unlock(&s->lock);
}

static void wait_for_event(event *e, uint64_t generation) {
    pthread_mutex_lock(&e->lock);
    while (e->completed < generation) pthread_cond_wait(&e->changed, &e->lock);
    pthread_mutex_unlock(&e->lock);
}

/* Completes a record's event. Called by the worker with the stream's lock held, right
 * after counting the record complete: whoever sees the event complete then sees the
 * stream's count, and whoever sees the count (under that lock) sees the event complete —
 * a stream that says it is done never has an incomplete event recorded on it. */
static void tell_event(op *o) {
    event *e = o->record;
    pthread_mutex_lock(&e->lock);
    if (o->generation > e->completed) {
        e->completed = o->generation;
        clock_gettime(CLOCK_MONOTONIC, &e->at);
    }
    pthread_cond_broadcast(&e->changed);
    pthread_mutex_unlock(&e->lock);
}

static void run(op *o) {
    for (size_t i = 0; i < o->wait_count; i++) {
        if (o->waits[i].stream != NULL) wait_for_stream(o->waits[i].stream, o->waits[i].seq);
        if (o->waits[i].event != NULL) wait_for_event(o->waits[i].event, o->waits[i].generation);
    }
    switch (o->kind) {
    case OP_COPY:
        memmove((void *)(uintptr_t)o->dst, (const void *)(uintptr_t)o->src, (size_t)o->len);
        break;
    case OP_COPY_2D:
        for (uint64_t r = 0; r < o->rows; r++)
            memmove((void *)(uintptr_t)(o->dst + r * o->dst_pitch), (const void *)(uintptr_t)(o->src + r * o->src_pitch),
                    (size_t)o->len);
        break;
    case OP_SET:
        memset((void *)(uintptr_t)o->dst, (int)o->value, (size_t)o->len);
        break;
    case OP_FILL: {
        uint32_t *out = (uint32_t *)(uintptr_t)o->dst;
        for (uint64_t i = 0; i < o->len; i++) out[i] = o->value;
        break;
    }
    case OP_HOST:
#if defined(BREACH_HOST_FUNC_NULL_USER)
        o->func(NULL);
#else
        o->func(o->user);
#endif
#ifdef BREACH_HOST_FUNC_TWICE
        o->func(o->user);
#endif
        break;
    case OP_RECORD:
        break; /* told with the stream's count: see tell_event */
    case OP_WAIT:
        break;
    }
}

/* Takes a stream off its device's list. */
static void unlink_stream(stream *s) {
    device *dev = s->dev;
    pthread_mutex_lock(&dev->lock);
    for (stream **p = &dev->streams; *p != NULL; p = &(*p)->next_of_device) {
        if (*p == s) {
            *p = s->next_of_device;
            break;
        }
    }
    pthread_mutex_unlock(&dev->lock);
}

/* A stream's worker: runs its operations in order until the stream is destroyed and
 * drained; only then does the stream leave its device's list, so a device-wide
 * synchronize still waits for a destroyed stream's queued work. */
static void *worker(void *arg) {
    stream *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (s->head == NULL && !s->closing) pthread_cond_wait(&s->changed, &s->lock);
        op *o = s->head;
        if (o == NULL) break; /* closing, and drained */
        pthread_mutex_unlock(&s->lock);
        run(o);
        pthread_mutex_lock(&s->lock);
        s->head = o->next;
        if (s->head == NULL) s->tail = NULL;
        /* A reader of the counters that sees the record counted must not take the
         * stream for done before the event is told: it sees `publishing` raised and asks
         * stream_query, which waits for this lock. */
        if (o->kind == OP_RECORD) atomic_store(&s->publishing, 1);
        s->completed++;
#ifdef BREACH_PROGRESS_PAST_SUBMITTED
        s->completed++; /* counts past `submitted` */
#endif
        if (o->kind == OP_RECORD) {
            tell_event(o);
            atomic_store(&s->publishing, 0);
        }
#ifdef BROKEN_EVENT_BEFORE_COUNT
        /* Publishes its count only once an operation other than a record completes: an
         * event recorded last is told while the count gpuport reads says its record has
         * not run (the plugin's own query and synchronize use the true count). */
        if (o->kind != OP_RECORD) atomic_store(&s->published, s->completed);
#endif
        pthread_cond_broadcast(&s->changed);
        pthread_mutex_unlock(&s->lock);
        op_free(o);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    unlink_stream(s);
    stream_release(s);
    return NULL;
}

static gpuport_error *new_stream(device *dev, int blocking, int legacy, stream **out) {
    stream *s = calloc(1, sizeof *s);
    if (s == NULL) return error(GPUPORT_ERROR_OUT_OF_MEMORY, "no memory for a stream");
    s->dev = dev;
    s->blocking = blocking;
    s->legacy = legacy;
    atomic_init(&s->refs, 2); /* the handle and the worker */
    atomic_init(&s->enqueued, 0);
    atomic_init(&s->completed, 0);
    atomic_init(&s->publishing, 0);
    s->progress.struct_size = sizeof s->progress;
    s->progress.submitted = (const uint64_t *)&s->enqueued;
#if defined(BROKEN_PROGRESS_WRONG_COUNTER)
    s->progress.completed = (const uint64_t *)&s->enqueued; /* always "done" */
#elif defined(BROKEN_EVENT_BEFORE_COUNT)
    atomic_init(&s->published, 0);
    s->progress.completed = (const uint64_t *)&s->published;
#else
    s->progress.completed = (const uint64_t *)&s->completed;
#endif
    s->progress.publishing = (const uint32_t *)&s->publishing;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->changed, NULL);
    pthread_t thread;
    if (pthread_create(&thread, NULL, worker, s) != 0) {
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->changed);
        free(s);
        return error(GPUPORT_ERROR_FAILED, "no thread for a stream");
    }
    pthread_detach(thread);
    pthread_mutex_lock(&dev->lock);
    s->next_of_device = dev->streams;
    dev->streams = s;
    pthread_mutex_unlock(&dev->lock);
    *out = s;
    return NULL;
}

static gpuport_error *add_wait(op *o, stream *s, uint64_t seq, event *e, uint64_t generation) {
    wait_for *grown = realloc(o->waits, (o->wait_count + 1) * sizeof *grown);
    if (grown == NULL) return error(GPUPORT_ERROR_OUT_OF_MEMORY, "no memory for a wait");
    o->waits = grown;
    if (s != NULL) atomic_fetch_add(&s->refs, 1);
    if (e != NULL) atomic_fetch_add(&e->refs, 1);
    o->waits[o->wait_count++] = (wait_for){s, seq, e, generation};
    return NULL;
}

/* Queues `o` on `s`. Under the device's lock, so the implicit synchronisation with the
 * legacy default stream sees every earlier operation: the legacy stream's work waits for
 * the work already queued on every blocking stream, and a blocking stream's work for the
 * legacy stream's. Returns the operation's sequence number. */
static gpuport_error *enqueue(stream *s, op *o, uint64_t *seq) {
    device *dev = s->dev;
    gpuport_error *e = NULL;
    pthread_mutex_lock(&dev->lock);
#ifndef BROKEN_NO_IMPLICIT_SYNC
    if (s->legacy) {
        for (stream *t = dev->streams; t != NULL && e == NULL; t = t->next_of_device) {
            if (t == s || !t->blocking) continue;
            pthread_mutex_lock(&t->lock);
            uint64_t last = t->enqueued;
            pthread_mutex_unlock(&t->lock);
            e = add_wait(o, t, last, NULL, 0);
        }
    } else if (s->blocking && dev->legacy != NULL) {
        pthread_mutex_lock(&dev->legacy->lock);
        uint64_t last = dev->legacy->enqueued;
        pthread_mutex_unlock(&dev->legacy->lock);
        e = add_wait(o, dev->legacy, last, NULL, 0);
    }
#endif
    if (e == NULL) {
        pthread_mutex_lock(&s->lock);
        if (s->tail != NULL) s->tail->next = o; else s->head = o;
        s->tail = o;
        s->enqueued++;
        if (seq != NULL) *seq = s->enqueued;
        pthread_cond_broadcast(&s->changed);
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_unlock(&dev->lock);
    if (e != NULL) op_free(o);
    return e;
}

static op *new_op(enum op_kind kind) {
    op *o = calloc(1, sizeof *o);
    if (o != NULL) o->kind = kind;
    return o;
}

#define NEW_OP(name, kind)                                                            \
    op *name = new_op(kind);                                                          \
    if (name == NULL) return error(GPUPORT_ERROR_OUT_OF_MEMORY, "no memory for work")

static stream *as_stream(gpuport_stream handle) { return (stream *)handle; }
static event *as_event(gpuport_event handle) { return (event *)handle; }

/* ---- The table's functions ----------------------------------------------------------- */

static gpuport_error *stream_destroy(gpuport_device *dev, gpuport_stream handle);

static gpuport_error *initialize(void) {
#ifdef BREACH_INITIALIZE_BLOCKS
    for (;;) { /* never returns */
        struct timespec second = {1, 0};
        nanosleep(&second, NULL);
    }
#endif
    return NULL;
}

static gpuport_error *device_count(uint32_t *count) {
#ifdef BREACH_DEVICE_COUNT
    *count = 1u << 31; /* and every one opens */
#else
    *count = DEVICE_COUNT;
#endif
    return NULL;
}

static gpuport_error *device_open(uint32_t ordinal, gpuport_device **out) {
#ifdef BREACH_DEVICE_COUNT
    ordinal %= DEVICE_COUNT;
#endif
    if (ordinal >= DEVICE_COUNT) return error(GPUPORT_ERROR_DEVICE_NOT_FOUND, "no device %u", ordinal);
    device *dev = &devices[ordinal];
    pthread_mutex_lock(&dev->lock);
    int first = dev->legacy == NULL;
    pthread_mutex_unlock(&dev->lock);
    if (first) {
        stream *legacy;
        gpuport_error *e = new_stream(dev, 1, 1, &legacy);
        if (e != NULL) return e;
        pthread_mutex_lock(&dev->lock);
        int won = dev->legacy == NULL;
        if (won) dev->legacy = legacy; /* kept for the life of the process */
        pthread_mutex_unlock(&dev->lock);
        if (!won) { /* another thread opened it first: this one goes again */
            legacy->legacy = 0;
            stream_destroy(dev, (gpuport_stream)legacy);
        }
    }
    pthread_mutex_lock(&dev->lock);
    dev->opened++;
    pthread_mutex_unlock(&dev->lock);
    *out = dev;
    return NULL;
}

static gpuport_error *device_close(gpuport_device *dev) {
    pthread_mutex_lock(&dev->lock);
    dev->opened--;
    pthread_mutex_unlock(&dev->lock);
    return NULL;
}

static gpuport_error *device_info(gpuport_device *dev, gpuport_device_info *info) {
    gpuport_device_info ours;
    memset(&ours, 0, sizeof ours);
    ours.struct_size = info->struct_size;
    snprintf(ours.name, sizeof ours.name, "gpuport C plugin device %d", dev->ordinal);
    ours.total_memory = CAPACITY;
    ours.multiprocessors = 1;
    ours.compute_major = -1;
    ours.compute_minor = -1;
    snprintf(ours.arch, sizeof ours.arch, "c11");
    /* Nothing past the caller's size. */
    memcpy(info, &ours, info->struct_size < sizeof ours ? info->struct_size : sizeof ours);
    return NULL;
}

static gpuport_error *can_access_peer(gpuport_device *dev, gpuport_device *peer, bool *can) {
    (void)dev;
    (void)peer;
    *can = true; /* one address space */
    return NULL;
}

static gpuport_error *enable_peer_access(gpuport_device *dev, gpuport_device *peer) {
    (void)dev;
    (void)peer;
    return NULL;
}

static gpuport_error *pointer_attributes(gpuport_device *dev, uint64_t address, gpuport_pointer_attributes *out) {
    (void)dev;
    gpuport_pointer_attributes ours;
    memset(&ours, 0, sizeof ours);
    ours.struct_size = out->struct_size;
    ours.device_ordinal = -1;
    allocation a;
    if (find_allocation(address, 0, &a)) {
        ours.memory = a.kind;
        ours.device_ordinal = a.device;
        ours.host_accessible = a.kind == GPUPORT_MEMORY_PINNED_HOST;
        ours.device_accessible = 1;
        ours.allocation_base = a.base;
        ours.allocation_len = a.len;
    }
    memcpy(out, &ours, out->struct_size < sizeof ours ? out->struct_size : sizeof ours);
    return NULL;
}

static gpuport_error *device_synchronize(gpuport_device *dev) {
    /* Every stream's work queued before this call. */
    pthread_mutex_lock(&dev->lock);
    size_t n = 0;
    for (stream *s = dev->streams; s != NULL; s = s->next_of_device) n++;
    stream **all = calloc(n ? n : 1, sizeof *all);
    uint64_t *targets = calloc(n ? n : 1, sizeof *targets);
    if (all == NULL || targets == NULL) {
        pthread_mutex_unlock(&dev->lock);
        free(all);
        free(targets);
        return error(GPUPORT_ERROR_OUT_OF_MEMORY, "no memory to synchronize");
    }
    size_t i = 0;
    for (stream *s = dev->streams; s != NULL; s = s->next_of_device, i++) {
        atomic_fetch_add(&s->refs, 1);
        all[i] = s;
        pthread_mutex_lock(&s->lock);
        targets[i] = s->enqueued;
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_unlock(&dev->lock);
    for (i = 0; i < n; i++) {
        wait_for_stream(all[i], targets[i]);
        stream_release(all[i]);
    }
    free(all);
    free(targets);
    return NULL;
}

static gpuport_error *stream_priority_range(gpuport_device *dev, int32_t *least, int32_t *greatest) {
    (void)dev;
    *least = 0;
    *greatest = 0;
    return NULL;
}

static gpuport_error *stream_create(gpuport_device *dev, uint32_t flags, int32_t priority, gpuport_stream *out) {
    (void)priority; /* one priority */
    stream *s;
    gpuport_error *e = new_stream(dev, (flags & GPUPORT_STREAM_NON_BLOCKING) == 0, 0, &s);
    if (e == NULL) *out = (gpuport_stream)s;
    return e;
}

static gpuport_error *legacy_stream(gpuport_device *dev, gpuport_stream *out) {
    *out = (gpuport_stream)dev->legacy;
    return NULL;
}

static gpuport_error *stream_destroy(gpuport_device *dev, gpuport_stream handle) {
    stream *s = as_stream(handle);
    (void)dev;
    if (s == NULL || s->legacy) return error(GPUPORT_ERROR_INVALID_HANDLE, "not a created stream");
    /* Its queued work still completes: the worker drains, leaves the device's list, and
     * lets go. */
    pthread_mutex_lock(&s->lock);
    s->closing = 1;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->lock);
    stream_release(s);
    return NULL;
}

static gpuport_error *stream_query(gpuport_device *dev, gpuport_stream handle, bool *done) {
    (void)dev;
    stream *s = as_stream(handle);
#ifdef BROKEN_QUERY_ALWAYS_DONE
    (void)s;
    *done = true;
#else
    pthread_mutex_lock(&s->lock);
    *done = s->completed == s->enqueued;
    pthread_mutex_unlock(&s->lock);
#endif
    return NULL;
}

#ifndef BROKEN_QUERY_ALWAYS_DONE /* that variant's broken query must be the one asked */
/* The stream's counters, so that gpuport reads them instead of calling stream_query;
 * they live in the stream, which outlives every handle gpuport holds of it. */
static gpuport_error *stream_progress(gpuport_device *dev, gpuport_stream handle,
                                      const gpuport_stream_progress **progress) {
    (void)dev;
    *progress = &as_stream(handle)->progress;
    return NULL;
}
#endif

static gpuport_error *stream_synchronize(gpuport_device *dev, gpuport_stream handle) {
    (void)dev;
    stream *s = as_stream(handle);
    pthread_mutex_lock(&s->lock);
    uint64_t target = s->enqueued;
    pthread_mutex_unlock(&s->lock);
    wait_for_stream(s, target);
    return NULL;
}

static gpuport_error *stream_wait_event(gpuport_device *dev, gpuport_stream handle, gpuport_event event_handle) {
    (void)dev;
#ifdef BROKEN_NOOP_WAIT
    (void)handle;
    (void)event_handle;
    return NULL;
#else
    event *e = as_event(event_handle);
    pthread_mutex_lock(&e->lock);
    uint64_t generation = e->recorded; /* the record current now */
    pthread_mutex_unlock(&e->lock);
    NEW_OP(o, OP_WAIT);
    gpuport_error *err = add_wait(o, NULL, 0, e, generation);
    if (err != NULL) {
        op_free(o);
        return err;
    }
    return enqueue(as_stream(handle), o, NULL);
#endif
}

static gpuport_error *stream_launch_host_func(gpuport_device *dev, gpuport_stream handle, gpuport_host_func func,
                                              void *user) {
    (void)dev;
    NEW_OP(o, OP_HOST);
    o->func = func;
    o->user = user;
    return enqueue(as_stream(handle), o, NULL);
}

static gpuport_error *event_create(gpuport_device *dev, uint32_t flags, gpuport_event *out) {
    (void)dev;
    event *e = calloc(1, sizeof *e);
    if (e == NULL) return error(GPUPORT_ERROR_OUT_OF_MEMORY, "no memory for an event");
    atomic_init(&e->refs, 1);
    e->timing = (flags & GPUPORT_EVENT_DISABLE_TIMING) == 0;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->changed, NULL);
    *out = (gpuport_event)e;
    return NULL;
}

static gpuport_error *event_destroy(gpuport_device *dev, gpuport_event handle) {
    (void)dev;
    event_release(as_event(handle)); /* records still queued hold their own reference */
    return NULL;
}

static gpuport_error *event_record(gpuport_device *dev, gpuport_event handle, gpuport_stream stream_handle) {
    (void)dev;
    event *e = as_event(handle);
    NEW_OP(o, OP_RECORD);
    atomic_fetch_add(&e->refs, 1);
    o->record = e;
    pthread_mutex_lock(&e->lock);
    o->generation = ++e->recorded;
    pthread_mutex_unlock(&e->lock);
    return enqueue(as_stream(stream_handle), o, NULL);
}

static gpuport_error *event_query(gpuport_device *dev, gpuport_event handle, bool *done) {
    (void)dev;
    event *e = as_event(handle);
    pthread_mutex_lock(&e->lock);
    *done = e->completed >= e->recorded;
    pthread_mutex_unlock(&e->lock);
    return NULL;
}

static gpuport_error *event_synchronize(gpuport_device *dev, gpuport_event handle) {
    (void)dev;
    event *e = as_event(handle);
    pthread_mutex_lock(&e->lock);
    uint64_t generation = e->recorded;
    pthread_mutex_unlock(&e->lock);
    wait_for_event(e, generation);
    return NULL;
}

static gpuport_error *event_elapsed_ms(gpuport_device *dev, gpuport_event start, gpuport_event end, float *ms) {
    (void)dev;
    event *a = as_event(start), *b = as_event(end);
    if (!a->timing || !b->timing) return error(GPUPORT_ERROR_INVALID_ARGUMENT, "an event without timing");
#ifdef BROKEN_FAKE_ELAPSED
    *ms = 1.0f;
    return NULL;
#else
    struct timespec ta, tb;
    int ready = 1, recorded = 1;
    pthread_mutex_lock(&a->lock);
    ready &= a->completed >= a->recorded;
    recorded &= a->recorded > 0;
    ta = a->at;
    pthread_mutex_unlock(&a->lock);
    pthread_mutex_lock(&b->lock);
    ready &= b->completed >= b->recorded;
    recorded &= b->recorded > 0;
    tb = b->at;
    pthread_mutex_unlock(&b->lock);
    if (!recorded) return error(GPUPORT_ERROR_INVALID_ARGUMENT, "an event that was never recorded");
    if (!ready) return error(GPUPORT_ERROR_NOT_READY, "an event's work has not completed");
    *ms = (float)((double)(tb.tv_sec - ta.tv_sec) * 1e3 + (double)(tb.tv_nsec - ta.tv_nsec) / 1e6);
    return NULL;
#endif
}

static gpuport_error *allocate(gpuport_device *dev, uint64_t bytes, int32_t kind, uint64_t *address) {
    if (bytes == 0) {
        *address = 0;
        return NULL;
    }
    if (bytes > CAPACITY) return error(GPUPORT_ERROR_OUT_OF_MEMORY, "%llu bytes", (unsigned long long)bytes);
#ifdef BREACH_SAME_ADDRESS
    /* Hands out the newest live allocation of the kind again, as a new one. */
    pthread_mutex_lock(&memory_lock);
    for (allocation *a = allocations; a != NULL; a = a->next) {
        if (a->kind == kind && a->len >= bytes) {
            *address = a->base;
            pthread_mutex_unlock(&memory_lock);
            return NULL;
        }
    }
    pthread_mutex_unlock(&memory_lock);
#endif
    pthread_mutex_lock(&memory_lock);
    int room = in_use[dev->ordinal] + bytes <= CAPACITY;
    if (room) in_use[dev->ordinal] += bytes;
    pthread_mutex_unlock(&memory_lock);
    if (!room) return error(GPUPORT_ERROR_OUT_OF_MEMORY, "%llu more bytes", (unsigned long long)bytes);
    uint64_t rounded = (bytes + ALIGNMENT - 1) / ALIGNMENT * ALIGNMENT;
#ifdef BREACH_MISALIGNED
    rounded += ALIGNMENT; /* room for the offset below */
#endif
    void *p = aligned_alloc(ALIGNMENT, (size_t)rounded);
    allocation *a = malloc(sizeof *a);
    if (p == NULL || a == NULL) {
        free(p);
        free(a);
        pthread_mutex_lock(&memory_lock);
        in_use[dev->ordinal] -= bytes;
        pthread_mutex_unlock(&memory_lock);
        return error(GPUPORT_ERROR_OUT_OF_MEMORY, "%llu bytes", (unsigned long long)bytes);
    }
#ifdef BREACH_MISALIGNED
    uint64_t base = (uint64_t)(uintptr_t)p + 8;
#else
    uint64_t base = (uint64_t)(uintptr_t)p;
#endif
    *a = (allocation){base, bytes, p, dev->ordinal, kind, NULL};
    pthread_mutex_lock(&memory_lock);
    a->next = allocations;
    allocations = a;
    pthread_mutex_unlock(&memory_lock);
    *address = a->base;
    return NULL;
}

static gpuport_error *release(uint64_t address, int32_t kind) {
    if (address == 0) return NULL;
    pthread_mutex_lock(&memory_lock);
    for (allocation **p = &allocations; *p != NULL; p = &(*p)->next) {
        allocation *a = *p;
        if (a->base == address && a->kind == kind) {
            *p = a->next;
            in_use[a->device] -= a->len;
            pthread_mutex_unlock(&memory_lock);
            free(a->block);
            free(a);
            return NULL;
        }
    }
    pthread_mutex_unlock(&memory_lock);
    return error(GPUPORT_ERROR_INVALID_ARGUMENT, "0x%llx is not an allocation", (unsigned long long)address);
}

static gpuport_error *mem_alloc(gpuport_device *dev, uint64_t bytes, uint64_t *address) {
    return allocate(dev, bytes, GPUPORT_MEMORY_DEVICE, address);
}

static gpuport_error *mem_alloc_host(gpuport_device *dev, uint64_t bytes, uint32_t flags, uint64_t *address) {
    (void)flags;
    return allocate(dev, bytes, GPUPORT_MEMORY_PINNED_HOST, address);
}

static gpuport_error *mem_free(gpuport_device *dev, uint64_t address) {
    (void)dev;
    return release(address, GPUPORT_MEMORY_DEVICE);
}

static gpuport_error *mem_free_host(gpuport_device *dev, uint64_t address) {
    (void)dev;
    return release(address, GPUPORT_MEMORY_PINNED_HOST);
}

static gpuport_error *memcpy_async(gpuport_device *dev, uint64_t dst, uint64_t src, uint64_t bytes,
                                   gpuport_stream handle) {
    (void)dev;
    NEW_OP(o, OP_COPY);
    o->dst = dst;
    o->src = src;
    o->len = bytes;
    return enqueue(as_stream(handle), o, NULL);
}

/* Optional (ABI minor 1): every row in one operation. gpuport checked both spans and
 * passes pitches of at least the width. */
static gpuport_error *memcpy_2d_async(gpuport_device *dev, uint64_t dst, uint64_t dst_pitch, uint64_t src,
                                      uint64_t src_pitch, uint64_t width, uint64_t height, gpuport_stream handle) {
    (void)dev;
    NEW_OP(o, OP_COPY_2D);
    o->dst = dst;
    o->src = src;
    o->len = width;
    o->rows = height;
    o->dst_pitch = dst_pitch;
    o->src_pitch = src_pitch;
    return enqueue(as_stream(handle), o, NULL);
}

static gpuport_error *memcpy_peer_async(gpuport_device *dev, uint64_t dst, gpuport_device *dst_device, uint64_t src,
                                        gpuport_device *src_device, uint64_t bytes, gpuport_stream handle) {
    (void)dst_device;
    (void)src_device;
    return memcpy_async(dev, dst, src, bytes, handle); /* one address space */
}

static gpuport_error *memset_async(gpuport_device *dev, uint64_t dst, uint8_t value, uint64_t bytes,
                                   gpuport_stream handle) {
    (void)dev;
    NEW_OP(o, OP_SET);
    o->dst = dst;
    o->value = value;
    o->len = bytes;
    return enqueue(as_stream(handle), o, NULL);
}

/* Modules: one built-in module, format "c-plugin", image "kernels", one kernel. */
#define MODULE_HANDLE ((gpuport_module)0x6b65726e)
#define FILL_U32 ((gpuport_function)1)

static gpuport_error *module_load(gpuport_device *dev, const char *format, const uint8_t *image, size_t image_len,
                                  gpuport_module *module) {
    (void)dev;
    if (strcmp(format, "c-plugin") != 0) return error(GPUPORT_ERROR_UNSUPPORTED, "images of format %s", format);
    if (image_len != 7 || memcmp(image, "kernels", 7) != 0) {
        return error(GPUPORT_ERROR_INVALID_ARGUMENT, "not a c-plugin image (its only module is \"kernels\")");
    }
    *module = MODULE_HANDLE;
    return NULL;
}

static gpuport_error *module_unload(gpuport_device *dev, gpuport_module module) {
    (void)dev;
    return module == MODULE_HANDLE ? NULL : error(GPUPORT_ERROR_INVALID_HANDLE, "not a module");
}

static gpuport_error *module_function(gpuport_device *dev, gpuport_module module, const char *name,
                                      gpuport_function *function) {
    (void)dev;
    if (module != MODULE_HANDLE) return error(GPUPORT_ERROR_INVALID_HANDLE, "not a module");
    if (strcmp(name, "fill_u32") != 0) return error(GPUPORT_ERROR_INVALID_ARGUMENT, "no kernel %s", name);
    *function = FILL_U32;
    return NULL;
}

static int is_u32(const gpuport_kernel_arg *a) {
    return a->kind == GPUPORT_KERNEL_ARG_SCALAR && a->size == 4 && a->dtype_code == 1 && a->dtype_bits == 32;
}

/* fill_u32(uint32_t *out, uint32_t n, uint32_t value): out[0..n) = value. */
static gpuport_error *launch_kernel(gpuport_device *dev, gpuport_function function,
                                    const gpuport_launch_config *config, gpuport_stream handle,
                                    const gpuport_kernel_arg *args, size_t arg_count) {
    (void)dev;
    if (function != FILL_U32) return error(GPUPORT_ERROR_INVALID_HANDLE, "not a kernel");
    for (int i = 0; i < 3; i++) {
        if (config->grid[i] == 0 || config->block[i] == 0) return error(GPUPORT_ERROR_INVALID_ARGUMENT, "an empty grid");
    }
    if (arg_count != 3 || args[0].kind != GPUPORT_KERNEL_ARG_ADDRESS || !is_u32(&args[1]) || !is_u32(&args[2])) {
        return error(GPUPORT_ERROR_INVALID_ARGUMENT, "fill_u32 takes (a buffer, n: u32, value: u32)");
    }
    uint64_t n = (uint32_t)args[1].value;
    allocation a;
    if (!find_allocation(args[0].value, n * 4, &a)) {
        return error(GPUPORT_ERROR_INVALID_ARGUMENT, "fill_u32: %llu elements do not fit the buffer",
                     (unsigned long long)n);
    }
    NEW_OP(o, OP_FILL);
    o->dst = args[0].value;
    o->len = n;
    o->value = (uint32_t)args[2].value;
    return enqueue(as_stream(handle), o, NULL);
}

static const gpuport_plugin_api api = {
    .struct_size = sizeof(gpuport_plugin_api),
    .abi_major = GPUPORT_PLUGIN_ABI_MAJOR,
    .abi_minor = GPUPORT_PLUGIN_ABI_MINOR,
    .name = PLUGIN_NAME,
    .version = "gpuport C plugin 0.1 (software device, C11 + pthreads)",
#ifdef BREACH_DEVICE_TYPE_CPU
    .dlpack_device = 1, /* kDLCPU, for memory the host cannot read */
#else
    .dlpack_device = 12, /* kDLExtDev: memory the host cannot read */
#endif
    .dlpack_pinned_host = 1, /* kDLCPU */
    .dlpack_managed = -1,
    .error_kind = error_kind,
    .error_message = error_message,
    .error_destroy = error_destroy,
    .initialize = initialize,
    .device_count = device_count,
    .device_open = device_open,
    .device_close = device_close,
    .device_info = device_info,
    .can_access_peer = can_access_peer,
    .enable_peer_access = enable_peer_access,
    .pointer_attributes = pointer_attributes,
    .device_synchronize = device_synchronize,
    .stream_priority_range = stream_priority_range,
    .stream_create = stream_create,
    .legacy_stream = legacy_stream,
    .per_thread_stream = NULL, /* none: gpuport says Unsupported */
    .stream_destroy = stream_destroy,
    .stream_query = stream_query,
    .stream_synchronize = stream_synchronize,
    .stream_wait_event = stream_wait_event,
    .stream_launch_host_func = stream_launch_host_func,
    .event_create = event_create,
    .event_destroy = event_destroy,
    .event_record = event_record,
    .event_query = event_query,
    .event_synchronize = event_synchronize,
    .event_elapsed_ms = event_elapsed_ms,
    .mem_alloc = mem_alloc,
    .mem_alloc_managed = NULL, /* none: gpuport says Unsupported */
    .mem_alloc_host = mem_alloc_host,
    .mem_alloc_async = NULL,
    .mem_free_async = NULL,
    .mem_free = mem_free,
    .mem_free_host = mem_free_host,
    .memcpy_async = memcpy_async,
    .memcpy_peer_async = memcpy_peer_async,
    .memset_async = memset_async,
    .module_load = module_load,
    .module_unload = module_unload,
    .module_function = module_function,
    .launch_kernel = launch_kernel,
    .memcpy_2d_async = memcpy_2d_async,
#ifdef BROKEN_QUERY_ALWAYS_DONE
    .stream_progress = NULL,
#else
    .stream_progress = stream_progress,
#endif
};

const gpuport_plugin_api *gpuport_plugin_entry(void) { return &api; }
