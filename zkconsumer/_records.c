/*
 * zkconsumer._records: the record batch v2 decoder of zkconsumer/kafka/record_batch.py, in C.
 *
 * decode_records() is a drop-in replacement for the pure-Python decode_records() of that module: same
 * arguments, same result (records, sizes, error). Records are built as instances of ``record_cls`` (kafka-python's
 * ConsumerRecord, a namedtuple: a tuple subtype with no extra fields), exactly as ``tuple.__new__(record_cls,
 * fields)`` builds them. The error is None, or (kind, message) where kind is "corrupt" (a record that contradicts
 * its own length fields or header count) or "structure" (a read past the data, a bad varint, undecodable
 * header key) and the Python wrapper turns it into kafka-python's CorruptRecordError with the same wording as the
 * Python decoder. Varints are read as Java's ByteUtils reads them: at most 10 bytes, bits past 64 dropped.
 *
 * The extension is optional (setup.py builds it when a C compiler is there); record_batch.py falls back to the
 * Python decoder without it and tests/kafka/test_fast_records.py checks the two agree on every input hypothesis makes.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef struct {
    const unsigned char *buf;
    Py_ssize_t len;
    Py_ssize_t pos;
} reader;

/* zigzag varint; 0 on success, -1 when the data ends or the varint has more than 10 bytes */
static inline int read_varint(reader *r, int64_t *out)
{
    const unsigned char *buf = r->buf;
    Py_ssize_t pos = r->pos;
    if (pos < r->len && buf[pos] < 0x80) {  /* the common one-byte case */
        unsigned int b = buf[pos];
        *out = (int64_t)(b >> 1) ^ -(int64_t)(b & 1);
        r->pos = pos + 1;
        return 0;
    }
    uint64_t result = 0;
    int shift = 0;
    for (;;) {
        if (pos >= r->len)
            return -1;
        unsigned int b = buf[pos++];
        if (shift < 64)
            result |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80)
            break;
        shift += 7;
        if (shift > 63)
            return -1;
    }
    r->pos = pos;
    *out = (int64_t)(result >> 1) ^ -(int64_t)(result & 1);
    return 0;
}

static PyObject *sum_int64(int64_t a, int64_t b)
{
    int64_t s;
    if (!__builtin_add_overflow(a, b, &s))
        return PyLong_FromLongLong(s);
    PyObject *pa = PyLong_FromLongLong(a), *pb = PyLong_FromLongLong(b), *res = NULL;
    if (pa && pb)
        res = PyNumber_Add(pa, pb);
    Py_XDECREF(pa);
    Py_XDECREF(pb);
    return res;
}

/* bytes of buf[pos:pos+n] clamped like a Python slice; advances pos by n (possibly past the end, as Python does) */
static PyObject *slice(reader *r, int64_t n)
{
    Py_ssize_t start = r->pos < r->len ? r->pos : r->len;
    Py_ssize_t stop = (n > (int64_t)(r->len - start)) ? r->len : start + (Py_ssize_t)n;
    r->pos = (n > PY_SSIZE_T_MAX - r->pos) ? PY_SSIZE_T_MAX : r->pos + (Py_ssize_t)n;
    return PyBytes_FromStringAndSize((const char *)r->buf + start, stop - start);
}

static PyObject *error_tuple(const char *kind, PyObject *message)
{
    if (message == NULL)
        return NULL;
    PyObject *t = Py_BuildValue("(sN)", kind, message);
    return t;
}

static PyObject *decode_records(PyObject *Py_UNUSED(self), PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, end, count;
    long long base_offset, first_ts, max_ts;
    int log_append_time;
    PyObject *topic, *partition, *leader_epoch;
    PyTypeObject *record_cls;
    if (!PyArg_ParseTuple(args, "y*nnnLLLpOOOO!", &view, &pos, &end, &count, &base_offset, &first_ts, &max_ts,
                          &log_append_time, &topic, &partition, &leader_epoch, &PyType_Type, &record_cls))
        return NULL;
    if (!PyType_IsSubtype(record_cls, &PyTuple_Type)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "record_cls must be a tuple subtype");
        return NULL;
    }
    PyObject *out = PyList_New(0), *sizes = PyList_New(0), *error = NULL, *result = NULL;
    PyObject *ts_type = PyLong_FromLong(log_append_time ? 1 : 0);
    PyObject *ts_max = PyLong_FromLongLong(max_ts);
    if (!out || !sizes || !ts_type || !ts_max)
        goto done;
    reader r = {(const unsigned char *)view.buf, view.len, pos};
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t length, attrs, ts_delta, offset_delta, key_len, value_len, count_h;
        if (read_varint(&r, &length) < 0)
            goto structure;
        Py_ssize_t start = r.pos;
        if (read_varint(&r, &attrs) < 0 || read_varint(&r, &ts_delta) < 0 || read_varint(&r, &offset_delta) < 0 ||
            read_varint(&r, &key_len) < 0)
            goto structure;
        PyObject *key, *value, *headers, *rec;
        Py_ssize_t header_size = -1;
        if (key_len >= 0) {
            key = slice(&r, key_len);
            if (!key)
                goto done;
        } else {
            key = Py_NewRef(Py_None);
            key_len = -1;
        }
        if (read_varint(&r, &value_len) < 0) {
            Py_DECREF(key);
            goto structure;
        }
        if (value_len >= 0) {
            value = slice(&r, value_len);
            if (!value) {
                Py_DECREF(key);
                goto done;
            }
        } else {
            value = Py_NewRef(Py_None);
            value_len = -1;
        }
        headers = PyList_New(0);
        if (!headers || read_varint(&r, &count_h) < 0) {
            Py_DECREF(key);
            Py_DECREF(value);
            Py_XDECREF(headers);
            if (!headers)
                goto done;
            goto structure;
        }
        if (count_h < 0) {
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(headers);
            error = error_tuple("corrupt", PyUnicode_FromFormat("Found invalid number of record headers %lld",
                                                                (long long)count_h));
            goto finish;
        }
        if (count_h > 0)
            header_size = 0;
        for (int64_t h = 0; h < count_h; h++) {
            int64_t hk_len, hv_len;
            const char *what = NULL;
            if (read_varint(&r, &hk_len) < 0) {
                what = "structure";
            } else if (hk_len < 0) {
                Py_DECREF(key);
                Py_DECREF(value);
                Py_DECREF(headers);
                error = error_tuple("corrupt", PyUnicode_FromFormat("Invalid negative header key size %lld",
                                                                    (long long)hk_len));
                goto finish;
            }
            PyObject *h_key = NULL, *h_value = NULL, *pair = NULL;
            if (!what) {
                Py_ssize_t ks = r.pos < r.len ? r.pos : r.len;
                Py_ssize_t ke = (hk_len > (int64_t)(r.len - ks)) ? r.len : ks + (Py_ssize_t)hk_len;
                h_key = PyUnicode_DecodeUTF8((const char *)r.buf + ks, ke - ks, "strict");
                if (!h_key) {
                    if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                        Py_DECREF(key);
                        Py_DECREF(value);
                        Py_DECREF(headers);
                        goto done;
                    }
                    PyErr_Clear();
                    what = "structure";
                } else {
                    r.pos = (hk_len > PY_SSIZE_T_MAX - r.pos) ? PY_SSIZE_T_MAX : r.pos + (Py_ssize_t)hk_len;
                }
            }
            if (!what && read_varint(&r, &hv_len) < 0)
                what = "structure";
            if (what) {
                Py_XDECREF(h_key);
                Py_DECREF(key);
                Py_DECREF(value);
                Py_DECREF(headers);
                goto structure;
            }
            if (hv_len >= 0) {
                h_value = slice(&r, hv_len);
                if (h_value)
                    header_size += (Py_ssize_t)hk_len + PyBytes_GET_SIZE(h_value);
            } else {
                h_value = Py_NewRef(Py_None);
                header_size += (Py_ssize_t)hk_len;
            }
            if (h_value)
                pair = PyTuple_Pack(2, h_key, h_value);
            Py_DECREF(h_key);
            Py_XDECREF(h_value);
            if (!pair || PyList_Append(headers, pair) < 0) {
                Py_XDECREF(pair);
                Py_DECREF(key);
                Py_DECREF(value);
                Py_DECREF(headers);
                goto done;
            }
            Py_DECREF(pair);
        }
        if (r.pos - start != length) {
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(headers);
            error = error_tuple("corrupt", PyUnicode_FromFormat(
                "Invalid record size: expected to read %lld bytes in record payload, but instead read %zd",
                (long long)length, r.pos - start));
            goto finish;
        }
        if (r.pos > end) {
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(headers);
            error = error_tuple("structure", PyUnicode_FromString("IndexError('record runs past the end of its "
                                                                  "batch')"));
            goto finish;
        }
        rec = record_cls->tp_alloc(record_cls, 13);
        if (!rec) {
            Py_DECREF(key);
            Py_DECREF(value);
            Py_DECREF(headers);
            goto done;
        }
        PyObject *offset = sum_int64(base_offset, offset_delta);
        PyObject *ts = log_append_time ? Py_NewRef(ts_max) : sum_int64(first_ts, ts_delta);
        PyObject *ksize = PyLong_FromLongLong(key_len), *vsize = PyLong_FromLongLong(value_len);
        PyObject *hsize = PyLong_FromSsize_t(header_size), *size = PyLong_FromLongLong(length);
        PyTuple_SET_ITEM(rec, 0, Py_NewRef(topic));
        PyTuple_SET_ITEM(rec, 1, Py_NewRef(partition));
        PyTuple_SET_ITEM(rec, 2, Py_NewRef(leader_epoch));
        PyTuple_SET_ITEM(rec, 3, offset);
        PyTuple_SET_ITEM(rec, 4, ts);
        PyTuple_SET_ITEM(rec, 5, Py_NewRef(ts_type));
        PyTuple_SET_ITEM(rec, 6, key);
        PyTuple_SET_ITEM(rec, 7, value);
        PyTuple_SET_ITEM(rec, 8, headers);
        PyTuple_SET_ITEM(rec, 9, Py_NewRef(Py_None));
        PyTuple_SET_ITEM(rec, 10, ksize);
        PyTuple_SET_ITEM(rec, 11, vsize);
        PyTuple_SET_ITEM(rec, 12, hsize);
        if (!offset || !ts || !ksize || !vsize || !hsize || !size) {
            Py_XDECREF(size);
            Py_DECREF(rec);
            goto done;
        }
        /* Records hold only bytes, str, ints and None (their headers list is fresh and ours): no cycle can run
         * through them, so the cyclic GC need not track them. Tracked, tens of thousands of them queued made
         * every full collection walk them all: 85% of the decoding time at 100-byte records. (Untracking only
         * hides them from the cycle detector; reference counting frees them as usual. A cycle a user builds by
         * putting a record into its own headers list would be leaked, not freed early.) */
        PyObject_GC_UnTrack(headers);
        PyObject_GC_UnTrack(rec);
        int failed = PyList_Append(out, rec) < 0 || PyList_Append(sizes, size) < 0;
        Py_DECREF(rec);
        Py_DECREF(size);
        if (failed)
            goto done;
    }
    if (r.pos != end) {
        error = error_tuple("corrupt", PyUnicode_FromFormat("%zd unconsumed bytes after all records consumed",
                                                            end - r.pos));
        goto finish;
    }
    error = Py_NewRef(Py_None);
    goto finish;
structure:
    error = error_tuple("structure", PyUnicode_FromString("IndexError('record data ends inside a record')"));
finish:
    if (error)
        result = PyTuple_Pack(3, out, sizes, error);
done:
    Py_XDECREF(error);
    Py_XDECREF(out);
    Py_XDECREF(sizes);
    Py_XDECREF(ts_type);
    Py_XDECREF(ts_max);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *payload_bytes(PyObject *Py_UNUSED(self), PyObject *records)
{
    /* sum of max(0, serialized_key_size) + max(0, serialized_value_size) over ConsumerRecord tuples */
    PyObject *seq = PySequence_Fast(records, "records must be a sequence");
    if (!seq)
        return NULL;
    long long total = 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *rec = items[i];
        if (!PyTuple_Check(rec) || PyTuple_GET_SIZE(rec) < 12) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "a record is not a ConsumerRecord tuple");
            return NULL;
        }
        for (int f = 10; f <= 11; f++) {
            long long v = PyLong_AsLongLong(PyTuple_GET_ITEM(rec, f));
            if (v == -1 && PyErr_Occurred()) {
                Py_DECREF(seq);
                return NULL;
            }
            if (v > 0)
                total += v;
        }
    }
    Py_DECREF(seq);
    return PyLong_FromLongLong(total);
}

static PyObject *columns(PyObject *Py_UNUSED(self), PyObject *args)
{
    /* columns(records, min_offset, offsets, timestamps, types, keys, values, headers) -> (appended, last_offset):
     * append the offset, timestamp, timestamp type, key, value (and headers, unless that list is None) of every
     * ConsumerRecord tuple of ``records`` whose offset is >= min_offset to the given lists (the Spark source's
     * columns, without a Python loop over the records). last_offset is that of the last record appended, or None. */
    PyObject *records, *lists[6];
    long long min_offset;
    if (!PyArg_ParseTuple(args, "OLO!O!O!O!O!O", &records, &min_offset, &PyList_Type, &lists[0], &PyList_Type,
                          &lists[1], &PyList_Type, &lists[2], &PyList_Type, &lists[3], &PyList_Type, &lists[4],
                          &lists[5]))
        return NULL;
    if (lists[5] != Py_None && !PyList_Check(lists[5])) {
        PyErr_SetString(PyExc_TypeError, "headers must be a list or None");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(records, "records must be a sequence");
    if (!seq)
        return NULL;
    static const int fields[6] = {3, 4, 5, 6, 7, 8};  /* offset, timestamp, timestamp_type, key, value, headers */
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), appended = 0;
    PyObject **items = PySequence_Fast_ITEMS(seq), *last = Py_None;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *rec = items[i];
        if (!PyTuple_Check(rec) || PyTuple_GET_SIZE(rec) < 9) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "a record is not a ConsumerRecord tuple");
            return NULL;
        }
        long long off = PyLong_AsLongLong(PyTuple_GET_ITEM(rec, 3));
        if (off == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            return NULL;
        }
        if (off < min_offset)
            continue;
        for (int f = 0; f < 6; f++) {
            if (lists[f] == Py_None)
                continue;
            if (PyList_Append(lists[f], PyTuple_GET_ITEM(rec, fields[f])) < 0) {
                Py_DECREF(seq);
                return NULL;
            }
        }
        last = PyTuple_GET_ITEM(rec, 3);
        appended++;
    }
    PyObject *result = Py_BuildValue("(nO)", appended, last);
    Py_DECREF(seq);
    return result;
}

static PyMethodDef methods[] = {
    {"decode_records", decode_records, METH_VARARGS,
     "decode_records(buf, pos, end, count, base_offset, first_timestamp, max_timestamp, log_append_time, topic, "
     "partition, leader_epoch, record_cls) -> (records, sizes, error)"},
    {"payload_bytes", payload_bytes, METH_O, "payload_bytes(records) -> keys' + values' bytes"},
    {"columns", columns, METH_VARARGS,
     "columns(records, min_offset, offsets, timestamps, types, keys, values, headers) -> (appended, last_offset)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "zkconsumer._records",
                                    "Record batch v2 decoding in C (see zkconsumer/kafka/record_batch.py).", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__records(void) { return PyModule_Create(&module); }
