"""Offsets in Kafka's offset manager (``__consumer_offsets``) without joining a broker-side group.

What the Scala consumer did, in Kafka 1.1.1 ``ZookeeperConsumerConnector``: ``commitOffsets`` sends one
OffsetCommit for all owned partitions, re-finds the coordinator after NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE,
does not retry OFFSET_METADATA_TOO_LARGE and makes up to 1 + ``offsets.commit.max.retries`` attempts,
``offsets.channel.backoff.ms`` apart; ``fetchOffsets`` sends OffsetFetch and retries after NOT_COORDINATOR and
COORDINATOR_LOAD_IN_PROGRESS; ``ClientUtils.channelToOffsetManager`` finds the coordinator. It sent OffsetCommit v2
and OffsetFetch v2 (``OffsetCommitRequest.CurrentVersion``, ``OffsetFetchRequest.CurrentVersion``).

Layer chosen (kafka-python 3.0.12): one :class:`kafka.admin.KafkaAdminClient` per store, used only as a connection
manager with its own IO thread.  We send FindCoordinator (v<=3), OffsetCommit (v<=5, ``generation_id=-1``,
``member_id=""``: a "simple consumer" commit, no JoinGroup ever) and OffsetFetch (v<=7) ourselves through
:mod:`zkconsumer.kafka.internals` (kafka-python's connection manager) because the public ``list_group_offsets``
raises on the first partition error and neither public call lets us re-find the coordinator after NOT_COORDINATOR.
The coordinator gets its own connection (``cluster.add_coordinator``), kept across calls.  ``KafkaConsumer.commit``
is not used: it raises for the whole batch instead of reporting per-partition errors.

Observed tansu behaviour (the test broker): OffsetCommit for an unknown topic -> UNKNOWN_TOPIC_OR_PARTITION for
that partition (the others commit); for a non-existent partition of an existing topic -> NONE (stored);
OffsetFetch of a partition without an offset -> offset -1, error NONE; commit metadata is dropped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from typing import Callable, Dict, Optional, Set, Tuple

import kafka.errors as Errors
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from zkconsumer.kafka import internals
from zkconsumer.kafka.internals import AdminClient as _AdminClient
from zkconsumer.errors import OffsetManagerUnavailableError, OffsetStoreError
from zkconsumer.core.layout import validate_group
from zkconsumer.offsets.base import (CommitOrder, CommitResult, CommitTicket, OffsetStore, normalize_offsets,
                                     normalize_partitions)
from zkconsumer.kafka.protocol.offset_commit import OffsetCommitResult, make_request as make_commit_request

__all__ = ["KafkaOffsetStore"]

log = logging.getLogger(__name__)


class _AllCommitted:
    """An OffsetCommit answer naming exactly the partitions sent, every one with error NONE."""

    __slots__ = ()


ALL_COMMITTED = _AllCommitted()
# the one "partition" of fetch_all's request: all of the group's
_ALL = ("*", -1)

_REFIND = (Errors.NotCoordinatorError, Errors.CoordinatorNotAvailableError)
_WAIT = (Errors.CoordinatorLoadInProgressError,)
# Not worth retrying although kafka-python marks some of them retriable (reported per partition at once).
_PERMANENT = (Errors.UnknownTopicOrPartitionError, Errors.OffsetMetadataTooLargeError)


class _Superseded(Exception):
    """A retry left out: the broker acknowledged a commit with a newer sequence for the partition meanwhile
    (reported in ``CommitResult.superseded``, not as a failure)."""


class KafkaOffsetStore(OffsetStore):
    """The group's offsets in Kafka's offset manager (``offsets.storage=kafka``).

    :param bootstrap_servers: ``host:port[,host:port]`` (or a list).
    :param group: the group id (checked: :class:`~zkconsumer.errors.InvalidNameError` when it is not a legal name).
    :param config: a :class:`~zkconsumer.core.config.ConsumerConfig` for ``offsets.channel.backoff.ms``,
        ``offsets.channel.socket.timeout.ms``, ``offsets.commit.max.retries`` and ``client.id`` (defaults 1000,
        10000, 5 and the group when None).
    :param zk: optional kazoo client, only used to pre-check an :class:`~zkconsumer.offsets.OwnershipFence`.
    :param security: a :class:`~zkconsumer.core.kafka_security.KafkaSecurity`; default: the config's (PLAINTEXT without
        a config).

    Nothing touches the network before the first ``fetch``/``commit``; the connection is then kept until
    :meth:`close`.  A broker that cannot be reached within ``offsets.channel.socket.timeout.ms`` raises
    :class:`OffsetStoreError` (the next call tries again).
    """

    name = "kafka"

    def __init__(self, bootstrap_servers, group: str, config=None, zk=None, security=None):
        from zkconsumer.core import kafka_security
        self.group = validate_group(group)
        self.security = security if security is not None else kafka_security.of(config)
        self.bootstrap_servers = bootstrap_servers
        if config is not None:
            self.backoff_ms = config.offsets_channel_backoff_ms
            self.socket_timeout_ms = config.offsets_channel_socket_timeout_ms
            self.max_retries = config.offsets_commit_max_retries
            self.client_id = config.client_id or self.group
        else:
            self.backoff_ms, self.socket_timeout_ms, self.max_retries, self.client_id = 1000, 10000, 5, self.group
        self.zk = zk
        self._admin: Optional[_AdminClient] = None
        # coordinator node id (synthesized "coordinator-N": a dedicated connection)
        self._node = None
        self._lock = threading.RLock()
        self._closed = False
        # per partition, the newest commit admitted (under _lock)
        self._order = CommitOrder()

    # ---- connection -------------------------------------------------------------------------------------------

    def _client(self) -> _AdminClient:
        if self._closed:
            raise OffsetStoreError("Kafka offset store for group %s is closed" % self.group)
        if self._admin is None:
            try:
                self._admin = _AdminClient(
                    bootstrap_servers=self.bootstrap_servers, client_id=self.client_id,
                    request_timeout_ms=self.socket_timeout_ms, bootstrap_timeout_ms=self.socket_timeout_ms,
                    reconnect_backoff_ms=50, reconnect_backoff_max_ms=max(50, self.backoff_ms),
                    **self.security.client_kwargs())
            except Exception as e:
                from zkconsumer.kafka.connect_errors import connect_error_text
                raise OffsetManagerUnavailableError(connect_error_text(
                    "reach Kafka within %d ms (offsets.channel.socket.timeout.ms) for the offsets of group %s"
                    % (self.socket_timeout_ms, self.group), self.bootstrap_servers, self.security, e)) from e
        return self._admin

    def _servers_text(self):
        bs = self.bootstrap_servers
        return bs if isinstance(bs, str) else ",".join(bs)

    def _coordinator(self):
        """The coordinator's node id: cached, else FindCoordinator (as Kafka 1.1.1
        ``ClientUtils.channelToOffsetManager`` asks); raises the broker's error class."""
        if self._node is None:
            admin = self._client()
            self._node = internals.run(admin, self._async_find_coordinator, admin)
        return self._node

    def wait_for_coordinator(self, timeout_s: float, clock=time.monotonic, sleep=time.sleep):
        """Wait until the group has a coordinator; returns its node id. COORDINATOR_NOT_AVAILABLE is what a broker
        answers while it creates ``__consumer_offsets`` (the first group of a new cluster) or moves a coordinator:
        it is retried until *timeout_s* has passed, then raised as :class:`OffsetStoreError`."""
        deadline = clock() + timeout_s
        while True:
            try:
                with self._lock:
                    return self._coordinator()
            except (Errors.KafkaError, OffsetStoreError) as e:
                self._drop_coordinator()
                if clock() >= deadline:
                    raise OffsetManagerUnavailableError("group %s has no coordinator at %s after %.0f s: %r"
                                           % (self.group, self._servers_text(), timeout_s, e)) from e
            sleep(min(0.25, max(0.0, deadline - clock())))

    async def _async_find_coordinator(self, admin):
        resp = await internals.send(admin, FindCoordinatorRequest(key=self.group, key_type=0, max_version=3))
        # raises the error class (e.g. COORDINATOR_NOT_AVAILABLE) on a non-zero error_code
        return internals.add_group_coordinator(admin, resp, self.group)

    def _drop_coordinator(self):
        if self._node is not None and self._admin is not None:
            try:
                # what Kafka 1.1.1's offsetsChannel.disconnect() does: the next call finds the coordinator again
                internals.close_connection(self._admin, self._node)
            except Exception:
                pass
        self._node = None

    def _attempts(self, fn, pending: Dict, what: str, refence=None, first=None, uncertain: Optional[Set] = None,
                  done: Optional[Dict] = None):
        """Run ``fn(node, pending) -> {tp: (error_class, value)}`` (or ``ALL_COMMITTED``) with the retry budget of
        Kafka 1.1.1 ``ZookeeperConsumerConnector.commitOffsets`` (1 + ``offsets.commit.max.retries`` attempts,
        ``offsets.channel.backoff.ms`` apart), re-finding the coordinator after NOT_COORDINATOR /
        COORDINATOR_NOT_AVAILABLE and waiting out COORDINATOR_LOAD_IN_PROGRESS.
        Returns ``(done {tp: value}, failed {tp: exception}, exhausted)`` (a commit's values are not meant to be
        read: None, or the offsets sent), *exhausted* being the partitions that still had a retriable error when
        the budget ran out. Transport failures stop retrying once ``offsets.channel.socket.timeout.ms`` has passed;
        if the broker never answered, raises :class:`OffsetStoreError`. *first*, when given, is ``(node, wait)``:
        the first attempt already sent to *node*, ``wait()`` returning its outcome (:meth:`begin_commit`).
        ``refence(pending) -> ({tp: exception}, {tp: value})``, before each retry: partitions not sent any more,
        and new values for others. *uncertain*, when given, gets the partitions of every request that may have
        been sent and got no answer (the broker may have applied it). *done*, when given, is filled in place (the
        returned one): what was acknowledged stays known to the caller when an exception escapes a later attempt."""
        done = {} if done is None else done
        failed: Dict = {}
        last: Dict = {}
        answered, last_exc = False, None
        start = time.monotonic()
        for attempt in range(1 + self.max_retries):
            if attempt:
                time.sleep(self.backoff_ms / 1000.0)
                if refence is not None:
                    refused, values = refence(pending)
                    failed.update(refused)
                    pending = {k: values.get(k, v) for k, v in pending.items() if k not in refused}
                    if not pending:
                        break
            sending = False
            try:
                if attempt == 0 and first is not None:
                    node, wait = first
                    answered = sending = True
                    errs = wait()
                else:
                    node = self._coordinator()
                    answered = True
                    client = self._client()
                    sending = True
                    errs = internals.run(client, fn, node, pending)
            except BaseException as e:
                if sending and uncertain is not None:
                    uncertain.update(pending)
                if not isinstance(e, Errors.KafkaError):
                    # OffsetStoreError: bootstrap failed (unreachable)
                    raise
                last_exc = e
                log.warning("offset %s for group %s failed (attempt %d): %r", what, self.group, attempt + 1, e)
                if isinstance(e, _REFIND + _WAIT):
                    answered = True
                self._drop_coordinator()
                if not answered and (time.monotonic() - start) * 1000 >= self.socket_timeout_ms:
                    break
                continue
            # every partition sent answered NONE (the usual commit)
            if errs is ALL_COMMITTED:
                done.update(pending)
                pending = {}
                break
            retry = {}
            for tp in pending:
                err, value = errs.get(tp, (OffsetStoreError, None))
                if err is Errors.NoError:
                    done[tp] = value
                elif isinstance(err, type) and issubclass(err, _REFIND):
                    self._drop_coordinator()
                    retry[tp], last[tp] = pending[tp], err
                elif isinstance(err, type) and (issubclass(err, _WAIT) or (
                        issubclass(err, Errors.KafkaError)
                        and err.retriable  # type: ignore[attr-defined]  # kafka-python is untyped: a KafkaError class
                        and not issubclass(err, _PERMANENT))):
                    retry[tp], last[tp] = pending[tp], err
                else:
                    failed[tp] = self._error(err, tp, what)
            pending = retry
            if not pending:
                break
            log.info("retrying offset %s for %d partition(s) of group %s in %d ms", what, len(pending), self.group,
                     self.backoff_ms)
        if pending and not answered and last_exc is not None:
            raise OffsetManagerUnavailableError("Kafka offset manager for group %s at %s unreachable: %r"
                                   % (self.group, self._servers_text(), last_exc)) from last_exc
        exhausted = set(pending)
        for tp in pending:
            err = last.get(tp)
            failed[tp] = (self._error(err, tp, what) if err is not None else OffsetStoreError(
                "offset %s for %s-%d failed after %d attempt(s): %r" % (what, tp[0], tp[1], 1 + self.max_retries,
                                                                        last_exc)))
        return done, failed, exhausted

    def _error(self, err, tp, what):
        if isinstance(err, type) and issubclass(err, Errors.KafkaError):
            return OffsetStoreError("offset %s for %s-%d of group %s: %s (error %s)"
                                    % (what, tp[0], tp[1], self.group, err.__name__, getattr(err, "errno", "?")))
        return OffsetStoreError("offset %s for %s-%d of group %s: no answer for this partition"
                                % (what, tp[0], tp[1], self.group))

    # ---- commit -----------------------------------------------------------------------------------------------

    def commit(self, offsets, fence=None, *, sequence: Optional[int] = None) -> CommitResult:
        """OffsetCommit of all *offsets* in one request, empty metadata: every value is sent, changed or not (as
        Kafka 1.1.1 ``ZookeeperConsumerConnector.commitOffsets`` does; only its ZooKeeper writes skip unchanged
        values).

        :param offsets: ``{(topic, partition): next offset to consume}`` (``TopicPartition`` keys too).
        :param fence: an :class:`~.base.OwnershipFence`; with a ``zk`` client, partitions it refuses are not sent,
            and every retry is fenced again.
        :param sequence: the commit's number (:class:`~.base.CommitOrder`), checked at the first attempt and at
            every retry: a partition for which the broker acknowledged an OffsetCommit with a higher one is left
            out (``superseded``); one for which such a request is in flight, or got no answer, is sent with that
            request's offset. A request that was not sent, or that the broker answered with an error, does not
            count.
        :returns: a :class:`CommitResult`; per-partition errors (the broker's, a fence's refusal) are in its
            ``failed``, never raised; partitions a newer acknowledged commit covers in ``superseded``.
        :raises OffsetManagerUnavailableError: no broker or coordinator answered (the next call tries again).
        :raises OffsetStoreError: the store is closed.
        :raises ValueError: an offset is not an integer from 0 to 2^63-1.
        """
        offsets = normalize_offsets(offsets)
        result = CommitResult()
        with self._lock:
            if fence is not None and self.zk is not None:
                for tp, exc in fence.precheck(self.zk, list(offsets)).items():
                    result.fail(tp, exc)
                    offsets.pop(tp)
            ticket = self._order.begin(offsets, sequence)
            result.superseded |= ticket.superseded
            return self._send(ticket, fence, result)

    def _send(self, ticket: CommitTicket, fence, result: CommitResult, first=None,
              uncertain: Optional[Set] = None) -> CommitResult:
        """The attempts of *ticket*'s OffsetCommit (under the store's lock), settled in the commit order whatever
        happens; *first* and *uncertain* as for :meth:`_attempts`."""
        uncertain = set() if uncertain is None else uncertain
        done: Dict = {}
        try:
            if ticket.write:
                _, failed, _ = self._attempts(self._async_commit, dict(ticket.write), "commit",
                                              self._refence(fence, ticket), first=first, uncertain=uncertain,
                                              done=done)
                self._commit_result(ticket.write, done, failed, result)
        finally:
            self._order.settle(ticket, {tp: ticket.write[tp] for tp in done}, uncertain)
        return result

    def _refence(self, fence, ticket: CommitTicket):
        """``refence(pending) -> ({tp: exception}, {tp: offset})`` for the retries of a commit: partitions for which
        a commit with a newer sequence was acknowledged meanwhile are left out, and one admitted meanwhile, not yet
        acknowledged, gives its offset (:meth:`CommitOrder.replan`); with a fence, every retry is fenced again,
        every owner node read again, as ownership may have moved while the commit waited (a late retry must not
        overwrite a successor's offset with an older one). Called under the store's lock."""
        fenced = fence is not None and self.zk is not None

        def refence(pending: Dict) -> Tuple[Dict, Dict]:
            values, superseded = self._order.replan(ticket, pending)
            refused: Dict = {tp: _Superseded() for tp in superseded}
            rest = [tp for tp in pending if tp not in refused]
            if fenced and rest:
                refused.update(fence.precheck(self.zk, rest, fresh=True))
            return refused, values
        return refence

    def begin_commit(self, offsets, fence=None, *, sequence: Optional[int] = None) -> Callable[[], CommitResult]:
        """Send the OffsetCommit of *offsets* now and return a function that waits for its answer (and does what
        :meth:`commit` does after the first attempt: retries, errors) and returns the :class:`CommitResult`.

        The dual store calls it as soon as ZooKeeper's multi-op is handed to kazoo, and waits for both answers;
        the request leaves from the calling thread's hand-off to the client's IO thread, not from another thread
        of ours, which would wait up to the interpreter's switch interval (5 ms) for the interpreter lock. The
        first attempt is not fenced here (the dual store checks the *fence* just before); every retry is. The
        *sequence* is checked, and the request handed off, under the store's lock, as :meth:`commit` sends; the
        request counts as in flight (:class:`~.base.CommitOrder`) until the returned function has its answer. The
        returned function raises like :meth:`commit`. When the coordinator cannot be found now, kafka-python
        runs no IO thread, the store's lock is busy (another call's requests: a commit retrying, say) or a newer
        commit was admitted for one of the partitions, it is :meth:`commit` itself (with the fence and the
        sequence), run when called.
        """
        offsets = normalize_offsets(offsets)
        if not offsets:
            return lambda: CommitResult()
        if not self._lock.acquire(blocking=False):
            return lambda: self.commit(offsets, fence=fence, sequence=sequence)
        ticket = None
        try:
            ticket = self._order.begin(offsets, sequence)
            if ticket.write != offsets:
                # the ordinary path decides again when called
                raise LookupError("a newer commit was admitted")
            admin = self._client()
            node = self._coordinator()
            # our own copy: nobody changes it
            future = internals.submit(admin, self._async_commit, node, dict(ticket.write))
            if future is None:
                raise LookupError("kafka-python runs no IO thread here")
        except Exception:
            if ticket is not None:
                # nothing was sent
                self._order.settle(ticket, {})
            # the ordinary path, in the caller's time
            return lambda: self.commit(offsets, fence=fence, sequence=sequence)
        finally:
            self._lock.release()
        answered = threading.Event()
        future.add_both(lambda _: answered.set())

        def wait():
            # kafka-python fails the request after request_timeout_ms; the margin covers an IO thread that died
            if not answered.wait(self.socket_timeout_ms / 1000.0 + 5.0):
                raise Errors.KafkaTimeoutError("no answer to the OffsetCommit of group %s within %d ms"
                                               % (self.group, self.socket_timeout_ms + 5000))
            if future.exception is not None:
                raise future.exception
            return future.value

        def finish() -> CommitResult:
            with self._lock:
                return self._send(ticket, fence, CommitResult(), first=(node, wait))
        return finish

    @staticmethod
    def _commit_result(offsets, done, failed, result: CommitResult) -> CommitResult:
        if len(done) == len(offsets):
            result.committed.update(offsets)
        else:
            for tp in done:
                result.committed[tp] = offsets[tp]
        for tp, exc in failed.items():
            if isinstance(exc, _Superseded):
                result.supersede(tp)
            else:
                result.fail(tp, exc)
        return result

    async def _async_commit(self, node, offsets):
        # v5 at most (zkconsumer.kafka.protocol.offset_commit): what a simple-consumer commit needs, its partitions
        # encoded in one pass; v8's flexible encoding cost 1.6x the time for fields we never set
        request = make_commit_request(self.group, offsets)
        response = await internals.send(self._admin, request, node_id=node)
        # v2-v5, read with struct
        if isinstance(response, OffsetCommitResult):
            if response.acknowledges(request.offsets_by_topic):
                return ALL_COMMITTED
            return {tp: (Errors.for_code(code), None) for tp, code in response.error_codes.items()}
        return {(topic.name, part.partition_index): (Errors.for_code(part.error_code), None)
                for topic in response.topics for part in topic.partitions}

    # ---- fetch ------------------------------------------------------------------------------------------------

    def fetch(self, partitions) -> Dict:
        """OffsetFetch of *partitions*.

        Unlike Kafka 1.1.1 ``ZookeeperConsumerConnector.fetchOffsets`` (which retries forever while holding the
        rebalance lock) this retries coordinator errors within the ``offsets.commit.max.retries`` budget and then
        raises. Any other error is raised too, naming the partition and the broker's error:
        GROUP_AUTHORIZATION_FAILED, TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION, or a partition missing
        from the answer. Scala read those as "no offset", so a Kafka-storage member reset, a dual member fell back
        to a stale ZooKeeper offset and a rollback left partitions out, all silently.

        :param partitions: ``(topic, partition)`` pairs (``TopicPartition`` too).
        :returns: ``{(topic, partition): next offset to consume}``; a partition without an offset (-1) is absent.
        :raises OffsetManagerUnavailableError: no broker or coordinator answered.
        :raises OffsetStoreError: the broker refused a partition (the message names it and the error), or the
            store is closed.
        """
        offsets, failed, exhausted = self._fetch(partitions)
        if failed:
            tps = sorted(failed)
            raise OffsetStoreError("cannot fetch offsets of group %s from Kafka for %d partition(s)%s: %s"
                                   % (self.group, len(tps), " (after retrying)" if exhausted else "",
                                      "; ".join(str(failed[tp]) for tp in tps[:5])
                                      + ("; ..." if len(tps) > 5 else "")))
        return offsets

    def fetch_detailed(self, partitions) -> Tuple[Dict, Dict]:
        """:meth:`fetch` that does not raise for errors of single partitions: ``({(t, p): next_offset},
        {(t, p): OffsetStoreError})``, the second naming each partition the broker refused to answer for (e.g.
        TOPIC_AUTHORIZATION_FAILED for a topic this client may not Describe). An unreachable broker still raises."""
        offsets, failed, _ = self._fetch(partitions)
        return offsets, failed

    def _fetch(self, partitions):
        parts = {tp: None for tp in normalize_partitions(partitions)}
        if not parts:
            return {}, {}, set()
        with self._lock:
            done, failed, exhausted = self._attempts(self._async_fetch, parts, "fetch")
        return {tp: off for tp, off in done.items() if off is not None and off >= 0}, failed, exhausted

    def fetch_all(self) -> Dict:
        """OffsetFetch of all the group's topics (``topics`` null, v2+): ``{(t, p): next_offset}`` of every partition
        the group has an offset of, on the topics this client may Describe (the broker leaves the others out,
        silently: Kafka's ``KafkaApis.handleOffsetFetchRequest``). What the group has in Kafka, without asking about
        every topic of the cluster; raises :class:`OffsetStoreError` like :meth:`fetch`."""
        with self._lock:
            done, failed, _ = self._attempts(self._async_fetch_all, {_ALL: None}, "fetch")
        if failed:
            raise OffsetStoreError("cannot list the offsets of group %s in Kafka: %s" % (self.group, failed[_ALL]))
        return done.get(_ALL) or {}

    async def _async_fetch_all(self, node, parts):
        request = OffsetFetchRequest(group_id=self.group, max_version=7, topics=None)
        response = await internals.send(self._admin, request, node_id=node)
        group_error = Errors.for_code(getattr(response, "error_code", 0) or 0)
        if group_error is not Errors.NoError:
            return {_ALL: (group_error, None)}
        for topic in response.topics:
            for part in topic.partitions:
                err = Errors.for_code(part.error_code)
                if err is not Errors.NoError:
                    return {_ALL: (err, None)}
        return {_ALL: (Errors.NoError, {(topic.name, part.partition_index): part.committed_offset
                                        for topic in response.topics for part in topic.partitions
                                        if part.committed_offset is not None and part.committed_offset >= 0})}

    async def _async_fetch(self, node, parts):
        _Topic = OffsetFetchRequest.OffsetFetchRequestTopic
        by_topic = defaultdict(list)
        for t, p in sorted(parts):
            by_topic[t].append(p)
        request = OffsetFetchRequest(group_id=self.group, max_version=7,
                                     topics=[_Topic(name=t, partition_indexes=ps) for t, ps in by_topic.items()])
        response = await internals.send(self._admin, request, node_id=node)
        group_error = Errors.for_code(getattr(response, "error_code", 0) or 0)
        if group_error is not Errors.NoError:
            return {tp: (group_error, None) for tp in parts}
        return {(topic.name, part.partition_index): (Errors.for_code(part.error_code), part.committed_offset)
                for topic in response.topics for part in topic.partitions}

    # ---- delete -----------------------------------------------------------------------------------------------

    def delete_offsets(self, partitions) -> CommitResult:
        """OffsetDelete (KIP-496, Kafka 2.4+) of *partitions*, as ``kafka-consumer-groups --delete-offsets`` does:
        ``committed`` lists the partitions whose offset is gone (value -1; one that had none counts as deleted),
        ``failed`` the others with the broker's error (e.g. GROUP_SUBSCRIBED_TO_TOPIC while a broker-coordinated
        group consumes the topic, NON_EMPTY_GROUP). A group the coordinator does not know (GROUP_ID_NOT_FOUND) and a
        topic that no longer exists (UNKNOWN_TOPIC_OR_PARTITION) have nothing to delete. Coordinator errors are
        retried as for :meth:`fetch`; an unreachable broker raises :class:`OffsetManagerUnavailableError`."""
        parts = {tp: None for tp in normalize_partitions(partitions)}
        result = CommitResult()
        if not parts:
            return result
        with self._lock:
            done, failed, _ = self._attempts(self._async_delete, parts, "delete")
        for tp in done:
            result.committed[tp] = -1
        for tp, exc in failed.items():
            result.fail(tp, exc)
        return result

    async def _async_delete(self, node, parts):
        from kafka.protocol.consumer import OffsetDeleteRequest
        _Topic = OffsetDeleteRequest.OffsetDeleteRequestTopic
        by_topic = defaultdict(list)
        for t, p in sorted(parts):
            by_topic[t].append(_Topic.OffsetDeleteRequestPartition(partition_index=p))
        request = OffsetDeleteRequest(group_id=self.group, topics=[_Topic(name=t, partitions=ps)
                                                                   for t, ps in by_topic.items()])
        response = await internals.send(self._admin, request, node_id=node)
        top = Errors.for_code(response.error_code)
        if top is Errors.GroupIdNotFoundError:
            return {tp: (Errors.NoError, None) for tp in parts}
        if top is not Errors.NoError:
            return {tp: (top, None) for tp in parts}
        # a deleted topic's offsets went with it
        gone = (Errors.NoError, Errors.UnknownTopicOrPartitionError)
        return {(topic.name, part.partition_index): (
            Errors.NoError if Errors.for_code(part.error_code) in gone else Errors.for_code(part.error_code), None)
            for topic in response.topics for part in topic.partitions}

    def close(self) -> None:
        """Close the connection (idempotent); later calls raise :class:`OffsetStoreError`."""
        with self._lock:
            self._closed = True
            admin, self._admin, self._node = self._admin, None, None
        if admin is not None:
            try:
                admin.close()
            except Exception as e:
                log.debug("closing Kafka admin client: %r", e)
