/*
 * The kafka-python ConsumerRecords the librdkafka engine's two readers build, and the lists per partition they go to (zkconsumer/_rdkafka_records.c from a
 * confluent-kafka Message, zkconsumer/_rdkafka_direct.c from librdkafka's message): a tuple subtype of 13 fields,
 * (topic, partition, leader_epoch, offset, timestamp, timestamp_type, key, value, headers, checksum,
 *  serialized_key_size, serialized_value_size, serialized_header_size).
 */
#ifndef ZKCONSUMER_CONSUMER_RECORD_H
#define ZKCONSUMER_CONSUMER_RECORD_H
#include <Python.h>

/* A new record of *record_cls* (NULL on error), every argument borrowed; checksum None, timestamp_type 1 for a
 * log-append time else 0. A record holds str, bytes, ints, None and its own fresh headers list of (str, bytes)
 * tuples, so no cycle runs through it: the record and its headers list are untracked by the cyclic collector (as in
 * _records.c), which then need not walk the tens of thousands queued. */
static inline PyObject *new_consumer_record(PyTypeObject *record_cls, PyObject *topic, PyObject *partition,
                                            PyObject *leader_epoch, PyObject *offset, PyObject *timestamp,
                                            int log_append, PyObject *key, PyObject *value, PyObject *headers,
                                            PyObject *key_size, PyObject *value_size, PyObject *header_size)
{
    PyObject *rec = record_cls->tp_alloc(record_cls, 13);
    if (!rec)
        return NULL;
    PyTuple_SET_ITEM(rec, 0, Py_NewRef(topic));
    PyTuple_SET_ITEM(rec, 1, Py_NewRef(partition));
    PyTuple_SET_ITEM(rec, 2, Py_NewRef(leader_epoch));
    PyTuple_SET_ITEM(rec, 3, Py_NewRef(offset));
    PyTuple_SET_ITEM(rec, 4, Py_NewRef(timestamp));
    PyTuple_SET_ITEM(rec, 5, PyLong_FromLong(log_append != 0));  /* 0 and 1 are cached small ints: cannot fail */
    PyTuple_SET_ITEM(rec, 6, Py_NewRef(key));
    PyTuple_SET_ITEM(rec, 7, Py_NewRef(value));
    PyTuple_SET_ITEM(rec, 8, Py_NewRef(headers));
    PyTuple_SET_ITEM(rec, 9, Py_NewRef(Py_None));
    PyTuple_SET_ITEM(rec, 10, Py_NewRef(key_size));
    PyTuple_SET_ITEM(rec, 11, Py_NewRef(value_size));
    PyTuple_SET_ITEM(rec, 12, Py_NewRef(header_size));
    PyObject_GC_UnTrack(headers);
    PyObject_GC_UnTrack(rec);
    return rec;
}

/* The list of *out* ({tp_cls(topic, partition): [record, ...]}) for that partition, made empty on first use:
 * borrowed (kept alive by *out*), NULL on error. */
static inline PyObject *partition_bucket(PyObject *out, PyObject *tp_cls, PyObject *topic, PyObject *partition)
{
    PyObject *tp = PyObject_CallFunctionObjArgs(tp_cls, topic, partition, NULL);
    if (!tp)
        return NULL;
    PyObject *fresh = PyList_New(0);
    PyObject *bucket = fresh ? PyDict_SetDefault(out, tp, fresh) : NULL;
    Py_DECREF(tp);
    Py_XDECREF(fresh);
    return bucket;
}

#endif
