/*
 * zkconsumer._stream: the per-record hand-out of zkconsumer/consumer/stream.py's KafkaStream, in C.
 *
 * HandOut is KafkaStream's base class. Its __next__ does, for each record, what the pure-Python hand-out
 * (stream.py's PyHandOut) does, in the same order: read the lease's clock and compare it with the lease's deadline
 * (past it: call self._wait_lease(), in Python); raise the in-flight flag; if a record is left in the current chunk,
 * the chunk's generation is the current one and the stream is not closing, record the partition's consumed position
 * (the record's offset + 1) and hand the record out; lower the flag. Otherwise it calls self._load_chunk() (Python)
 * and, when that returns false, ends the iteration. Everything else of the stream (taking chunks, resets, the fence,
 * closing) stays in Python and reads and writes the same fields, which are plain attributes here.
 *
 * The fast path calls no Python code when the clock is time.monotonic (read here with clock_gettime, as CPython's
 * time.monotonic reads it on Linux) and the lease's deadline, the generation's value and the partition's consumed position are plain slots
 * (read and written where their descriptors would), so no other thread runs between the generation check and the
 * hand-out; the in-flight flag is kept all the same (an injected clock is Python code).
 *
 * The extension is optional (setup.py builds it when a C compiler is there); stream.py falls back to PyHandOut.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <descrobject.h>
#include <time.h>

typedef struct {
    PyObject_HEAD
    PyObject *records;      /* the records of the chunk being handed out (a list or tuple, or any sequence) */
    Py_ssize_t count;       /* len(records) */
    Py_ssize_t index;       /* the next record to hand out */
    PyObject *chunk_gen;    /* the chunk's generation (an int) */
    PyObject *generation;   /* the connector's Generation cell: its .value is the current generation */
    PyObject *part;         /* the chunk's PartitionTopicInfo */
    PyObject *lease;        /* the session lease (SessionLease or NoLease): .deadline */
    PyObject *clock;        /* the lease's clock */
    char closing;
    char inflight;
} HandOut;

/* Where a plain slot (``__slots__``) of one type lives: the lease's deadline, the generation's value and the
 * partition's consumed position are read or written at that offset, as the slot's descriptor would (a generic
 * attribute lookup for each, per record, was ~30% of the hand-out's time in a profile). Valid while the type and its
 * version tag (changed by CPython whenever an attribute of the type or of a base changes) are the ones seen: one entry
 * per attribute, the last type seen (a stream sees one type of each). */
typedef struct {
    PyTypeObject *type;     /* a strong reference, or NULL */
    unsigned int tag;
    Py_ssize_t offset;      /* -1: not a plain slot (a property, an instance dict, a custom getattr): generic access */
} SlotCache;

static SlotCache deadline_slot, value_slot, consumed_slot;

/* The offset of *name* in objects of type(obj) when it is a plain object slot reached by the generic attribute
 * protocol (for writing too, with *for_set*), else -1. */
static Py_ssize_t slot_offset(PyObject *obj, PyObject *name, SlotCache *c, int for_set)
{
    PyTypeObject *tp = Py_TYPE(obj);
    if (tp == c->type && (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) && tp->tp_version_tag == c->tag)
        return c->offset;
    Py_ssize_t offset = -1;
    if (tp->tp_getattro == PyObject_GenericGetAttr && (!for_set || tp->tp_setattro == PyObject_GenericSetAttr)) {
        PyObject *descr = _PyType_Lookup(tp, name);  /* borrowed; sets the type's version tag */
        /* a slot of this type or of a base: a descriptor of another class put on it (``x = Other.slot``) is
         * refused by the descriptor itself, so left to the generic path */
        if (descr && Py_IS_TYPE(descr, &PyMemberDescr_Type) && PyType_IsSubtype(tp, PyDescr_TYPE(descr))) {
            PyMemberDef *m = ((PyMemberDescrObject *)descr)->d_member;
            if ((m->type == T_OBJECT_EX || m->type == T_OBJECT) && !(m->flags & READONLY))
                offset = m->offset;
        }
    }
    if (tp->tp_flags & Py_TPFLAGS_VALID_VERSION_TAG) {
        /* the entry complete before the old type is let go (which may run Python code) */
        PyTypeObject *old = c->type;
        c->type = (PyTypeObject *)Py_NewRef(tp);
        c->tag = tp->tp_version_tag;
        c->offset = offset;
        Py_XDECREF(old);
    }
    return offset;
}

/* obj.<name> (a new reference), read from its slot when it is a plain one */
static PyObject *slot_get(PyObject *obj, PyObject *name, SlotCache *c)
{
    Py_ssize_t offset = slot_offset(obj, name, c, 0);
    if (offset >= 0) {
        PyObject *v = *(PyObject **)((char *)obj + offset);
        if (v)
            return Py_NewRef(v);
    }
    return PyObject_GetAttr(obj, name);  /* unset slot: the AttributeError, as Python raises it */
}

/* obj.<name> = value (a new reference, stolen), written to its slot when it is a plain one; -1 on error */
static int slot_set(PyObject *obj, PyObject *name, SlotCache *c, PyObject *value)
{
    Py_ssize_t offset = slot_offset(obj, name, c, 1);
    if (offset >= 0) {
        Py_XSETREF(*(PyObject **)((char *)obj + offset), value);
        return 0;
    }
    int r = PyObject_SetAttr(obj, name, value);
    Py_DECREF(value);
    return r;
}

static PyObject *str_value, *str_deadline, *str_consumed, *str_offset, *str_load_chunk, *str_wait_lease;
static PyObject *monotonic;  /* time.monotonic: read directly */
static PyObject *one;
static PyObject *str_fields;
static PyTypeObject *record_type;  /* the last record type seen whose field 3 is "offset" (ConsumerRecord) */

/* the record's offset (a new reference): field 3 of a namedtuple whose field 3 is "offset", else rec.offset */
static PyObject *offset_of(PyObject *rec)
{
    PyTypeObject *tp = Py_TYPE(rec);
    if (tp == record_type)
        return Py_NewRef(PyTuple_GET_ITEM(rec, 3));
    if (PyTuple_Check(rec) && tp != &PyTuple_Type && PyTuple_GET_SIZE(rec) > 3) {
        PyObject *fields = PyObject_GetAttr((PyObject *)tp, str_fields);
        if (!fields)
            PyErr_Clear();
        else {
            int named = 0;
            if (PyTuple_Check(fields) && PyTuple_GET_SIZE(fields) > 3) {
                named = PyObject_RichCompareBool(PyTuple_GET_ITEM(fields, 3), str_offset, Py_EQ);
                if (named < 0)
                    PyErr_Clear();
            }
            Py_DECREF(fields);
            if (named > 0) {
                Py_XSETREF(record_type, (PyTypeObject *)Py_NewRef(tp));
                return Py_NewRef(PyTuple_GET_ITEM(rec, 3));
            }
        }
    }
    return PyObject_GetAttr(rec, str_offset);
}

static int handout_traverse(HandOut *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->records);
    Py_VISIT(self->chunk_gen);
    Py_VISIT(self->generation);
    Py_VISIT(self->part);
    Py_VISIT(self->lease);
    Py_VISIT(self->clock);
    return 0;
}

static int handout_clear(HandOut *self)
{
    Py_CLEAR(self->records);
    Py_CLEAR(self->chunk_gen);
    Py_CLEAR(self->generation);
    Py_CLEAR(self->part);
    Py_CLEAR(self->lease);
    Py_CLEAR(self->clock);
    return 0;
}

static void handout_dealloc(HandOut *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    handout_clear(self);
    tp->tp_free((PyObject *)self);
    Py_DECREF(tp);
}

/* 1 when the lease may have expired (the clock reached its deadline), 0 when not, -1 on error */
static int lease_stale(HandOut *self)
{
    double now;
    if (self->clock == monotonic) {
        struct timespec ts;
        if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        now = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    } else {
        PyObject *t = PyObject_CallNoArgs(self->clock);
        if (!t)
            return -1;
        now = PyFloat_AsDouble(t);
        Py_DECREF(t);
        if (now == -1.0 && PyErr_Occurred())
            return -1;
    }
    PyObject *d = slot_get(self->lease, str_deadline, &deadline_slot);
    if (!d)
        return -1;
    double deadline = PyFloat_AsDouble(d);
    Py_DECREF(d);
    if (deadline == -1.0 && PyErr_Occurred())
        return -1;
    return now >= deadline;
}

/* 1 when a record of the current chunk can be handed out, 0 when not, -1 on error */
static int can_hand_out(HandOut *self)
{
    if (self->index >= self->count || self->closing || !self->chunk_gen)
        return 0;
    PyObject *current = slot_get(self->generation, str_value, &value_slot);
    if (!current)
        return -1;
    int same = current == self->chunk_gen ? 1 : PyObject_RichCompareBool(self->chunk_gen, current, Py_EQ);
    Py_DECREF(current);
    return same;
}

/* the next record, its consumed position recorded; NULL with an error set on failure */
static PyObject *hand_out(HandOut *self)
{
    PyObject *records = self->records, *rec, *offset;
    if (PyList_CheckExact(records) && self->index < PyList_GET_SIZE(records))
        rec = Py_NewRef(PyList_GET_ITEM(records, self->index));
    else if (PyTuple_CheckExact(records) && self->index < PyTuple_GET_SIZE(records))
        rec = Py_NewRef(PyTuple_GET_ITEM(records, self->index));
    else if (!(rec = PySequence_GetItem(records, self->index)))
        return NULL;
    if (!(offset = offset_of(rec))) {
        Py_DECREF(rec);
        return NULL;
    }
    PyObject *consumed = PyNumber_Add(offset, one);
    Py_DECREF(offset);
    if (!consumed || slot_set(self->part, str_consumed, &consumed_slot, consumed) < 0) {
        Py_DECREF(rec);
        return NULL;
    }
    self->index++;
    return rec;
}

static PyObject *handout_next(HandOut *self)
{
    for (;;) {
        int stale = lease_stale(self);
        if (stale < 0)
            return NULL;
        if (stale) {  /* the session may have expired (a pause): ask ZooKeeper first */
            PyObject *r = PyObject_CallMethodNoArgs((PyObject *)self, str_wait_lease);
            if (!r)
                return NULL;
            Py_DECREF(r);
        }
        self->inflight = 1;
        int ok = can_hand_out(self);
        PyObject *rec = ok > 0 ? hand_out(self) : NULL;
        self->inflight = 0;
        if (ok < 0 || (ok > 0 && !rec))
            return NULL;
        if (rec)
            return rec;
        PyObject *loaded = PyObject_CallMethodNoArgs((PyObject *)self, str_load_chunk);
        if (!loaded)
            return NULL;
        int more = PyObject_IsTrue(loaded);
        Py_DECREF(loaded);
        if (more <= 0)
            return NULL;  /* false: StopIteration (no error set) */
    }
}

static PyMemberDef handout_members[] = {
    {"_records", T_OBJECT, offsetof(HandOut, records), 0, "the records of the chunk being handed out"},
    {"_count", T_PYSSIZET, offsetof(HandOut, count), 0, "len(_records)"},
    {"_index", T_PYSSIZET, offsetof(HandOut, index), 0, "the next record to hand out"},
    {"_chunk_gen", T_OBJECT, offsetof(HandOut, chunk_gen), 0, "the generation of the chunk being handed out"},
    {"_generation", T_OBJECT, offsetof(HandOut, generation), 0, "the connector's Generation"},
    {"_part", T_OBJECT, offsetof(HandOut, part), 0, "the PartitionTopicInfo of the chunk being handed out"},
    {"_lease", T_OBJECT, offsetof(HandOut, lease), 0, "the session lease"},
    {"_clock", T_OBJECT, offsetof(HandOut, clock), 0, "the lease's clock"},
    {"_closing", T_BOOL, offsetof(HandOut, closing), 0, "close() was called"},
    {"_inflight", T_BOOL, offsetof(HandOut, inflight), 0, "a hand-out is under way (see KafkaStream.fence)"},
    {NULL}
};

static PyType_Slot handout_slots[] = {
    {Py_tp_doc, "The per-record hand-out of a KafkaStream (see zkconsumer/_stream.c)."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, handout_dealloc},
    {Py_tp_traverse, handout_traverse},
    {Py_tp_clear, handout_clear},
    {Py_tp_iter, PyObject_SelfIter},
    {Py_tp_iternext, handout_next},
    {Py_tp_members, handout_members},
    {0, NULL}
};

static PyType_Spec handout_spec = {
    "zkconsumer._stream.HandOut", sizeof(HandOut), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, handout_slots
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "zkconsumer._stream",
                                    "KafkaStream's per-record hand-out in C (see zkconsumer/consumer/stream.py).",
                                    -1, NULL};

PyMODINIT_FUNC PyInit__stream(void)
{
    if (!(str_value = PyUnicode_InternFromString("value")) ||
        !(str_deadline = PyUnicode_InternFromString("deadline")) ||
        !(str_consumed = PyUnicode_InternFromString("consumed")) ||
        !(str_offset = PyUnicode_InternFromString("offset")) ||
        !(str_load_chunk = PyUnicode_InternFromString("_load_chunk")) ||
        !(str_wait_lease = PyUnicode_InternFromString("_wait_lease")) ||
        !(str_fields = PyUnicode_InternFromString("_fields")) || !(one = PyLong_FromLong(1)))
        return NULL;
    PyObject *time_mod = PyImport_ImportModule("time");
    if (!time_mod)
        return NULL;
    monotonic = PyObject_GetAttrString(time_mod, "monotonic");
    Py_DECREF(time_mod);
    if (!monotonic)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    PyObject *tp = PyType_FromSpec(&handout_spec);
    if (!tp || PyModule_AddObject(m, "HandOut", tp) < 0) {
        Py_XDECREF(tp);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
