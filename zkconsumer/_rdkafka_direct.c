/*
 * zkconsumer._rdkafka_direct: a confluent-kafka Consumer's fetched messages read from librdkafka itself, as
 * kafka-python ConsumerRecords, without a confluent-kafka Message per record.
 *
 * confluent-kafka's consume() builds a Message object for every rd_kafka_message_t (its topic name decoded again
 * for each) and the librdkafka engine then builds a record from it: two objects and their frees per record on one
 * interpreter lock. Here the engine's partitions are routed to a queue of its own (librdkafka's per-partition
 * queues, ``rd_kafka_queue_get_partition`` + ``rd_kafka_queue_forward``: an application's forward is kept by
 * librdkafka when it starts fetching a partition) and their messages become records straight from librdkafka's
 * message structs.
 *
 * That queue is read with librdkafka's event API (``rd_kafka_queue_poll``), never with ``rd_kafka_consume*``: a
 * partition's queue also carries errors (a deleted topic, a partition gone: ``rd_kafka_toppar_enq_error``), and the
 * consume calls hand those to the client's ``error_cb``, which confluent-kafka always installs and which needs the
 * per-thread state its own calls set up (without it the process aborts). The event API returns them as error events
 * instead (``rd_kafka_event_setup``), and runs no callback. Each poll of the queue drops the ops of an outdated
 * version (after a seek or an assign) as it pops them; unlike the consume calls it does not purge messages already
 * taken when it meets a barrier, which cannot matter here: the engine's assign is synchronous (librdkafka bumps the
 * versions before it returns) and runs on the thread that reads, between reads.
 *
 * The library is the one confluent-kafka loaded (``bind(path)``: dlopen with RTLD_NOLOAD, so never another copy),
 * and the client handle is the ``rd_kafka_t *`` that confluent-kafka's ``Handle`` struct keeps right after the
 * object header (confluent_kafka.h, v1.0.0 to v2.16; the Python side only builds a Reader for confluent-kafka 1.x and
 * 2.x). A Reader is only built when that pointer's ``rd_kafka_opaque`` is the Consumer object itself (confluent-kafka
 * sets the Handle as the opaque). The reader holds references to librdkafka's queues, so the reader is closed before
 * the consumer (librdkafka's destroy waits for them): each call checks the consumer is still open.
 *
 *   bind(path) -> version string of the bound librdkafka; raises OSError when it is not loaded or lacks a function
 *   Reader(consumer) -> a reader of consumer's routed partitions
 *   Reader.route([(topic, partition), ...]) -> routes those partitions to the reader's queue (replaces the set)
 *   Reader.reroute() -> forwards the routed partitions again (librdkafka drops a forward when it stops a partition)
 *   Reader.read(n, timeout_ms, record_cls, tp_cls, eof_code) -> ({tp: [record, ...]}, [error, ...]): waits at
 *       most timeout_ms for a first event, then takes at most n - 1 more of those already queued
 *   Reader.close() -> unroute and let the queue go; the reader is unusable after
 *
 * A Reader is used by one thread (the fetcher's): read() releases the interpreter lock while it polls, so a close()
 * from another thread meanwhile would free the queue it polls.
 *
 * Records are the 13-field tuples of zkconsumer/_rdkafka_records.c (the same fields from the message struct
 * instead of a Message; a header name that is not UTF-8 is decoded with replacement characters, where a Message's
 * headers() raises); an error is (code, name, reason, topic or None, partition, offset) of an error event whose code
 * is not ``eof_code``, in the order they came, the records after it still converted (the offset is the one the
 * error names, 0 for an error that names none).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <sys/types.h>

#include "_consumer_record.h"

/* librdkafka's public ABI (rdkafka.h), only what is used here */
typedef struct rk_s rk_t;
typedef struct rkq_s rkq_t;
typedef struct rkt_s rkt_t;
typedef struct rkh_s rkh_t;
typedef struct rkev_s rkev_t;
typedef struct {  /* rd_kafka_topic_partition_t: its leading fields */
    char *topic;
    int32_t partition;
    int64_t offset;
} rktpar_t;
typedef struct {
    int err;
    rkt_t *rkt;
    int32_t partition;
    void *payload;
    size_t len;
    void *key;
    size_t key_len;
    int64_t offset;
    void *_private;
} rkm_t;

static struct {
    void *lib;
    const char *(*version_str)(void);
    void *(*opaque)(const rk_t *);
    rkq_t *(*queue_new)(rk_t *);
    void (*queue_destroy)(rkq_t *);
    rkq_t *(*queue_get_partition)(rk_t *, const char *, int32_t);
    void (*queue_forward)(rkq_t *, rkq_t *);
    rkev_t *(*queue_poll)(rkq_t *, int);
    int (*event_type)(const rkev_t *);
    const rkm_t *(*event_message_next)(rkev_t *);
    int (*event_error)(rkev_t *);
    const char *(*event_error_string)(rkev_t *);
    rktpar_t *(*event_topic_partition)(rkev_t *);
    void (*topic_partition_destroy)(rktpar_t *);
    void (*event_destroy)(rkev_t *);
    const char *(*topic_name)(const rkt_t *);
    int64_t (*message_timestamp)(const rkm_t *, int *);
    int (*message_headers)(const rkm_t *, rkh_t **);
    int (*header_get_all)(const rkh_t *, size_t, const char **, const void **, size_t *);
    const char *(*err2str)(int);
    const char *(*err2name)(int);
} rd;

#define LOG_APPEND_TIME 2  /* RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME */
#define EVENT_FETCH 0x2    /* RD_KAFKA_EVENT_FETCH */
#define EVENT_ERROR 0x8    /* RD_KAFKA_EVENT_ERROR */

static PyObject *bind(PyObject *Py_UNUSED(self), PyObject *arg)
{
    PyObject *bytes;
    if (rd.lib)  /* bound already (to the library the first call found) */
        return PyUnicode_FromString(rd.version_str());
    if (!PyUnicode_FSConverter(arg, &bytes))
        return NULL;
    void *lib = dlopen(PyBytes_AS_STRING(bytes), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    Py_DECREF(bytes);
    if (!lib) {
        const char *why = dlerror();
        PyErr_Format(PyExc_OSError, "librdkafka is not loaded from %R: %s", arg, why ? why : "dlopen failed");
        return NULL;
    }
#define SYM(field, name) \
    if (!(*(void **)&rd.field = dlsym(lib, name))) { \
        PyErr_Format(PyExc_OSError, "the loaded librdkafka has no %s", name); \
        goto fail; \
    }
    SYM(version_str, "rd_kafka_version_str");
    SYM(opaque, "rd_kafka_opaque");
    SYM(queue_new, "rd_kafka_queue_new");
    SYM(queue_destroy, "rd_kafka_queue_destroy");
    SYM(queue_get_partition, "rd_kafka_queue_get_partition");
    SYM(queue_forward, "rd_kafka_queue_forward");
    SYM(queue_poll, "rd_kafka_queue_poll");
    SYM(event_type, "rd_kafka_event_type");
    SYM(event_message_next, "rd_kafka_event_message_next");
    SYM(event_error, "rd_kafka_event_error");
    SYM(event_error_string, "rd_kafka_event_error_string");
    SYM(event_topic_partition, "rd_kafka_event_topic_partition");
    SYM(topic_partition_destroy, "rd_kafka_topic_partition_destroy");
    SYM(event_destroy, "rd_kafka_event_destroy");
    SYM(topic_name, "rd_kafka_topic_name");
    SYM(message_timestamp, "rd_kafka_message_timestamp");
    SYM(message_headers, "rd_kafka_message_headers");
    SYM(header_get_all, "rd_kafka_header_get_all");
    SYM(err2str, "rd_kafka_err2str");
    SYM(err2name, "rd_kafka_err2name");
#undef SYM
    rd.lib = lib;  /* set last: until then no Reader can be built */
    return PyUnicode_FromString(rd.version_str());
fail:
    dlclose(lib);
    memset(&rd, 0, sizeof(rd));
    return NULL;
}

/* confluent-kafka's Handle: the object header, then the client handle */
typedef struct {
    PyObject_HEAD
    rk_t *rk;
} HandleHead;

typedef struct {
    PyObject_HEAD
    PyObject *consumer;  /* the confluent_kafka.Consumer, kept alive */
    rk_t *rk;            /* its client handle when the reader was built */
    rkq_t *queue;        /* the reader's queue; NULL once closed */
    rkq_t **routed;      /* the partitions' queues forwarded to it (references held) */
    Py_ssize_t nrouted;
    rkev_t **buf;        /* the events of one read */
    Py_ssize_t bufsize;
} Reader;

static void unroute(Reader *r)
{
    for (Py_ssize_t i = 0; i < r->nrouted; i++) {
        rd.queue_forward(r->routed[i], NULL);
        rd.queue_destroy(r->routed[i]);
    }
    PyMem_Free(r->routed);
    r->routed = NULL;
    r->nrouted = 0;
}

/* the consumer's client handle, still the one the reader was built for; NULL with an exception when closed */
static rk_t *live_rk(Reader *r)
{
    if (!r->queue) {
        PyErr_SetString(PyExc_RuntimeError, "the reader is closed");
        return NULL;
    }
    rk_t *rk = ((HandleHead *)r->consumer)->rk;
    if (rk != r->rk) {
        PyErr_SetString(PyExc_RuntimeError, "the consumer was closed");
        return NULL;
    }
    return rk;
}

static int reader_init(Reader *r, PyObject *args, PyObject *kwds)
{
    PyObject *consumer;
    static char *kws[] = {"consumer", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:Reader", kws, &consumer))
        return -1;
    if (!rd.lib) {
        PyErr_SetString(PyExc_RuntimeError, "bind() librdkafka first");
        return -1;
    }
    if (r->queue || r->consumer) {
        PyErr_SetString(PyExc_RuntimeError, "a Reader is built once");
        return -1;
    }
    if (Py_TYPE(consumer)->tp_basicsize < (Py_ssize_t)sizeof(HandleHead) || Py_TYPE(consumer)->tp_itemsize) {
        PyErr_SetString(PyExc_TypeError, "not a confluent-kafka client object");
        return -1;
    }
    rk_t *rk = ((HandleHead *)consumer)->rk;
    if (!rk) {
        PyErr_SetString(PyExc_RuntimeError, "the consumer was closed");
        return -1;
    }
    if (rd.opaque(rk) != (void *)consumer) {
        PyErr_SetString(PyExc_TypeError, "the consumer's client handle is not where confluent-kafka keeps it");
        return -1;
    }
    if (!(r->queue = rd.queue_new(rk))) {
        PyErr_NoMemory();
        return -1;
    }
    r->rk = rk;
    Py_INCREF(consumer);
    r->consumer = consumer;
    return 0;
}

static void reader_close_queue(Reader *r)
{
    unroute(r);
    if (r->queue) {
        rd.queue_destroy(r->queue);
        r->queue = NULL;
    }
}

static void reader_dealloc(Reader *r)
{
    /* a reader dropped unclosed (its consumer open: the consumer's close would wait for these references) */
    if (r->queue && r->consumer && ((HandleHead *)r->consumer)->rk == r->rk)
        reader_close_queue(r);
    PyMem_Free(r->routed);
    PyMem_Free(r->buf);
    Py_XDECREF(r->consumer);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

static PyObject *reader_route(Reader *r, PyObject *tps)
{
    rk_t *rk = live_rk(r);
    if (!rk)
        return NULL;
    PyObject *seq = PySequence_Fast(tps, "route() takes a sequence of (topic, partition)");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    rkq_t **routed = PyMem_Calloc(n ? n : 1, sizeof(rkq_t *));
    Py_ssize_t got = 0;
    if (!routed) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        const char *topic;
        int partition;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "si:route", &topic, &partition))
            goto fail;
        rkq_t *pq = rd.queue_get_partition(rk, topic, partition);
        if (!pq) {
            PyErr_Format(PyExc_RuntimeError, "librdkafka has no queue for %s-%d", topic, partition);
            goto fail;
        }
        routed[got++] = pq;
    }
    /* every new forward first (a partition routed before stays routed meanwhile), then the old references go */
    for (Py_ssize_t i = 0; i < got; i++)
        rd.queue_forward(routed[i], r->queue);
    for (Py_ssize_t i = 0; i < r->nrouted; i++)
        rd.queue_destroy(r->routed[i]);
    PyMem_Free(r->routed);
    r->routed = routed;
    r->nrouted = got;
    Py_DECREF(seq);
    Py_RETURN_NONE;
fail:
    for (Py_ssize_t i = 0; i < got; i++)
        rd.queue_destroy(routed[i]);
    PyMem_Free(routed);
    Py_DECREF(seq);
    return NULL;
}

static PyObject *reader_reroute(Reader *r, PyObject *Py_UNUSED(arg))
{
    if (!live_rk(r))
        return NULL;
    /* the queues' own locks only (no lookup of the partitions, which takes the client's lock) */
    for (Py_ssize_t i = 0; i < r->nrouted; i++)
        rd.queue_forward(r->routed[i], r->queue);
    Py_RETURN_NONE;
}

static PyObject *reader_close(Reader *r, PyObject *Py_UNUSED(arg))
{
    if (r->queue) {
        if (((HandleHead *)r->consumer)->rk != r->rk) {
            PyErr_SetString(PyExc_RuntimeError, "close the reader before its consumer");
            return NULL;
        }
        reader_close_queue(r);
    }
    Py_RETURN_NONE;
}

static inline PyObject *bytes_or_none(const void *p, size_t len)
{
    return p ? PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)len) : Py_NewRef(Py_None);
}

/* [(name, value), ...] and their UTF-8 name + value bytes, or [] and -1 without headers; NULL on error */
static PyObject *headers_of(const rkm_t *m, Py_ssize_t *size)
{
    rkh_t *hdrs = NULL;
    *size = -1;
    PyObject *out = PyList_New(0);
    if (!out || rd.message_headers(m, &hdrs) != 0 || !hdrs)
        return out;
    Py_ssize_t total = 0;
    const char *name;
    const void *val;
    size_t vlen;
    for (size_t i = 0; rd.header_get_all(hdrs, i, &name, &val, &vlen) == 0; i++) {
        PyObject *k = PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "replace");
        PyObject *v = k ? bytes_or_none(val, vlen) : NULL;
        PyObject *pair = v ? PyTuple_Pack(2, k, v) : NULL;
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (!pair || PyList_Append(out, pair) < 0) {
            Py_XDECREF(pair);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(pair);
        total += (Py_ssize_t)strlen(name) + (val ? (Py_ssize_t)vlen : 0);
    }
    if (PyList_GET_SIZE(out) > 0)
        *size = total;
    return out;
}

static PyObject *make_record(PyTypeObject *record_cls, const rkm_t *m, PyObject *topic, PyObject *partition,
                             PyObject *minus_one)
{
    Py_ssize_t hsize;
    int tstype = 0;
    int64_t ts = rd.message_timestamp(m, &tstype);
    PyObject *rec = NULL, *hs = headers_of(m, &hsize);
    PyObject *offset = hs ? PyLong_FromLongLong(m->offset) : NULL;
    PyObject *tsobj = offset ? PyLong_FromLongLong(ts) : NULL;
    PyObject *key = tsobj ? bytes_or_none(m->key, m->key_len) : NULL;
    PyObject *value = key ? bytes_or_none(m->payload, m->len) : NULL;
    PyObject *ksize = value ? PyLong_FromSsize_t(m->key ? (Py_ssize_t)m->key_len : -1) : NULL;
    PyObject *vsize = ksize ? PyLong_FromSsize_t(m->payload ? (Py_ssize_t)m->len : -1) : NULL;
    PyObject *hsz = vsize ? PyLong_FromSsize_t(hsize) : NULL;
    if (hsz)
        rec = new_consumer_record(record_cls, topic, partition, minus_one, offset, tsobj, tstype == LOG_APPEND_TIME, key,
                                  value, hs, ksize, vsize, hsz);
    Py_XDECREF(hs);
    Py_XDECREF(offset);
    Py_XDECREF(tsobj);
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(ksize);
    Py_XDECREF(vsize);
    Py_XDECREF(hsz);
    return rec;
}

static PyObject *error_of(rkev_t *ev)
{
    int code = rd.event_error(ev);
    const char *reason = rd.event_error_string(ev);
    rktpar_t *tp = rd.event_topic_partition(ev);  /* NULL: not a partition's error */
    PyObject *why = PyUnicode_DecodeUTF8(reason ? reason : "", reason ? (Py_ssize_t)strlen(reason) : 0, "replace");
    PyObject *topic = !why ? NULL : tp && tp->topic ? PyUnicode_DecodeUTF8(tp->topic, (Py_ssize_t)strlen(tp->topic),
                                                                             "replace") : Py_NewRef(Py_None);
    PyObject *e = topic ? Py_BuildValue("(isOOiL)", code, rd.err2name(code), why, topic, tp ? (int)tp->partition : -1,
                                        tp ? (long long)tp->offset : -1LL) : NULL;
    if (tp)
        rd.topic_partition_destroy(tp);
    Py_XDECREF(why);
    Py_XDECREF(topic);
    return e;
}

static PyObject *reader_read(Reader *r, PyObject *args)
{
    Py_ssize_t n;
    int timeout_ms, eof_code;
    PyTypeObject *record_cls;
    PyObject *tp_cls;
    if (!PyArg_ParseTuple(args, "niO!Oi:read", &n, &timeout_ms, &PyType_Type, &record_cls, &tp_cls, &eof_code))
        return NULL;
    if (!PyType_IsSubtype(record_cls, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "record_cls must be a tuple subtype");
        return NULL;
    }
    if (n < 1 || n > 1000000) {
        PyErr_SetString(PyExc_ValueError, "n must be between 1 and 1000000");
        return NULL;
    }
    if (!live_rk(r))
        return NULL;
    if (r->bufsize < n) {
        rkev_t **buf = PyMem_Realloc(r->buf, n * sizeof(rkev_t *));
        if (!buf)
            return PyErr_NoMemory();
        r->buf = buf;
        r->bufsize = n;
    }
    rkev_t **evs = r->buf;
    rkq_t *q = r->queue;
    Py_ssize_t got = 0;
    rkev_t *ev;
    /* wait for the first event only, then take what is queued: a batch never waits to fill up */
    Py_BEGIN_ALLOW_THREADS
    while (got < n && (ev = rd.queue_poll(q, got ? 0 : timeout_ms)))
        evs[got++] = ev;
    Py_END_ALLOW_THREADS
    PyObject *out = PyDict_New(), *errors = PyList_New(0), *minus_one = PyLong_FromLong(-1), *result = NULL;
    PyObject *topic = NULL, *partition = NULL, *bucket = NULL;
    const rkt_t *last_rkt = NULL;
    int32_t last_partition = -1;
    Py_ssize_t i = 0;
    if (!out || !errors || !minus_one)
        goto done;
    for (; i < got; i++) {
        ev = evs[i];
        int type = rd.event_type(ev);
        const rkm_t *m = type == EVENT_FETCH ? rd.event_message_next(ev) : NULL;
        if (type == EVENT_ERROR || (m && m->err)) {
            if ((m ? m->err : rd.event_error(ev)) != eof_code) {
                PyObject *e = error_of(ev);
                if (!e || PyList_Append(errors, e) < 0) {
                    Py_XDECREF(e);
                    goto done;
                }
                Py_DECREF(e);
            }
            rd.event_destroy(ev);
            continue;
        }
        if (!m) {  /* another kind of event: nothing to hand out */
            rd.event_destroy(ev);
            continue;
        }
        if (!bucket || m->rkt != last_rkt || m->partition != last_partition) {
            if (m->rkt != last_rkt || !topic) {
                Py_XSETREF(topic, PyUnicode_FromString(rd.topic_name(m->rkt)));
                if (!topic)
                    goto done;
            }
            Py_XSETREF(partition, PyLong_FromLong(m->partition));
            if (!partition)
                goto done;
            if (!(bucket = partition_bucket(out, tp_cls, topic, partition)))
                goto done;
            last_rkt = m->rkt;
            last_partition = m->partition;
        }
        PyObject *rec = make_record(record_cls, m, topic, partition, minus_one);
        rd.event_destroy(ev);
        if (!rec || PyList_Append(bucket, rec) < 0) {
            Py_XDECREF(rec);
            i++;
            goto done;
        }
        Py_DECREF(rec);
    }
    result = PyTuple_Pack(2, out, errors);
done:
    for (; i < got; i++)  /* after a failure (memory): what was not converted is dropped with the read */
        rd.event_destroy(evs[i]);
    Py_XDECREF(topic);
    Py_XDECREF(partition);
    Py_XDECREF(out);
    Py_XDECREF(errors);
    Py_XDECREF(minus_one);
    return result;
}

static PyMethodDef reader_methods[] = {
    {"route", (PyCFunction)reader_route, METH_O,
     "route([(topic, partition), ...]): their fetched messages come to this reader (replaces the routed set)"},
    {"reroute", (PyCFunction)reader_reroute, METH_NOARGS,
     "reroute(): forward the routed partitions to this reader again (librdkafka drops a forward when it stops one)"},
    {"read", (PyCFunction)reader_read, METH_VARARGS,
     "read(n, timeout_ms, record_cls, tp_cls, eof_code) -> ({tp: [record, ...]}, [(code, name, reason, topic, "
     "partition, offset), ...]): at most n events, waiting at most timeout_ms for the first (not for more)"},
    {"close", (PyCFunction)reader_close, METH_NOARGS, "close(): unroute and let the queue go (before the consumer's close)"},
    {NULL, NULL, 0, NULL}};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "zkconsumer._rdkafka_direct.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Reader(consumer): a confluent_kafka.Consumer's routed partitions read as records (see the module)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)reader_init,
    .tp_dealloc = (destructor)reader_dealloc,
    .tp_methods = reader_methods,
};

static PyMethodDef methods[] = {
    {"bind", bind, METH_O,
     "bind(path) -> version: use the librdkafka loaded from path (already loaded by confluent-kafka)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "zkconsumer._rdkafka_direct",
                                    "A confluent-kafka Consumer's fetched messages read from librdkafka as records "
                                    "(see zkconsumer/kafka/librdkafka.py).", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__rdkafka_direct(void)
{
    if (PyType_Ready(&ReaderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddObjectRef(m, "Reader", (PyObject *)&ReaderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
