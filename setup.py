"""Only the optional C extension lives here; everything else is declared in setup.cfg.

``zkconsumer._records`` is the record batch v2 decoder in C (zkconsumer/_records.c), and
``zkconsumer._rdkafka_records`` turns confluent-kafka's Messages into ConsumerRecords for the librdkafka fetch engine
(zkconsumer/_rdkafka_records.c), ``zkconsumer._rdkafka_direct`` reads that engine's fetched messages from librdkafka
itself (zkconsumer/_rdkafka_direct.c), and ``zkconsumer._stream`` is a stream's per-record hand-out
(zkconsumer/_stream.c). All are optional: without a C compiler the build goes on and zkconsumer uses their
pure-Python equivalents (zkconsumer/kafka/record_batch.py, zkconsumer/kafka/librdkafka.py).
"""
import sys

from setuptools import Extension, setup

# dlopen: in libc from glibc 2.34, in libdl before (and on other systems libdl exists for compatibility)
_DL = ["dl"] if sys.platform != "win32" else []

# the librdkafka engine's two readers build their records with zkconsumer/_consumer_record.h
_RECORD_H = ["zkconsumer/_consumer_record.h"]

setup(ext_modules=[Extension("zkconsumer." + name, ["zkconsumer/%s.c" % name], optional=True, extra_compile_args=["-O2"],
                             libraries=_DL if name == "_rdkafka_direct" else [],
                             depends=_RECORD_H if name.startswith("_rdkafka") else [])
                   for name in ("_records", "_rdkafka_records", "_rdkafka_direct", "_stream")])
