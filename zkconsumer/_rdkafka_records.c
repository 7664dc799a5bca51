/*
 * zkconsumer._rdkafka_records: confluent-kafka Messages to kafka-python ConsumerRecords, in C.
 *
 * from_messages() is a drop-in replacement for the pure-Python loop of zkconsumer/kafka/librdkafka.py
 * (``_from_messages_py``): same arguments, same result. It only calls the Messages' public methods (error, topic,
 * partition, offset, key, value, headers, timestamp), as the Python loop does; what it saves is the interpreter's
 * work around them: about 2 us per record in Python, the part of the librdkafka engine's time that raw
 * confluent-kafka does not pay.
 *
 *   from_messages(messages, record_cls, tp_cls, eof_code) -> (records_by_partition, error)
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

static PyObject *log_append_time;  /* 2: librdkafka's RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME */
static PyObject *s_error, *s_code, *s_topic, *s_partition, *s_offset, *s_key, *s_value, *s_headers, *s_timestamp;

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

/* the record of one message without error; NULL on error */
static PyObject *make_record(const Methods *ms, PyTypeObject *record_cls, PyObject *m, PyObject *topic,
                             PyObject *partition, PyObject *minus_one)
{
    PyObject *offset = NULL, *key = NULL, *value = NULL, *headers = NULL, *hs = NULL, *ts = NULL;
    PyObject *ksize = NULL, *vsize = NULL, *hsize = NULL, *rec = NULL;
    Py_ssize_t header_size;
    if (!(offset = callm(ms, ms->offset, m, s_offset)) || !(key = callm(ms, ms->key, m, s_key)) ||
        !(value = callm(ms, ms->value, m, s_value)) || !(headers = callm(ms, ms->headers, m, s_headers)) ||
        !(ts = callm(ms, ms->timestamp, m, s_timestamp)))
        goto done;
    if (!PyTuple_Check(ts) || PyTuple_GET_SIZE(ts) != 2) {
        PyErr_Format(PyExc_TypeError, "Message.timestamp() is not a (type, timestamp) pair: %R", ts);
        goto done;
    }
    int log_append = PyObject_RichCompareBool(PyTuple_GET_ITEM(ts, 0), log_append_time, Py_EQ);
    if (log_append < 0 || !(hs = convert_headers(headers, &header_size)) || !(ksize = size_or_minus_one(key)) ||
        !(vsize = size_or_minus_one(value)) || !(hsize = PyLong_FromSsize_t(header_size)))
        goto done;
    if (!(rec = record_cls->tp_alloc(record_cls, 13)))
        goto done;
    PyTuple_SET_ITEM(rec, 0, Py_NewRef(topic));
    PyTuple_SET_ITEM(rec, 1, Py_NewRef(partition));
    PyTuple_SET_ITEM(rec, 2, Py_NewRef(minus_one));
    PyTuple_SET_ITEM(rec, 3, Py_NewRef(offset));
    PyTuple_SET_ITEM(rec, 4, Py_NewRef(PyTuple_GET_ITEM(ts, 1)));
    PyTuple_SET_ITEM(rec, 5, PyLong_FromLong(log_append));  /* 0 and 1 are cached small ints: cannot fail */
    PyTuple_SET_ITEM(rec, 6, Py_NewRef(key));
    PyTuple_SET_ITEM(rec, 7, Py_NewRef(value));
    PyTuple_SET_ITEM(rec, 8, Py_NewRef(hs));
    PyTuple_SET_ITEM(rec, 9, Py_NewRef(Py_None));
    PyTuple_SET_ITEM(rec, 10, Py_NewRef(ksize));
    PyTuple_SET_ITEM(rec, 11, Py_NewRef(vsize));
    PyTuple_SET_ITEM(rec, 12, Py_NewRef(hsize));
    /* as in _records.c: a record holds str, bytes, ints, None and its own fresh headers list of (str, bytes)
     * tuples, so no cycle runs through it and the cyclic GC need not walk the tens of thousands queued */
    PyObject_GC_UnTrack(hs);
    PyObject_GC_UnTrack(rec);
done:
    Py_XDECREF(offset);
    Py_XDECREF(key);
    Py_XDECREF(value);
    Py_XDECREF(headers);
    Py_XDECREF(hs);
    Py_XDECREF(ts);
    Py_XDECREF(ksize);
    Py_XDECREF(vsize);
    Py_XDECREF(hsize);
    return rec;
}

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
    PyObject *topic = NULL, *partition = NULL;
    Methods ms = {NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    if (!out || !minus_one)
        goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    if (n > 0)
        methods_for(&ms, items[0]);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *m = items[i];
        PyObject *err = callm(&ms, ms.error, m, s_error);
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
        if (!(topic = callm(&ms, ms.topic, m, s_topic)) || !(partition = callm(&ms, ms.partition, m, s_partition)))
            goto done;
        int same = 0;
        if (last_topic) {
            same = PyObject_RichCompareBool(topic, last_topic, Py_EQ);
            if (same > 0)
                same = PyObject_RichCompareBool(partition, last_partition, Py_EQ);
            if (same < 0)
                goto done;
        }
        if (!same) {
            PyObject *tp = PyObject_CallFunctionObjArgs(tp_cls, topic, partition, NULL);
            if (!tp)
                goto done;
            PyObject *fresh = PyList_New(0);
            bucket = fresh ? PyDict_SetDefault(out, tp, fresh) : NULL;  /* borrowed, kept alive by out */
            Py_DECREF(tp);
            Py_XDECREF(fresh);
            if (!bucket)
                goto done;
        }
        PyObject *rec = make_record(&ms, record_cls, m, topic, partition, minus_one);
        if (!rec)
            goto done;
        int failed = PyList_Append(bucket, rec);
        /* the bucket's last record keeps this topic and partition alive: compare the next message with them */
        last_topic = PyTuple_GET_ITEM(rec, 0);
        last_partition = PyTuple_GET_ITEM(rec, 1);
        Py_DECREF(rec);
        Py_CLEAR(topic);
        Py_CLEAR(partition);
        if (failed < 0)
            goto done;
    }
    result = PyTuple_Pack(2, out, error ? error : Py_None);
done:
    methods_clear(&ms);
    Py_XDECREF(topic);
    Py_XDECREF(partition);
    Py_XDECREF(error);
    Py_XDECREF(minus_one);
    Py_XDECREF(out);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef methods[] = {
    {"from_messages", from_messages, METH_VARARGS,
     "from_messages(messages, record_cls, tp_cls, eof_code) -> ({tp: [record, ...]}, error or None)"},
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
#undef INTERN
    if (!(log_append_time = PyLong_FromLong(2)))
        return NULL;
    return PyModule_Create(&module);
}
