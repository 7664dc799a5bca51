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
#include <string.h>
#include <structmember.h>
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define HAVE_SSE42_CRC 1
#endif

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

/* Why a run of records stopped early, as plain values (a check calls no Python, so that it can run without the
 * interpreter lock); stop_error() makes the (kind, message) tuple decode_records returns of it. */
typedef enum {
    STOP_NONE,            /* not stopped */
    STOP_DATA_ENDS,       /* structure: a read past the data, a bad varint or an undecodable header key */
    STOP_PAST_BATCH,      /* structure: a record that ends past its batch */
    STOP_HEADER_COUNT,    /* corrupt: a negative header count (a) */
    STOP_HEADER_KEY,      /* corrupt: a negative header key size (a) */
    STOP_RECORD_SIZE,     /* corrupt: a record of a length (a) other than what was read (n) */
    STOP_UNCONSUMED,      /* corrupt: n bytes after the batch's last record */
} stop_kind;

typedef struct {
    stop_kind kind;
    long long a;
    Py_ssize_t n;
} stop_reason;

/* None, or the (kind, message) tuple of a stop; NULL with an exception set */
static PyObject *stop_error(const stop_reason *s)
{
    switch (s->kind) {
    case STOP_NONE:
        return Py_NewRef(Py_None);
    case STOP_DATA_ENDS:
        return error_tuple("structure", PyUnicode_FromString("IndexError('record data ends inside a record')"));
    case STOP_PAST_BATCH:
        return error_tuple("structure", PyUnicode_FromString("IndexError('record runs past the end of its batch')"));
    case STOP_HEADER_COUNT:
        return error_tuple("corrupt", PyUnicode_FromFormat("Found invalid number of record headers %lld", s->a));
    case STOP_HEADER_KEY:
        return error_tuple("corrupt", PyUnicode_FromFormat("Invalid negative header key size %lld", s->a));
    case STOP_RECORD_SIZE:
        return error_tuple("corrupt", PyUnicode_FromFormat(
            "Invalid record size: expected to read %lld bytes in record payload, but instead read %zd", s->a, s->n));
    case STOP_UNCONSUMED:
        return error_tuple("corrupt", PyUnicode_FromFormat("%zd unconsumed bytes after all records consumed", s->n));
    }
    PyErr_SetString(PyExc_SystemError, "unknown stop reason");
    return NULL;
}

/* 1 when s[0:n] is UTF-8 that Python's strict decoder accepts (no overlong forms, no surrogates, nothing past
 * U+10FFFF, no sequence cut short), else 0 */
static int valid_utf8(const unsigned char *s, Py_ssize_t n)
{
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned int c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int more;
        unsigned int lo = 0x80, hi = 0xBF;  /* the range of the second byte */
        if (c >= 0xC2 && c <= 0xDF)
            more = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            more = 2;
            if (c == 0xE0)
                lo = 0xA0;  /* overlong */
            else if (c == 0xED)
                hi = 0x9F;  /* surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            more = 3;
            if (c == 0xF0)
                lo = 0x90;  /* overlong */
            else if (c == 0xF4)
                hi = 0x8F;  /* past U+10FFFF */
        } else
            return 0;
        if (n - i - 1 < more || s[i + 1] < lo || s[i + 1] > hi)
            return 0;
        for (int k = 2; k <= more; k++)
            if ((s[i + k] & 0xC0) != 0x80)
                return 0;
        i += 1 + more;
    }
    return 1;
}

/* ---- CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of a v2 batch ----------------------
 * With SSE 4.2's crc32 instruction where the CPU has it, else eight tables (eight bytes a step); both compute the
 * same value as the crc32c package (tests/kafka/test_records_c.py checks them against it). Pure C: callers may run
 * them without the interpreter lock. */

static uint32_t crc_tables[8][256];

static void crc32c_init_tables(void)
{
    for (uint32_t k = 0; k < 256; k++) {
        uint32_t c = k;
        for (int j = 0; j < 8; j++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
        crc_tables[0][k] = c;
    }
    for (uint32_t k = 0; k < 256; k++)
        for (int t = 1; t < 8; t++)
            crc_tables[t][k] = (crc_tables[t - 1][k] >> 8) ^ crc_tables[0][crc_tables[t - 1][k] & 0xFF];
}

/* the running (not yet inverted) CRC of crc and p[0:n], by tables */
static uint32_t crc32c_sw(uint32_t crc, const unsigned char *p, size_t n)
{
    while (n >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        crc = crc_tables[7][lo & 0xFF] ^ crc_tables[6][(lo >> 8) & 0xFF] ^ crc_tables[5][(lo >> 16) & 0xFF] ^
              crc_tables[4][lo >> 24] ^ crc_tables[3][p[4]] ^ crc_tables[2][p[5]] ^ crc_tables[1][p[6]] ^
              crc_tables[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ crc_tables[0][(crc ^ *p++) & 0xFF];
    return crc;
}

#ifdef HAVE_SSE42_CRC
__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const unsigned char *p, size_t n)
{
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        p += 8;
        n -= 8;
    }
    crc = (uint32_t)c;
    while (n--)
        crc = _mm_crc32_u8(crc, *p++);
    return crc;
}
#endif

static int crc_hw;  /* the CPU has the instruction (set when the module loads) */

/* the CRC-32C of p[0:n]; hw: with the instruction (only where crc_hw) */
static uint32_t crc32c_of(const unsigned char *p, size_t n, int hw)
{
#ifdef HAVE_SSE42_CRC
    if (hw)
        return ~crc32c_hw(0xFFFFFFFFu, p, n);
#endif
    (void)hw;
    return ~crc32c_sw(0xFFFFFFFFu, p, n);
}

static PyObject *crc32c_py(PyObject *Py_UNUSED(self), PyObject *args)
{
    /* crc32c(data, hw=True) -> the CRC-32C of data (bytes-like); hw=False: by tables even where the CPU has the
     * instruction (for tests) */
    Py_buffer view;
    int hw = 1;
    if (!PyArg_ParseTuple(args, "y*|p", &view, &hw))
        return NULL;
    uint32_t crc = crc32c_of(view.buf, (size_t)view.len, hw && crc_hw);
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

/* scan_batch and scan_batches check batches of at least this many bytes (in all) without the interpreter lock */
#define CHECK_WITHOUT_LOCK_FROM 16384

/* pos + n, saturated (a length read from the data may point far past it) */
static inline Py_ssize_t skip(Py_ssize_t pos, int64_t n)
{
    return (n > PY_SSIZE_T_MAX - pos) ? PY_SSIZE_T_MAX : pos + (Py_ssize_t)n;
}

/* The timestamp object a LazyRecords built last and its value: the next record of the same millisecond shares it
 * (at high rates most do) instead of allocating its own. */
typedef struct {
    PyObject *obj;
    long long value;
} ts_cache;

/* What a batch's records are decoded with: the batch header's fields and the record type. */
typedef struct {
    long long base_offset, first_ts, max_ts;
    int log_append_time;
    PyObject *topic, *partition, *leader_epoch, *ts_type, *ts_max;
    PyTypeObject *record_cls;
} batch_info;

/* Decode (build != 0) or only check (build == 0) up to `count` records from r->pos. Building appends each record to
 * `out` and its size to `sizes` (either may be NULL; `one`, when not NULL, gets the single record built instead of
 * `out`: a new reference; `tc`, when not NULL, the timestamp last built, shared with a record of the same
 * millisecond). Checking allocates nothing and calls no Python API (it may run without the interpreter
 * lock); it writes each record's start position to `starts`, its size to `lengths` and its offset (b->base_offset +
 * its delta) to `offsets` (each when not NULL). Both add the records' keys' + values' bytes to *kv_bytes (when not
 * NULL). Returns the number of records read, with *stop saying why it stopped short or STOP_NONE; or -1 with an
 * exception set (building only). Checking and decoding read and judge the bytes identically: a record that checks
 * decodes. `whole`: the records are the batch's last ones (what follows them must be the batch's end), not some
 * picked out of it. */
static Py_ssize_t decode_impl(reader *rp, Py_ssize_t end, Py_ssize_t count, const batch_info *b, int build,
                              PyObject *out, PyObject *sizes, PyObject **one, ts_cache *tc, Py_ssize_t *starts,
                              long long *lengths, long long *offsets, long long *kv_bytes, int whole,
                              stop_reason *stop)
{
    reader r = *rp;
    Py_ssize_t i;
    stop->kind = STOP_NONE;
    for (i = 0; i < count; i++) {
        int64_t length, attrs, ts_delta, offset_delta, key_len, value_len, count_h;
        Py_ssize_t record_start = r.pos;
        PyObject *key = NULL, *value = NULL, *headers = NULL, *rec;
        Py_ssize_t header_size = -1;
        if (read_varint(&r, &length) < 0)
            goto data_ends;
        Py_ssize_t start = r.pos;
        if (read_varint(&r, &attrs) < 0 || read_varint(&r, &ts_delta) < 0 || read_varint(&r, &offset_delta) < 0 ||
            read_varint(&r, &key_len) < 0)
            goto data_ends;
        if (key_len >= 0) {
            if (build) {
                if (!(key = slice(&r, key_len)))
                    goto fail;
            } else
                r.pos = skip(r.pos, key_len);
        } else {
            key = build ? Py_NewRef(Py_None) : NULL;
            key_len = -1;
        }
        if (read_varint(&r, &value_len) < 0)
            goto data_ends;
        if (value_len >= 0) {
            if (build) {
                if (!(value = slice(&r, value_len)))
                    goto fail;
            } else
                r.pos = skip(r.pos, value_len);
        } else {
            value = build ? Py_NewRef(Py_None) : NULL;
            value_len = -1;
        }
        if (build && !(headers = PyList_New(0)))
            goto fail;
        if (read_varint(&r, &count_h) < 0)
            goto data_ends;
        if (count_h < 0) {
            stop->kind = STOP_HEADER_COUNT;
            stop->a = count_h;
            goto stopped;
        }
        if (count_h > 0)
            header_size = 0;
        for (int64_t h = 0; h < count_h; h++) {
            int64_t hk_len, hv_len;
            if (read_varint(&r, &hk_len) < 0)
                goto data_ends;
            if (hk_len < 0) {
                stop->kind = STOP_HEADER_KEY;
                stop->a = hk_len;
                goto stopped;
            }
            /* the key as Python slices it: what is left of the data, clamped */
            Py_ssize_t ks = r.pos < r.len ? r.pos : r.len;
            Py_ssize_t ke = (hk_len > (int64_t)(r.len - ks)) ? r.len : ks + (Py_ssize_t)hk_len;
            if (!valid_utf8(r.buf + ks, ke - ks))
                goto data_ends;
            PyObject *h_key = NULL;
            if (build && !(h_key = PyUnicode_DecodeUTF8((const char *)r.buf + ks, ke - ks, "strict")))
                goto fail;
            r.pos = skip(r.pos, hk_len);
            if (read_varint(&r, &hv_len) < 0) {
                Py_XDECREF(h_key);
                goto data_ends;
            }
            if (!build) {
                if (hv_len >= 0) {
                    /* as slice(): what is left of the data, clamped, then the position moves on by hv_len */
                    Py_ssize_t vs = r.pos < r.len ? r.pos : r.len;
                    Py_ssize_t vn = (hv_len > (int64_t)(r.len - vs)) ? r.len - vs : (Py_ssize_t)hv_len;
                    header_size += (Py_ssize_t)hk_len + vn;
                    r.pos = skip(r.pos, hv_len);
                } else
                    header_size += (Py_ssize_t)hk_len;
                continue;
            }
            PyObject *h_value, *pair = NULL;
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
                goto fail;
            }
            Py_DECREF(pair);
        }
        if (r.pos - start != length) {
            stop->kind = STOP_RECORD_SIZE;
            stop->a = length;
            stop->n = r.pos - start;
            goto stopped;
        }
        if (r.pos > end) {
            stop->kind = STOP_PAST_BATCH;
            goto stopped;
        }
        if (starts)
            starts[i] = record_start;
        if (lengths)
            lengths[i] = length;
        if (offsets)
            offsets[i] = (long long)((uint64_t)b->base_offset + (uint64_t)offset_delta);
        if (kv_bytes)
            *kv_bytes += (key_len > 0 ? key_len : 0) + (value_len > 0 ? value_len : 0);
        if (!build)
            continue;
        rec = b->record_cls->tp_alloc(b->record_cls, 13);
        if (!rec)
            goto fail;
        PyObject *offset = sum_int64(b->base_offset, offset_delta);
        PyObject *ts;
        int64_t ts_value;
        if (b->log_append_time)
            ts = Py_NewRef(b->ts_max);
        else if (tc && !__builtin_add_overflow((int64_t)b->first_ts, ts_delta, &ts_value)) {
            if (!tc->obj || tc->value != ts_value) {
                Py_XSETREF(tc->obj, PyLong_FromLongLong(ts_value));
                tc->value = ts_value;
            }
            ts = Py_XNewRef(tc->obj);
        } else
            ts = sum_int64(b->first_ts, ts_delta);
        PyObject *ksize = PyLong_FromLongLong(key_len), *vsize = PyLong_FromLongLong(value_len);
        PyObject *hsize = PyLong_FromSsize_t(header_size);
        PyTuple_SET_ITEM(rec, 0, Py_NewRef(b->topic));
        PyTuple_SET_ITEM(rec, 1, Py_NewRef(b->partition));
        PyTuple_SET_ITEM(rec, 2, Py_NewRef(b->leader_epoch));
        PyTuple_SET_ITEM(rec, 3, offset);
        PyTuple_SET_ITEM(rec, 4, ts);
        PyTuple_SET_ITEM(rec, 5, Py_NewRef(b->ts_type));
        PyTuple_SET_ITEM(rec, 6, key);
        PyTuple_SET_ITEM(rec, 7, value);
        PyTuple_SET_ITEM(rec, 8, headers);
        PyTuple_SET_ITEM(rec, 9, Py_NewRef(Py_None));
        PyTuple_SET_ITEM(rec, 10, ksize);
        PyTuple_SET_ITEM(rec, 11, vsize);
        PyTuple_SET_ITEM(rec, 12, hsize);
        key = value = headers = NULL;  /* the record holds them */
        if (!offset || !ts || !ksize || !vsize || !hsize) {
            Py_DECREF(rec);
            goto fail;
        }
        /* Records hold only bytes, str, ints and None (their headers list is fresh and ours): no cycle can run
         * through them, so the cyclic GC need not track them. Tracked, tens of thousands of them queued made
         * every full collection walk them all: 85% of the decoding time at 100-byte records. (Untracking only
         * hides them from the cycle detector; reference counting frees them as usual. A cycle a user builds by
         * putting a record into its own headers list would be leaked, not freed early.) */
        PyObject_GC_UnTrack(PyTuple_GET_ITEM(rec, 8));
        PyObject_GC_UnTrack(rec);
        if (one) {
            Py_XSETREF(*one, rec);
            continue;
        }
        int failed = out && PyList_Append(out, rec) < 0;
        Py_DECREF(rec);
        if (!failed && sizes) {
            PyObject *size = PyLong_FromLongLong(length);
            failed = !size || PyList_Append(sizes, size) < 0;
            Py_XDECREF(size);
        }
        if (failed)
            goto fail;
        continue;
    data_ends:
        stop->kind = STOP_DATA_ENDS;
    stopped:
        Py_XDECREF(key);
        Py_XDECREF(value);
        Py_XDECREF(headers);
        *rp = r;
        return i;
    fail:
        Py_XDECREF(key);
        Py_XDECREF(value);
        Py_XDECREF(headers);
        *rp = r;
        return -1;
    }
    if (whole && r.pos != end) {
        stop->kind = STOP_UNCONSUMED;
        stop->n = end - r.pos;
    }
    *rp = r;
    return i;
}

static PyObject *decode_records(PyObject *Py_UNUSED(self), PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, end, count;
    batch_info b;
    if (!PyArg_ParseTuple(args, "y*nnnLLLpOOOO!", &view, &pos, &end, &count, &b.base_offset, &b.first_ts,
                          &b.max_ts, &b.log_append_time, &b.topic, &b.partition, &b.leader_epoch, &PyType_Type,
                          &b.record_cls))
        return NULL;
    if (!PyType_IsSubtype(b.record_cls, &PyTuple_Type)) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "record_cls must be a tuple subtype");
        return NULL;
    }
    PyObject *out = PyList_New(0), *sizes = PyList_New(0), *error = NULL, *result = NULL;
    b.ts_type = PyLong_FromLong(b.log_append_time ? 1 : 0);
    b.ts_max = PyLong_FromLongLong(b.max_ts);
    if (out && sizes && b.ts_type && b.ts_max) {
        reader r = {(const unsigned char *)view.buf, view.len, pos};
        stop_reason stop;
        if (decode_impl(&r, end, count, &b, 1, out, sizes, NULL, NULL, NULL, NULL, NULL, NULL, 1, &stop) >= 0 &&
            (error = stop_error(&stop)))
            result = PyTuple_Pack(3, out, sizes, error);
    }
    Py_XDECREF(error);
    Py_XDECREF(out);
    Py_XDECREF(sizes);
    Py_XDECREF(b.ts_type);
    Py_XDECREF(b.ts_max);
    PyBuffer_Release(&view);
    return result;
}

/* ---- LazyRecords: checked records, built one by one when they are read --------------------------------------
 *
 * scan_batch() checks a batch's records as decode_records() would decode them (the same reads, the same errors)
 * without building them, and keeps where each record starts and its offset. A LazyRecords is a sequence of such
 * records, of one or more batches (slice() and join() make new ones sharing the data): x[i] builds the i-th record
 * exactly as decode_records() builds it (the last one built is kept, so x[i] is x[i] for the last i read: a stream's
 * give_back compares by identity); x.offset(i) reads an offset without building anything; x.nbytes is the records'
 * keys' + values' bytes. Building a record that checked cannot fail but for lack of memory. */

typedef struct {
    PyObject *data;        /* the bytes the batch's records are in */
    Py_ssize_t end;        /* where they end */
    batch_info info;       /* strong references: topic, partition, leader_epoch, ts_type, ts_max, record_cls */
} segment;

typedef struct {
    PyObject_HEAD
    Py_ssize_t n, nseg;
    Py_ssize_t *starts;    /* each record's start in its segment's data */
    long long *offsets;    /* each record's offset */
    int32_t *seg;          /* each record's segment */
    segment *segs;
    long long nbytes;
    Py_ssize_t last_i;
    PyObject *last;        /* the record built last (index last_i), or NULL */
    ts_cache tc;           /* the timestamp built last */
} LazyRecords;

static PyTypeObject LazyRecordsType;

static void segment_ref(segment *s, int incref)
{
    PyObject *objs[7] = {s->data, s->info.topic, s->info.partition, s->info.leader_epoch, s->info.ts_type,
                         s->info.ts_max, (PyObject *)s->info.record_cls};
    for (int k = 0; k < 7; k++) {
        if (incref)
            Py_XINCREF(objs[k]);
        else
            Py_XDECREF(objs[k]);
    }
}

static LazyRecords *lazy_new(Py_ssize_t n, Py_ssize_t nseg)
{
    LazyRecords *x = PyObject_New(LazyRecords, &LazyRecordsType);
    if (!x)
        return NULL;
    x->n = n;
    x->nseg = 0;
    x->nbytes = 0;
    x->last_i = -1;
    x->last = NULL;
    x->tc.obj = NULL;
    x->starts = PyMem_Malloc(sizeof(Py_ssize_t) * (n ? n : 1));
    x->offsets = PyMem_Malloc(sizeof(long long) * (n ? n : 1));
    x->seg = PyMem_Malloc(sizeof(int32_t) * (n ? n : 1));
    x->segs = PyMem_Calloc(nseg ? nseg : 1, sizeof(segment));
    if (!x->starts || !x->offsets || !x->seg || !x->segs) {
        Py_DECREF(x);
        PyErr_NoMemory();
        return NULL;
    }
    return x;
}

static void lazy_dealloc(LazyRecords *x)
{
    for (Py_ssize_t k = 0; k < x->nseg; k++)
        segment_ref(&x->segs[k], 0);
    Py_XDECREF(x->last);
    Py_XDECREF(x->tc.obj);
    PyMem_Free(x->starts);
    PyMem_Free(x->offsets);
    PyMem_Free(x->seg);
    PyMem_Free(x->segs);
    PyObject_Free(x);
}

static Py_ssize_t lazy_len(LazyRecords *x) { return x->n; }

static PyObject *lazy_item(LazyRecords *x, Py_ssize_t i)
{
    if (i < 0 || i >= x->n) {
        PyErr_SetString(PyExc_IndexError, "LazyRecords index out of range");
        return NULL;
    }
    if (i == x->last_i && x->last)
        return Py_NewRef(x->last);
    segment *s = &x->segs[x->seg[i]];
    reader r = {(const unsigned char *)PyBytes_AS_STRING(s->data), PyBytes_GET_SIZE(s->data), x->starts[i]};
    PyObject *rec = NULL;
    stop_reason stop;
    if (decode_impl(&r, s->end, 1, &s->info, 1, NULL, NULL, &rec, &x->tc, NULL, NULL, NULL, NULL, 0, &stop) < 0)
        Py_CLEAR(rec);
    else if (stop.kind != STOP_NONE) {
        PyObject *error = stop_error(&stop);
        if (error)
            PyErr_Format(PyExc_RuntimeError, "a checked record did not decode: %R", error);
        Py_XDECREF(error);
        Py_CLEAR(rec);
    }
    if (rec) {
        Py_XSETREF(x->last, Py_NewRef(rec));
        x->last_i = i;
    }
    return rec;
}

static PyObject *lazy_offset(LazyRecords *x, PyObject *arg)
{
    Py_ssize_t i = PyLong_AsSsize_t(arg);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    if (i < 0)
        i += x->n;
    if (i < 0 || i >= x->n) {
        PyErr_SetString(PyExc_IndexError, "LazyRecords index out of range");
        return NULL;
    }
    return PyLong_FromLongLong(x->offsets[i]);
}

/* a new LazyRecords of all the records of the given ones in order, or (sliced) of the records [i, j) of the one
 * given, sharing their data */
static LazyRecords *lazy_concat(LazyRecords **parts, Py_ssize_t nparts, int sliced, Py_ssize_t i, Py_ssize_t j)
{
    Py_ssize_t n = 0, nseg = 0;
    for (Py_ssize_t p = 0; p < nparts; p++) {
        n += parts[p]->n;
        nseg += parts[p]->nseg;
    }
    if (sliced)
        n = j - i;
    LazyRecords *x = lazy_new(n, nseg);
    if (!x)
        return NULL;
    Py_ssize_t at = 0, seg_base = 0;
    for (Py_ssize_t p = 0; p < nparts; p++) {
        LazyRecords *y = parts[p];
        Py_ssize_t from = sliced ? i : 0, to = sliced ? j : y->n;
        for (Py_ssize_t k = 0; k < y->nseg; k++) {
            x->segs[seg_base + k] = y->segs[k];
            segment_ref(&x->segs[seg_base + k], 1);
        }
        x->nseg = seg_base + y->nseg;
        for (Py_ssize_t k = from; k < to; k++, at++) {
            x->starts[at] = y->starts[k];
            x->offsets[at] = y->offsets[k];
            x->seg[at] = (int32_t)(y->seg[k] + seg_base);
        }
        seg_base += y->nseg;
    }
    return x;
}

/* keys' + values' bytes of x's records (read again from the data: slices and joins keep no per-record sizes) */
static int lazy_count_bytes(LazyRecords *x)
{
    long long total = 0;
    for (Py_ssize_t i = 0; i < x->n; i++) {
        segment *s = &x->segs[x->seg[i]];
        long long kv = 0;
        reader r = {(const unsigned char *)PyBytes_AS_STRING(s->data), PyBytes_GET_SIZE(s->data), x->starts[i]};
        stop_reason stop;
        decode_impl(&r, s->end, 1, &s->info, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, &kv, 0, &stop);
        total += kv;
    }
    x->nbytes = total;
    return 0;
}

static PyObject *lazy_slice(LazyRecords *x, PyObject *args)
{
    Py_ssize_t i, j;
    if (!PyArg_ParseTuple(args, "nn", &i, &j))
        return NULL;
    if (i < 0 || j > x->n || i > j) {
        PyErr_SetString(PyExc_IndexError, "LazyRecords slice out of range");
        return NULL;
    }
    LazyRecords *y = lazy_concat(&x, 1, 1, i, j);
    if (y && lazy_count_bytes(y) < 0)
        Py_CLEAR(y);
    return (PyObject *)y;
}

static PyMethodDef lazy_methods[] = {
    {"offset", (PyCFunction)lazy_offset, METH_O, "offset(i) -> the i-th record's offset (nothing built)"},
    {"slice", (PyCFunction)lazy_slice, METH_VARARGS, "slice(i, j) -> the records [i, j) (sharing the data)"},
    {NULL}};

static PyMemberDef lazy_members[] = {
    {"nbytes", T_LONGLONG, offsetof(LazyRecords, nbytes), READONLY, "the records' keys' + values' bytes"},
    {NULL}};

static PySequenceMethods lazy_as_sequence = {
    .sq_length = (lenfunc)lazy_len,
    .sq_item = (ssizeargfunc)lazy_item,
};

static PyTypeObject LazyRecordsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "zkconsumer._records.LazyRecords",
    .tp_basicsize = sizeof(LazyRecords),
    .tp_dealloc = (destructor)lazy_dealloc,
    .tp_as_sequence = &lazy_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Checked records built one by one when read (see zkconsumer/_records.c).",
    .tp_methods = lazy_methods,
    .tp_members = lazy_members,
};

/* One batch's scan: its arguments, the LazyRecords it fills and the sizes of its records (C, then a list). */
typedef struct {
    PyObject *data;
    Py_ssize_t pos, end, count, todo, crc_from;
    unsigned long crc;
    batch_info b;
    LazyRecords *x;
    long long *lengths;
    Py_ssize_t n;
    int crc_ok;
    stop_reason stop;
} scan_job;

/* Check the arguments and allocate what the scan fills (with the lock); 0, or -1 with an exception set. The job
 * holds x (which holds data and the batch's objects) and lengths: scan_free() releases them. */
static int scan_prepare(scan_job *j)
{
    j->x = NULL;
    j->lengths = NULL;
    if (!PyType_IsSubtype(j->b.record_cls, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "record_cls must be a tuple subtype");
        return -1;
    }
    if (j->crc_from >= 0 && (j->crc_from > j->end || j->end > PyBytes_GET_SIZE(j->data))) {
        PyErr_SetString(PyExc_ValueError, "the CRC's range is not within the data");
        return -1;
    }
    if (j->count < 0)
        j->count = 0;
    /* every record takes at least one byte: past the data's end the next read fails, as decode_records' would */
    Py_ssize_t room = PyBytes_GET_SIZE(j->data) - (j->pos < 0 ? 0 : j->pos) + 1;
    Py_ssize_t cap = j->count < room ? j->count : (room > 0 ? room : 0);
    j->todo = cap;
    j->x = lazy_new(cap, 1);
    j->lengths = PyMem_Malloc(sizeof(long long) * (cap ? cap : 1));
    if (!j->x || !j->lengths) {
        if (j->x)
            PyErr_NoMemory();
        return -1;
    }
    batch_info *b = &j->b;
    b->ts_type = PyLong_FromLong(b->log_append_time ? 1 : 0);
    b->ts_max = PyLong_FromLongLong(b->max_ts);
    if (!b->ts_type || !b->ts_max) {
        Py_XDECREF(b->ts_type);
        Py_XDECREF(b->ts_max);
        return -1;
    }
    segment *s = &j->x->segs[0];
    s->data = j->data;
    s->end = j->end;
    s->info = *b;
    segment_ref(s, 1);
    Py_DECREF(b->ts_type);  /* the segment holds them */
    Py_DECREF(b->ts_max);
    j->x->nseg = 1;
    return 0;
}

/* The CRC (when asked for), then the records' check: pure C, run with or without the lock. It reads only the
 * (immutable) bytes, which x holds, and writes only the job and x, which no one else sees yet. */
static void scan_run(scan_job *j)
{
    j->crc_ok = 1;
    j->n = 0;
    if (j->crc_from >= 0)
        j->crc_ok = crc32c_of((const unsigned char *)PyBytes_AS_STRING(j->data) + j->crc_from,
                              (size_t)(j->end - j->crc_from), crc_hw) == (uint32_t)j->crc;
    if (!j->crc_ok)
        return;
    reader r = {(const unsigned char *)PyBytes_AS_STRING(j->data), PyBytes_GET_SIZE(j->data), j->pos};
    j->n = decode_impl(&r, j->end, j->todo, &j->b, 0, NULL, NULL, NULL, NULL, j->x->starts, j->lengths,
                       j->x->offsets, &j->x->nbytes, 1, &j->stop);
    if (j->stop.kind == STOP_NONE && j->todo < j->count)  /* (cannot happen: the cap-th record's read fails first) */
        j->stop.kind = STOP_DATA_ENDS;
}

/* 1 when the batch stopped short (a CRC that differs, or an error): what follows it is never read */
static int scan_failed(const scan_job *j)
{
    return !j->crc_ok || j->stop.kind != STOP_NONE;
}

/* the job's result (with the lock): None when the CRC differs, else (LazyRecords, sizes, error); NULL on error */
static PyObject *scan_result(scan_job *j)
{
    if (!j->crc_ok)
        return Py_NewRef(Py_None);
    j->x->n = j->n;
    PyObject *sizes = PyList_New(j->n), *error = NULL, *result = NULL;
    if (!sizes)
        return NULL;
    for (Py_ssize_t i = 0; i < j->n; i++) {
        PyObject *size = PyLong_FromLongLong(j->lengths[i]);
        if (!size)
            goto done;
        PyList_SET_ITEM(sizes, i, size);
        j->x->seg[i] = 0;
    }
    if ((error = stop_error(&j->stop)))
        result = PyTuple_Pack(3, (PyObject *)j->x, sizes, error);
done:
    Py_XDECREF(error);
    Py_DECREF(sizes);
    return result;
}

static void scan_free(scan_job *j)
{
    PyMem_Free(j->lengths);
    j->lengths = NULL;
    Py_CLEAR(j->x);
}

/* Run the jobs in order, up to the first that stops short; returns how many ran. */
static Py_ssize_t scan_jobs(scan_job *jobs, Py_ssize_t njobs)
{
    for (Py_ssize_t k = 0; k < njobs; k++) {
        scan_run(&jobs[k]);
        if (scan_failed(&jobs[k]))
            return k + 1;
    }
    return njobs;
}

/* scan_jobs(), without the lock when the jobs hold enough bytes that giving it up and taking it back costs less
 * than the work */
static Py_ssize_t scan_run_all(scan_job *jobs, Py_ssize_t njobs)
{
    Py_ssize_t bytes = 0, ran;
    for (Py_ssize_t k = 0; k < njobs; k++)
        bytes += jobs[k].end > jobs[k].pos ? jobs[k].end - jobs[k].pos : 0;
    if (bytes < CHECK_WITHOUT_LOCK_FROM)
        return scan_jobs(jobs, njobs);
    Py_BEGIN_ALLOW_THREADS
    ran = scan_jobs(jobs, njobs);
    Py_END_ALLOW_THREADS
    return ran;
}

#define SCAN_FORMAT "nnnLLLpOOOO!|nk"

static PyObject *scan_batch(PyObject *Py_UNUSED(self), PyObject *args)
{
    /* scan_batch(data, pos, end, count, base_offset, first_timestamp, max_timestamp, log_append_time, topic,
     * partition, leader_epoch, record_cls[, crc_from, crc]) -> (LazyRecords, sizes, error): decode_records'
     * arguments and result, the records checked and kept to be built when read. data must be bytes. With crc_from
     * (>= 0): first the CRC-32C of data[crc_from:end] is compared with crc (the batch's checksum), and the result is
     * None when they differ. */
    scan_job j = {.crc_from = -1, .crc = 0};
    if (!PyArg_ParseTuple(args, "O!" SCAN_FORMAT, &PyBytes_Type, &j.data, &j.pos, &j.end, &j.count,
                          &j.b.base_offset, &j.b.first_ts, &j.b.max_ts, &j.b.log_append_time, &j.b.topic,
                          &j.b.partition, &j.b.leader_epoch, &PyType_Type, &j.b.record_cls, &j.crc_from, &j.crc))
        return NULL;
    PyObject *result = NULL;
    if (scan_prepare(&j) == 0) {
        scan_run_all(&j, 1);
        result = scan_result(&j);
    }
    scan_free(&j);
    return result;
}

static PyObject *scan_batches(PyObject *Py_UNUSED(self), PyObject *args)
{
    /* scan_batches(data, [(pos, end, count, base_offset, first_timestamp, max_timestamp, log_append_time, topic,
     * partition, leader_epoch, record_cls[, crc_from, crc]), ...]) -> [scan_batch's result, ...]: the batches of
     * one fetched buffer in one call (the lock given up once for them all), in order, up to and including the first
     * whose CRC differs or whose records stop short (what follows it is never read). */
    PyObject *data, *list;
    if (!PyArg_ParseTuple(args, "O!O!", &PyBytes_Type, &data, &PyList_Type, &list))
        return NULL;
    Py_ssize_t njobs = PyList_GET_SIZE(list), prepared = 0, ran = 0;
    scan_job *jobs = PyMem_Calloc(njobs ? njobs : 1, sizeof(scan_job));
    PyObject *results = NULL;
    if (!jobs)
        return PyErr_NoMemory();
    for (; prepared < njobs; prepared++) {
        scan_job *j = &jobs[prepared];
        PyObject *item = PyList_GET_ITEM(list, prepared);
        j->data = data;
        j->crc_from = -1;
        if (!PyTuple_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "scan_batches takes a list of scan_batch's arguments (tuples)");
            goto done;
        }
        if (!PyArg_ParseTuple(item, SCAN_FORMAT, &j->pos, &j->end, &j->count, &j->b.base_offset, &j->b.first_ts,
                              &j->b.max_ts, &j->b.log_append_time, &j->b.topic, &j->b.partition,
                              &j->b.leader_epoch, &PyType_Type, &j->b.record_cls, &j->crc_from, &j->crc) ||
            scan_prepare(j) < 0) {
            prepared++;  /* (scan_prepare's partial allocations are freed below) */
            goto done;
        }
    }
    ran = scan_run_all(jobs, njobs);
    if (!(results = PyList_New(ran)))
        goto done;
    for (Py_ssize_t k = 0; k < ran; k++) {
        PyObject *r = scan_result(&jobs[k]);
        if (!r) {
            Py_CLEAR(results);
            goto done;
        }
        PyList_SET_ITEM(results, k, r);
    }
done:
    for (Py_ssize_t k = 0; k < prepared; k++)
        scan_free(&jobs[k]);
    PyMem_Free(jobs);
    return results;
}

static PyObject *join_records(PyObject *Py_UNUSED(self), PyObject *parts)
{
    /* join_records([LazyRecords, ...]) -> one LazyRecords of all their records, in order */
    PyObject *seq = PySequence_Fast(parts, "join_records takes a sequence of LazyRecords");
    if (!seq)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    long long nbytes = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (Py_TYPE(items[k]) != &LazyRecordsType) {
            Py_DECREF(seq);
            PyErr_SetString(PyExc_TypeError, "join_records takes LazyRecords only");
            return NULL;
        }
        nbytes += ((LazyRecords *)items[k])->nbytes;
    }
    LazyRecords *x = lazy_concat((LazyRecords **)items, n, 0, 0, 0);
    if (x)
        x->nbytes = nbytes;
    Py_DECREF(seq);
    return (PyObject *)x;
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
    {"scan_batch", scan_batch, METH_VARARGS,
     "scan_batch(data, pos, end, count, base_offset, first_timestamp, max_timestamp, log_append_time, topic, "
     "partition, leader_epoch, record_cls) -> (LazyRecords, sizes, error)"},
    {"scan_batches", scan_batches, METH_VARARGS,
     "scan_batches(data, [scan_batch's arguments but data, ...]) -> [scan_batch's result, ...]"},
    {"join_records", join_records, METH_O, "join_records([LazyRecords, ...]) -> LazyRecords"},
    {"crc32c", crc32c_py, METH_VARARGS, "crc32c(data, hw=True) -> the CRC-32C of data"},
    {"columns", columns, METH_VARARGS,
     "columns(records, min_offset, offsets, timestamps, types, keys, values, headers) -> (appended, last_offset)"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "zkconsumer._records",
                                    "Record batch v2 decoding in C (see zkconsumer/kafka/record_batch.py).", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__records(void)
{
    if (PyType_Ready(&LazyRecordsType) < 0)
        return NULL;
    crc32c_init_tables();
#ifdef HAVE_SSE42_CRC
    __builtin_cpu_init();
    crc_hw = __builtin_cpu_supports("sse4.2");
#endif
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    if (PyModule_AddObjectRef(m, "LazyRecords", (PyObject *)&LazyRecordsType) < 0 ||
        PyModule_AddObjectRef(m, "CRC32C_HW", crc_hw ? Py_True : Py_False) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
