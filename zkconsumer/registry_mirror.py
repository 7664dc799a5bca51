"""Registry mirror: keep the legacy ``/brokers`` layout in ZooKeeper in step with a Kafka cluster's metadata.

Brokers that do not register in ZooKeeper (KRaft clusters, tansu) are invisible to ZooKeeper-coordinated
consumers, which read ``/brokers/ids`` and ``/brokers/topics`` (Kafka's ``ZkUtils``). The mirror reads the
cluster's metadata over the Kafka protocol and writes:

* ``/brokers/ids/[id]`` — ephemeral, version 4 JSON with one endpoint, owned by the mirror's session, so
  a dead mirror's registrations vanish like a dead broker's. The endpoint is the listener the mirror reads from,
  named by its security protocol (``PLAINTEXT://``, or ``SASL_SSL://`` etc. when the mirror connects with
  ``security.protocol`` set: consumers with the same setting then find it; a non-PLAINTEXT-only broker has
  ``host`` null and ``port`` -1, as Kafka writes it);
* ``/brokers/topics/[topic]`` — version 1 partition map, rewritten only when the map really changes (the
  consumers' data watch fires on every write, and each firing is a group rebalance: Kafka 1.1.1
  ``ZKTopicPartitionChangeListener.handleDataChange``);
* ``/brokers/topics/[topic]/partitions/[p]/state`` — leader, leader epoch and ISR, as a controller would.

Safety: a broker registration under ``/brokers/ids`` whose ephemeral owner is not this mirror's session was
written by someone else — normally a real ZooKeeper-mode Kafka broker registering itself. The mirror never
changes or deletes such a node and says so; if such a broker is one of the cluster's own brokers, the cluster
registers itself, and the mirror leaves the topic nodes alone as well.
"""
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import List

from kazoo.exceptions import NodeExistsError, NoNodeError, NotEmptyError

from .kafka_metadata import fetch_cluster_metadata
from .layout import codecs, paths

log = logging.getLogger(__name__)


@dataclass
class SyncReport:
    registered: List[int] = field(default_factory=list)
    updated: List[int] = field(default_factory=list)
    unregistered: List[int] = field(default_factory=list)
    refused: List[int] = field(default_factory=list)
    topics_created: List[str] = field(default_factory=list)
    topics_updated: List[str] = field(default_factory=list)
    topics_deleted: List[str] = field(default_factory=list)
    states_written: int = 0
    topics_skipped: bool = False

    def changed(self):
        return bool(self.registered or self.updated or self.unregistered or self.topics_created
                    or self.topics_updated or self.topics_deleted or self.states_written)

    def as_dict(self):
        return dict(self.__dict__)


class RegistryMirror:
    def __init__(self, zk, admin=None, controller_epoch=1, metadata_source=None, security_protocol="PLAINTEXT"):
        """metadata_source: a callable returning ClusterMetadata; default reads it from ``admin`` (Kafka).
        security_protocol: the protocol of the listener ``admin`` speaks to (the endpoints it reports)."""
        self.zk = zk
        self.security_protocol = security_protocol
        self.admin = admin
        self.metadata_source = metadata_source or (lambda: fetch_cluster_metadata(self.admin))
        self.controller_epoch = controller_epoch
        self._warned = set()

    # -- one pass ----------------------------------------------------------------------------------------------
    def sync_once(self) -> SyncReport:
        meta = self.metadata_source()
        report = SyncReport()
        self.zk.ensure_path(paths.broker_ids_path())
        self.zk.ensure_path(paths.broker_topics_path())
        self._sync_brokers(meta, report)
        if report.refused:
            report.topics_skipped = True
            self._warn_once("topics", "the cluster's brokers %s register themselves in ZooKeeper; the mirror leaves "
                                      "/brokers/topics to them" % sorted(report.refused))
        else:
            self._sync_topics(meta, report)
        if report.changed():
            log.info("registry sync: %s", {k: v for k, v in report.as_dict().items() if v})
        return report

    def _mine(self, stat):
        return stat.ephemeralOwner == self.zk.client_id[0]

    def _warn_once(self, key, msg):
        if key not in self._warned:
            self._warned.add(key)
            log.warning(msg)

    def _sync_brokers(self, meta, report):
        for broker_id, b in sorted(meta.brokers.items()):
            path = paths.broker_path(broker_id)
            proto, plain = self.security_protocol, self.security_protocol == "PLAINTEXT"
            data = codecs.encode_broker_registration(codecs.BrokerRegistration(
                broker_id=broker_id, host=b.host if plain else None, port=b.port if plain else -1,
                endpoints=["%s://%s:%d" % (proto, b.host, b.port)], rack=b.rack,
                listener_security_protocol_map={proto: proto},
                timestamp=str(int(time.time() * 1000)), version=4))
            try:
                current, stat = self.zk.get(path)
            except NoNodeError:
                try:
                    self.zk.create(path, data, ephemeral=True, makepath=True)
                    report.registered.append(broker_id)
                except NodeExistsError:
                    # raced with someone; judged on the next pass
                    pass
                continue
            if not self._mine(stat):
                report.refused.append(broker_id)
                self._warn_once(("broker", broker_id, stat.ephemeralOwner),
                                "refusing to touch %s: it was not written by this mirror (ephemeral owner "
                                "session 0x%x); a real broker registers itself there" % (path, stat.ephemeralOwner))
                continue
            if self._broker_differs(current, path, broker_id, b):
                self.zk.set(path, data, version=stat.version)
                report.updated.append(broker_id)
        for child in self.zk.get_children(paths.broker_ids_path()):
            if not child.isdigit() or int(child) in meta.brokers:
                continue
            path = paths.broker_path(int(child))
            try:
                _, stat = self.zk.get(path)
            except NoNodeError:
                continue
            if self._mine(stat):
                self.zk.delete(path, version=stat.version)
                report.unregistered.append(int(child))
            else:
                self._warn_once(("foreign", child, stat.ephemeralOwner),
                                "leaving %s alone: broker %s is not in the cluster's metadata and its registration "
                                "was not written by this mirror" % (path, child))

    def _broker_differs(self, current, path, broker_id, b):
        try:
            reg = codecs.decode_broker_registration(current, path)
        except Exception:
            return True
        return (reg.endpoint_for(self.security_protocol) != (b.host, b.port)) or (reg.rack != b.rack)

    def _sync_topics(self, meta, report):
        for topic, parts in sorted(meta.topics.items()):
            try:
                paths.topic_path(topic)
            except ValueError:
                self._warn_once(("topic", topic), "skipping topic %r: not a legal legacy topic name" % topic)
                continue
            want = {p: list(info.replicas) for p, info in parts.items()}
            self._sync_topic_assignment(topic, want, report)
            for p, info in sorted(parts.items()):
                self._sync_partition_state(topic, info, report)
        existing = self.zk.get_children(paths.broker_topics_path())
        for topic in existing:
            if topic in meta.topics or topic in meta.unavailable_topics:
                # a topic reporting an error (e.g. no leader yet) still exists: never churn its node
                continue
            try:
                path = paths.topic_path(topic)
            except ValueError:
                self._warn_once(("badtopic", topic), "leaving /brokers/topics/%r alone: not a legal topic name"
                                % topic)
                continue
            self.zk.delete(path, recursive=True)
            report.topics_deleted.append(topic)

    def _sync_topic_assignment(self, topic, want, report):
        path = paths.topic_path(topic)
        data = codecs.encode_topic_assignment(codecs.TopicAssignment(version=1, partitions=want))
        try:
            current, stat = self.zk.get(path)
        except NoNodeError:
            try:
                self.zk.create(path, data, makepath=True)
                report.topics_created.append(topic)
            except NodeExistsError:
                pass
            return
        try:
            have = codecs.decode_topic_assignment(current, path).partitions
        except Exception:
            have = None
        if have != want:
            self.zk.set(path, data, version=stat.version)
            report.topics_updated.append(topic)

    def _sync_partition_state(self, topic, info, report):
        path = paths.partition_state_path(topic, info.partition)
        state = codecs.PartitionState(leader=info.leader, leader_epoch=info.leader_epoch, isr=list(info.isr),
                                      controller_epoch=self.controller_epoch, version=1)
        data = codecs.encode_partition_state(state)
        try:
            current, stat = self.zk.get(path)
        except NoNodeError:
            try:
                self.zk.create(path, data, makepath=True)
                report.states_written += 1
            except NodeExistsError:
                pass
            return
        try:
            have = codecs.decode_partition_state(current, path)
            same = (have.leader, have.leader_epoch, list(have.isr)) == (info.leader, info.leader_epoch,
                                                                       list(info.isr))
        except Exception:
            same = False
        if not same:
            self.zk.set(path, data, version=stat.version)
            report.states_written += 1

    # -- loop --------------------------------------------------------------------------------------------------
    def run(self, interval, stop_event: threading.Event):
        """Sync every ``interval`` seconds until stop_event is set; errors are logged and retried."""
        failures = 0
        while not stop_event.is_set():
            try:
                self.sync_once()
                if failures:
                    log.info("registry sync recovered after %d failed passes", failures)
                failures = 0
            except (NotEmptyError, NoNodeError, NodeExistsError) as e:
                log.info("registry sync raced with another writer (%s); retrying", e)
            except Exception as e:
                # keep mirroring through broker or ZooKeeper outages
                failures += 1
                log.warning("registry sync failed (%d in a row): %s", failures, e)
            stop_event.wait(interval if not failures else min(5.0, interval * (1 + failures)))
