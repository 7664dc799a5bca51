"""Operations on groups, for the command lines: they read groups (ZooKeeper and Kafka) and never join one.

:mod:`.groups` (list, owners, offsets, verify, delete), :mod:`.group_describe` (``groups describe``: one row per
partition), :mod:`.group_peek` (``consume --from-group``), :mod:`.lag_exporter` (``zkconsumer exporter``) and
:mod:`.registry_mirror` (the legacy ``/brokers`` layout kept in step with a cluster that does not write it). The
engine (:mod:`zkconsumer.consumer`) never imports them.
"""
