/*
 * zkconsumer._rdkafka_records: confluent-kafka Messages to kafka-python ConsumerRecords, in C.
 *
 * from_messages() is a drop-in replacement for the pure-Python loop of zkconsumer/kafka/librdkafka.py
 * (``_from_messages_py``): same arguments, same result. What it saves is the interpreter's work around the
 * Messages' accessors, and most of the accessor calls themselves: eight method calls per record (error, topic,
 * partition, offset, key, value, headers, timestamp; timestamp() builds a tuple with Py_BuildValue) cost about as
 * much as the rest of the conversion. A confluent-kafka Message is a C object whose fields (see MessageFields) these
 * methods only copy out, so once one Message of a call has been checked against its own methods (the accessors
 * are the type's own C methods, and every field they return is where MessageFields says: fields_match), the other
 * Messages of exactly that type in the call are read from the fields directly; headers still come from headers()
 * (it converts librdkafka's headers on first use). Any other type (another confluent-kafka layout, a subclass, a
 * stand-in) is read through its methods alone.
 *
 *   from_messages(messages, record_cls, tp_cls, eof_code) -> (records_by_partition, error)
 *   reads_fields(message) -> bool (whether messages of this one's type are read from their fields)
 *
 * ``records_by_partition`` is a dict {tp_cls(topic, partition): [record, ...]} in the order the messages came;
 * ``error`` is None, or the error object (``Message.error()``) of the first message whose error code is not
 * ``eof_code`` (the Python caller raises it; the records before it are returned, as they were converted).
 * Messages whose error code is ``eof_code`` are skipped. Records are ``record_cls`` instances (a tuple subtype
 * with 13 fields, built as ``tuple.__new__(record_cls, fields)`` builds them):
 * (topic, partition, -1, offset, timestamp, 1 if the timestamp type is 2 (log append time) else 0, key, value,
 *  [(header key, header value), ...], None, len(key) or -1, len(value) or -1, headers' UTF-8 key + value bytes or
 *  -1 without headers).
 *
 * The extension is optional (setup.py builds it when a C compiler is there); librdkafka.py falls back to the
 * Python loop without it and tests/kafka/test_rdkafka_records.py checks the two agree on every input hypothesis makes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>

#include "_consumer_record.h"

static PyObject *log_append_time;  /* 2: librdkafka's RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME */
static PyObject *s_error, *s_code, *s_topic, *s_partition, *s_offset, *s_key, *s_value, *s_headers, *s_timestamp;
static PyObject *s_leader_epoch;

static inline PyObject *call0(PyObject *obj, PyObject *name)
{
    PyObject *args[1] = {obj};
    return PyObject_VectorcallMethod(name, args, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* The Message methods of one type, looked up once per from_messages() call: calling a method descriptor directly
 * skips the attribute lookup that PyObject_VectorcallMethod makes on every call (8 per message). Used only for
 * messages of exactly that type; any other object goes through call0. */
typedef struct {
    PyTypeObject *type;
    PyObject *error, *topic, *partition, *offset, *key, *value, *headers, *timestamp;
    PyObject *leader_epoch;  /* NULL when the type has none: its fields are then never read directly */
} Methods;

static void methods_clear(Methods *ms)
{
    Py_CLEAR(ms->error);
    Py_CLEAR(ms->topic);
    Py_CLEAR(ms->partition);
    Py_CLEAR(ms->offset);
    Py_CLEAR(ms->key);
    Py_CLEAR(ms->value);
    Py_CLEAR(ms->headers);
    Py_CLEAR(ms->timestamp);
    Py_CLEAR(ms->leader_epoch);
    ms->type = NULL;
}

/* fills *ms for the type of m; leaves ms->type NULL (call0 for every call) when a method is missing */
static void methods_for(Methods *ms, PyObject *m)
{
    PyObject *type = (PyObject *)Py_TYPE(m);
#define LOOKUP(field, name) if (!(ms->field = PyObject_GetAttr(type, name))) goto missing
    LOOKUP(error, s_error);
    LOOKUP(topic, s_topic);
    LOOKUP(partition, s_partition);
    LOOKUP(offset, s_offset);
    LOOKUP(key, s_key);
    LOOKUP(value, s_value);
    LOOKUP(headers, s_headers);
    LOOKUP(timestamp, s_timestamp);
#undef LOOKUP
    if (!(ms->leader_epoch = PyObject_GetAttr(type, s_leader_epoch)))
        PyErr_Clear();
    ms->type = Py_TYPE(m);
    return;
missing:
    PyErr_Clear();
    methods_clear(ms);
}

static inline PyObject *callm(const Methods *ms, PyObject *method, PyObject *m, PyObject *name)
{
    if (ms->type == Py_TYPE(m)) {
        PyObject *args[1] = {m};
        return PyObject_Vectorcall(method, args, 1, NULL);
    }
    return call0(m, name);
}

static PyObject *size_or_minus_one(PyObject *b)
{
    if (b == Py_None)
        return PyLong_FromLong(-1);
    Py_ssize_t n = PyObject_Length(b);
    return n < 0 ? NULL : PyLong_FromSsize_t(n);
}

/* [(key, value), ...] from Message.headers() and the headers' size (UTF-8 key bytes + value bytes), or an empty
 * list and -1 when there are none; NULL on error */
static PyObject *convert_headers(PyObject *headers, Py_ssize_t *size)
{
    *size = -1;
    int truth = headers == Py_None ? 0 : PyObject_IsTrue(headers);
    if (truth < 0)
        return NULL;
    if (!truth)
        return PyList_New(0);
    PyObject *seq = PySequence_Fast(headers, "Message.headers() is not a sequence");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), total = 0;
    PyObject *out = PyList_New(n);
    if (!out)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PySequence_Tuple(PySequence_Fast_GET_ITEM(seq, i));
        if (!pair)
            goto fail;
        PyList_SET_ITEM(out, i, pair);
        if (PyTuple_GET_SIZE(pair) != 2) {
            PyErr_Format(PyExc_ValueError, "a header is not a (key, value) pair: %R", pair);
            goto fail;
        }
        Py_ssize_t klen;
        if (!PyUnicode_Check(PyTuple_GET_ITEM(pair, 0))) {
            PyErr_Format(PyExc_TypeError, "a header key is not a str: %R", PyTuple_GET_ITEM(pair, 0));
            goto fail;
        }
        if (!PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(pair, 0), &klen))
            goto fail;
        total += klen;
        PyObject *v = PyTuple_GET_ITEM(pair, 1);
        if (v != Py_None) {
            Py_ssize_t vlen = PyObject_Length(v);
            if (vlen < 0)
                goto fail;
            total += vlen;
        }
    }
    Py_DECREF(seq);
    *size = total;
    return out;
fail:
    Py_DECREF(seq);
    Py_XDECREF(out);
    return NULL;
}

/* The leading fields of confluent-kafka's Message object (cimpl.Message, confluent_kafka.h's ``Message`` struct),
 * as laid out since confluent-kafka 2.x added ``leader_epoch``; later versions append fields after ``tstype``.
 * Only read for a type that fields_match() has checked against the type's own methods. */
typedef struct {
    PyObject_HEAD
    PyObject *topic, *value, *key, *headers;  /* NULL for None */
    void *c_headers;                          /* librdkafka's headers, not yet converted by headers() */
    PyObject *error;                          /* NULL for None */
    int32_t partition;                        /* -1 (RD_KAFKA_PARTITION_UA): None */
    int64_t offset;                           /* < 0: None */
    int32_t leader_epoch;                     /* < 0: None */
    int64_t timestamp;
    int tstype;                               /* rd_kafka_timestamp_type_t */
} MessageFields;

/* What a record is made of: new references (topic, partition, offset, key, value, headers may be None) */
typedef struct {
    PyObject *topic, *partition, *offset, *key, *value, *headers, *ts_type, *ts;
} Fields;

static void fields_clear(Fields *f)
{
    Py_CLEAR(f->topic);
    Py_CLEAR(f->partition);
    Py_CLEAR(f->offset);
    Py_CLEAR(f->key);
    Py_CLEAR(f->value);
    Py_CLEAR(f->headers);
    Py_CLEAR(f->ts_type);
    Py_CLEAR(f->ts);
}

static inline PyObject *or_none(PyObject *o)
{
    return Py_NewRef(o ? o : Py_None);
}

/* 1 when the method's result *r* is what the field holds (object fields: the same object, NULL for None) */
static inline int same_object(PyObject *r, PyObject *field)
{
    return r == field || (r == Py_None && field == NULL);
}

/* 1 when the int (or None) *r* is the field's value *v* (None: *v* below *none_below*) */
static int same_int(PyObject *r, long long v, long long none_below)
{
    if (r == Py_None)
        return v < none_below;
    if (!PyLong_CheckExact(r) || v < none_below)
        return 0;
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(r, &overflow);
    if (x == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return !overflow && x == v;
}

/* 1 when *method* is a C method defined by *type* itself (not a Python override, nor inherited by a subclass) */
static int own_c_method(PyObject *method, PyTypeObject *type)
{
    return method && Py_IS_TYPE(method, &PyMethodDescr_Type) && PyDescr_TYPE(method) == type;
}

/* 1 when the messages of *m*'s type can be read as MessageFields: its accessors are all C methods of the type
 * itself, and *m*'s fields, read that way, are what they return (every field a record uses, and the leader epoch
 * between the offset and the timestamp); 0 when not (their fields are then never read), -1 on error. Called for a
 * message with a topic and an offset, so pointers and integers both have something to match. */
static int fields_match(const Methods *ms, PyObject *m)
{
    if (!ms->type || Py_TYPE(m) != ms->type || ms->type->tp_basicsize < (Py_ssize_t)sizeof(MessageFields) ||
        ms->type->tp_itemsize != 0)
        return 0;
    PyObject *calls[8] = {ms->error, ms->topic, ms->value, ms->key, ms->partition, ms->offset, ms->leader_epoch,
                          ms->timestamp};
    for (int i = 0; i < 8; i++)
        if (!own_c_method(calls[i], ms->type))
            return 0;
    if (!own_c_method(ms->headers, ms->type))
        return 0;
    const MessageFields *mf = (const MessageFields *)m;
    PyObject *r[8] = {NULL};
    PyObject *names[8] = {s_error, s_topic, s_value, s_key, s_partition, s_offset, s_leader_epoch, s_timestamp};
    int match = -1;
    for (int i = 0; i < 8; i++)
        if (!(r[i] = callm(ms, calls[i], m, names[i])))
            goto done;
    match = same_object(r[0], mf->error) && same_object(r[1], mf->topic) && same_object(r[2], mf->value) &&
            same_object(r[3], mf->key) && same_int(r[4], mf->partition, 0) && same_int(r[5], mf->offset, 0) &&
            same_int(r[6], mf->leader_epoch, 0) && PyTuple_Check(r[7]) && PyTuple_GET_SIZE(r[7]) == 2 &&
            same_int(PyTuple_GET_ITEM(r[7], 0), mf->tstype, INT_MIN) &&
            same_int(PyTuple_GET_ITEM(r[7], 1), mf->timestamp, LLONG_MIN);
done:
    for (int i = 0; i < 8; i++)
        Py_XDECREF(r[i]);
    return match;
}

/* *f* of a message without error: from its fields when *direct* (a type fields_match() accepted), else from its
 * methods; 0, or -1 on error (*f* cleared) */
static int read_fields(const Methods *ms, PyObject *m, int direct, Fields *f)
{
    if (direct) {
        const MessageFields *mf = (const MessageFields *)m;
        f->topic = or_none(mf->topic);
        f->key = or_none(mf->key);
        f->value = or_none(mf->value);
        f->partition = mf->partition == -1 ? Py_NewRef(Py_None) : PyLong_FromLong(mf->partition);
        f->offset = mf->offset < 0 ? Py_NewRef(Py_None) : PyLong_FromLongLong(mf->offset);
        f->ts_type = PyLong_FromLong(mf->tstype);
        f->ts = PyLong_FromLongLong(mf->timestamp);
        /* headers() converts librdkafka's headers to a list the first time and keeps it */
        f->headers = mf->headers || mf->c_headers ? callm(ms, ms->headers, m, s_headers) : Py_NewRef(Py_None);
        if (!f->partition || !f->offset || !f->ts_type || !f->ts || !f->headers)
            goto fail;
        return 0;
    }
    PyObject *ts = NULL;
    if (!(f->topic = callm(ms, ms->topic, m, s_topic)) || !(f->partition = callm(ms, ms->partition, m, s_partition))
        || !(f->offset = callm(ms, ms->offset, m, s_offset)) || !(f->key = callm(ms, ms->key, m, s_key)) ||
        !(f->value = callm(ms, ms->value, m, s_value)) || !(f->headers = callm(ms, ms->headers, m, s_headers)) ||
        !(ts = callm(ms, ms->timestamp, m, s_timestamp)))
        goto fail;
    if (!PyTuple_Check(ts) || PyTuple_GET_SIZE(ts) != 2) {
        PyErr_Format(PyExc_TypeError, "Message.timestamp() is not a (type, timestamp) pair: %R", ts);
        Py_DECREF(ts);
        goto fail;
    }
    f->ts_type = Py_NewRef(PyTuple_GET_ITEM(ts, 0));
    f->ts = Py_NewRef(PyTuple_GET_ITEM(ts, 1));
    Py_DECREF(ts);
    return 0;
fail:
    fields_clear(f);
    return -1;
}

/* the record of one message's fields; NULL on error */
static PyObject *make_record(PyTypeObject *record_cls, const Fields *f, PyObject *minus_one)
{
    PyObject *hs = NULL, *ksize = NULL, *vsize = NULL, *hsize = NULL, *rec = NULL;
    Py_ssize_t header_size;
    int log_append = PyObject_RichCompareBool(f->ts_type, log_append_time, Py_EQ);
    if (log_append < 0 || !(hs = convert_headers(f->headers, &header_size)) || !(ksize = size_or_minus_one(f->key))
        || !(vsize = size_or_minus_one(f->value)) || !(hsize = PyLong_FromSsize_t(header_size)))
        goto done;
    rec = new_consumer_record(record_cls, f->topic, f->partition, minus_one, f->offset, f->ts, log_append, f->key,
                              f->value, hs, ksize, vsize, hsize);
done:
    Py_XDECREF(hs);
    Py_XDECREF(ksize);
    Py_XDECREF(vsize);
    Py_XDECREF(hsize);
    return rec;
}

enum { UNCHECKED, DIRECT, METHODS };

static PyObject *from_messages(PyObject *Py_UNUSED(self), PyObject *args)
{
    PyObject *messages, *tp_cls, *eof_code;
    PyTypeObject *record_cls;
    if (!PyArg_ParseTuple(args, "OO!OO:from_messages", &messages, &PyType_Type, &record_cls, &tp_cls, &eof_code))
        return NULL;
    if (!PyType_IsSubtype(record_cls, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "record_cls must be a tuple subtype");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(messages, "messages must be a sequence");
    if (!seq)
        return NULL;
    PyObject *out = PyDict_New(), *error = NULL, *result = NULL, *minus_one = PyLong_FromLong(-1);
    PyObject *last_topic = NULL, *last_partition = NULL, *bucket = NULL;  /* borrowed from the record/bucket */
    Fields f = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    Methods ms = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    int mode = UNCHECKED;  /* DIRECT: messages of type ms.type are read from their fields */
    if (!out || !minus_one)
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    if (n > 0)
        methods_for(&ms, items[0]);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *m = items[i];
        int direct = mode == DIRECT && Py_TYPE(m) == ms.type;
        PyObject *err = direct ? or_none(((const MessageFields *)m)->error) : callm(&ms, ms.error, m, s_error);
        if (!err)
            goto done;
        if (err != Py_None) {
            PyObject *code = call0(err, s_code);
            int eof = code ? PyObject_RichCompareBool(code, eof_code, Py_EQ) : -1;
            Py_XDECREF(code);
            if (eof < 0) {
                Py_DECREF(err);
                goto done;
            }
            if (eof) {
                Py_DECREF(err);
                continue;
            }
            error = err;
            break;
        }
        Py_DECREF(err);
        if (read_fields(&ms, m, direct, &f) < 0)
            goto done;
        if (mode == UNCHECKED && f.topic != Py_None && f.offset != Py_None) {
            int match = fields_match(&ms, m);
            if (match < 0)
                goto done;
            mode = match ? DIRECT : METHODS;
        }
        int same = 0;
        if (last_topic) {
            same = PyObject_RichCompareBool(f.topic, last_topic, Py_EQ);
            if (same > 0)
                same = PyObject_RichCompareBool(f.partition, last_partition, Py_EQ);
            if (same < 0)
                goto done;
        }
        if (!same && !(bucket = partition_bucket(out, tp_cls, f.topic, f.partition)))
            goto done;
        PyObject *rec = make_record(record_cls, &f, minus_one);
        fields_clear(&f);
        if (!rec)
            goto done;
        int failed = PyList_Append(bucket, rec);
        /* the bucket's last record keeps this topic and partition alive: compare the next message with them */
        last_topic = PyTuple_GET_ITEM(rec, 0);
        last_partition = PyTuple_GET_ITEM(rec, 1);
        Py_DECREF(rec);
        if (failed < 0)
            goto done;
    }
    result = PyTuple_Pack(2, out, error ? error : Py_None);
done:
    methods_clear(&ms);
    fields_clear(&f);
    Py_XDECREF(error);
    Py_XDECREF(minus_one);
    Py_XDECREF(out);
    Py_DECREF(seq);
    return result;
}

static PyObject *reads_fields(PyObject *Py_UNUSED(self), PyObject *m)
{
    Methods ms = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    methods_for(&ms, m);
    int match = fields_match(&ms, m);
    methods_clear(&ms);
    return match < 0 ? NULL : PyBool_FromLong(match);
}

static PyMethodDef methods[] = {
    {"from_messages", from_messages, METH_VARARGS,
     "from_messages(messages, record_cls, tp_cls, eof_code) -> ({tp: [record, ...]}, error or None)"},
    {"reads_fields", reads_fields, METH_O,
     "reads_fields(message) -> bool: whether from_messages reads messages of this one's type from their fields "
     "(checked against its methods: give it a message with a topic and an offset)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "zkconsumer._rdkafka_records",
                                    "confluent-kafka Messages to ConsumerRecords in C (see "
                                    "zkconsumer/kafka/librdkafka.py).", -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__rdkafka_records(void)
{
#define INTERN(var, name) if (!(var = PyUnicode_InternFromString(name))) return NULL
    INTERN(s_error, "error");
    INTERN(s_code, "code");
    INTERN(s_topic, "topic");
    INTERN(s_partition, "partition");
    INTERN(s_offset, "offset");
    INTERN(s_key, "key");
    INTERN(s_value, "value");
    INTERN(s_headers, "headers");
    INTERN(s_timestamp, "timestamp");
    INTERN(s_leader_epoch, "leader_epoch");
#undef INTERN
    if (!(log_append_time = PyLong_FromLong(2)))
        return NULL;
    return PyModule_Create(&module);
}
