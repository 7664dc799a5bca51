// Steady-state throughput of Kafka 1.1.1's Scala consumer (kafka.javaapi.consumer.ZookeeperConsumerConnector), the
// JVM peer of the consume suite (bench/consume.py), in one long-lived JVM so that its JIT is warm:
//
//   java -cp <kafka 1.1.1 libs>/*:<dir of this class> ScalaConsumerCount
//
// Reads one command per line on stdin, "run consumer.properties TOPIC N PARTITIONS": joins the group named in the
// properties file with one stream for TOPIC, reads N messages from offset 0, touching each value once, shuts the
// connector down and prints one JSON line: {"count", "bytes", "ready_to_first_ms", "first_to_last_ms", "bad",
// "last": [the last offset read of each partition]}. ready = createMessageStreams returned (group joined,
// rebalanced); first/last = the first and the Nth message (the timed window); a read that waits longer than the
// properties' consumer.timeout.ms for a message ends short. "bad" counts records whose offset
// was not the one after the previous record of their partition (a duplicate, a gap or a reordering). The bench's
// first command is a warm-up whose figures it discards. "quit" exits.
import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.InputStreamReader;
import java.util.*;

import kafka.consumer.ConsumerConfig;
import kafka.consumer.ConsumerIterator;
import kafka.consumer.ConsumerTimeoutException;
import kafka.consumer.KafkaStream;
import kafka.javaapi.consumer.ConsumerConnector;
import kafka.message.MessageAndMetadata;

public class ScalaConsumerCount {
    public static void main(String[] args) throws Exception {
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = stdin.readLine()) != null) {
            String[] cmd = line.trim().split(" ");
            if (cmd[0].equals("quit")) break;
            if (!cmd[0].equals("run") || cmd.length != 5) {
                System.out.println("{\"error\":\"expected: run PROPS TOPIC N PARTITIONS\"}");
                continue;
            }
            Properties props = new Properties();
            try (FileInputStream in = new FileInputStream(cmd[1])) {
                props.load(in);
            }
            System.out.println(read(props, cmd[2], Long.parseLong(cmd[3]), Integer.parseInt(cmd[4])));
            System.out.flush();
        }
        System.exit(0);
    }

    static String read(Properties props, String topic, long n, int partitions) {
        ConsumerConnector connector = kafka.consumer.Consumer.createJavaConsumerConnector(new ConsumerConfig(props));
        try {
            Map<String, Integer> counts = new HashMap<>();
            counts.put(topic, 1);
            KafkaStream<byte[], byte[]> stream = connector.createMessageStreams(counts).get(topic).get(0);
            long[] next = new long[partitions];
            long ready = System.nanoTime(), first = 0, count = 0, bytes = 0, bad = 0;
            ConsumerIterator<byte[], byte[]> it = stream.iterator();
            while (count < n && hasNext(it)) {
                MessageAndMetadata<byte[], byte[]> m = it.next();
                byte[] value = m.message();
                bytes += value == null ? 0 : value.length;
                int p = m.partition();
                if (m.offset() != next[p]) bad++;
                next[p] = m.offset() + 1;
                if (count == 0) first = System.nanoTime();
                count++;
            }
            long last = System.nanoTime();
            StringBuilder lastOffsets = new StringBuilder();
            for (int p = 0; p < partitions; p++) lastOffsets.append(p == 0 ? "" : ",").append(next[p] - 1);
            return "{\"count\":" + count + ",\"bytes\":" + bytes + ",\"bad\":" + bad + ",\"ready_to_first_ms\":"
                + (first - ready) / 1e6 + ",\"first_to_last_ms\":" + (last - first) / 1e6 + ",\"last\":["
                + lastOffsets + "]}";
        } finally {
            connector.shutdown();
        }
    }

    // false once consumer.timeout.ms passes without a message: the read ends short and the bench's check says so
    // (the exception would otherwise end this JVM, and every later read it was to answer)
    static boolean hasNext(ConsumerIterator<byte[], byte[]> it) {
        try {
            return it.hasNext();
        } catch (ConsumerTimeoutException e) {
            return false;
        }
    }
}
