// Steady-state throughput of Kafka 1.1.1's Scala consumer (kafka.javaapi.consumer.ZookeeperConsumerConnector), the
// JVM peer of the consume suite (bench/consume.py):
//
//   java -cp <kafka 1.1.1 libs>/*:<dir of this class> ScalaConsumerCount consumer.properties TOPIC N
//
// Joins the group in consumer.properties with one stream for TOPIC, reads N messages (touching each value once) and
// prints one JSON line: {"count", "ready_to_first_ms", "first_to_last_ms"} — ready = createMessageStreams returned
// (group joined, rebalanced), first/last = the first and the Nth message; JVM start-up is outside both.
import java.io.FileInputStream;
import java.util.*;

import kafka.consumer.ConsumerConfig;
import kafka.consumer.ConsumerIterator;
import kafka.consumer.KafkaStream;
import kafka.javaapi.consumer.ConsumerConnector;
import kafka.message.MessageAndMetadata;

public class ScalaConsumerCount {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        String topic = args[1];
        long n = Long.parseLong(args[2]);
        ConsumerConnector connector = kafka.consumer.Consumer.createJavaConsumerConnector(new ConsumerConfig(props));
        Map<String, Integer> counts = new HashMap<>();
        counts.put(topic, 1);
        KafkaStream<byte[], byte[]> stream = connector.createMessageStreams(counts).get(topic).get(0);
        long ready = System.nanoTime(), first = 0, last = 0, count = 0, bytes = 0;
        ConsumerIterator<byte[], byte[]> it = stream.iterator();
        while (count < n && it.hasNext()) {
            MessageAndMetadata<byte[], byte[]> m = it.next();
            byte[] value = m.message();
            bytes += value == null ? 0 : value.length;
            if (count == 0) first = System.nanoTime();
            count++;
        }
        last = System.nanoTime();
        System.out.println("{\"count\":" + count + ",\"bytes\":" + bytes + ",\"ready_to_first_ms\":"
                           + (first - ready) / 1e6 + ",\"first_to_last_ms\":" + (last - first) / 1e6 + "}");
        System.out.flush();
        connector.shutdown();
        System.exit(0);
    }
}
