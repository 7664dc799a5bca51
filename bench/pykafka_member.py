"""One pykafka ``BalancedConsumer(managed=False)`` member as a process, for the churn suite (bench/churn.py):

    python -m bench.pykafka_member BOOTSTRAP ZOOKEEPER GROUP TOPIC

Defaults except auto commit off and the earliest offset; prints {"partition": p} on stdout for every message."""
import logging
import sys


def main(argv):
    bootstrap, zookeeper, group, topic = argv
    logging.basicConfig(level=logging.CRITICAL)
    from pykafka import KafkaClient
    client = KafkaClient(hosts=bootstrap, broker_version="1.0.0")
    consumer = client.topics[topic].get_balanced_consumer(
        consumer_group=group.encode(), managed=False, zookeeper_connect=zookeeper, auto_commit_enable=False,
        auto_offset_reset=-1)  # OffsetType.LATEST: the churn suite reads what is produced while it runs
    out = sys.stdout
    for m in consumer:
        out.write('{"partition":%d}\n' % m.partition_id)
        out.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
