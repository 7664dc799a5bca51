// A Kafka 4 consumer with group.protocol=consumer (KIP-848: the broker computes the assignment, no JoinGroup or
// SyncGroup). Compiled by tests/interop/test_kip848.py against the kafka-clients jar of the "kafka4" jar set.
//
//   java ConsumerProtocolMember BOOTSTRAP GROUP TOPIC CLIENT_ID
//
// Prints "assigned <partitions>" on stdout after every assignment and polls until stdin is closed, then closes
// the consumer (which leaves the group).
import java.time.Duration;
import java.util.Collection;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ConsumerProtocolMember {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("client.id", args[3]);
        props.put("group.protocol", "consumer");
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        AtomicBoolean stop = new AtomicBoolean(false);
        Thread stdin = new Thread(() -> {
            try {
                while (System.in.read() >= 0) { }
            } catch (Exception e) { }
            stop.set(true);
        });
        stdin.setDaemon(true);
        stdin.start();
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(props)) {
            consumer.subscribe(List.of(args[2]), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> parts) { }
                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    System.out.println("assigned " + consumer.assignment());
                    System.out.flush();
                }
            });
            while (!stop.get()) {
                consumer.poll(Duration.ofMillis(200));
            }
        }
        System.out.println("closed");
    }
}
