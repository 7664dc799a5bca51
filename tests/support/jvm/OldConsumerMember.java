// A member of a ZooKeeper-coordinated group run by Kafka 1.1.1's own Scala consumer
// (kafka.javaapi.consumer.ZookeeperConsumerConnector): the interoperability oracle of
// tests/interop/test_interop_jvm.py.
//
//   java -cp <kafka 1.1.1 libs>/*:<dir of this class> OldConsumerMember consumer.properties TAG SPEC STREAMS
//
// SPEC is "topic1,topic2" (static subscription, STREAMS streams per topic) or "whitelist:REGEX".
// Prints one JSON line per message on stdout ({"member","topic","partition","offset","value","t"}, t = ms since
// the process started, monotonic) and events on stderr ({"event":"started"} once the streams exist, "error",
// "shutdown"). SIGTERM shuts the connector
// down (it commits the consumed offsets and releases its owner nodes, as a graceful stop does in production).
import java.nio.charset.StandardCharsets;
import java.io.FileInputStream;
import java.util.*;
import java.util.concurrent.*;

import kafka.consumer.ConsumerConfig;
import kafka.consumer.ConsumerIterator;
import kafka.consumer.KafkaStream;
import kafka.consumer.Whitelist;
import kafka.javaapi.consumer.ConsumerConnector;
import kafka.message.MessageAndMetadata;

public class OldConsumerMember {
    static final long START = System.nanoTime();
    static final Object OUT = new Object();

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }

    static void emit(String line) {
        synchronized (OUT) {
            System.out.println(line);
            System.out.flush();
        }
    }

    static void event(String line) {  // events go to stderr, as zkconsumer consume --events prints them
        synchronized (OUT) {
            System.err.println(line);
            System.err.flush();
        }
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        final String tag = args[1];
        String spec = args[2];
        int streams = Integer.parseInt(args[3]);
        final ConsumerConnector connector =
            kafka.consumer.Consumer.createJavaConsumerConnector(new ConsumerConfig(props));
        List<KafkaStream<byte[], byte[]>> all = new ArrayList<>();
        if (spec.startsWith("whitelist:")) {
            all.addAll(connector.createMessageStreamsByFilter(new Whitelist(spec.substring(10)), streams));
        } else {
            Map<String, Integer> counts = new HashMap<>();
            for (String t : spec.split(",")) counts.put(t, streams);
            for (List<KafkaStream<byte[], byte[]>> l : connector.createMessageStreams(counts).values()) all.addAll(l);
        }
        final CountDownLatch done = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            connector.shutdown();  // commits (auto.commit.enable) and releases the owner nodes
            event("{\"event\":\"shutdown\",\"member\":" + quote(tag) + "}");
            done.countDown();
        }));
        ExecutorService pool = Executors.newFixedThreadPool(all.size());
        for (final KafkaStream<byte[], byte[]> stream : all) {
            pool.submit(() -> {
                ConsumerIterator<byte[], byte[]> it = stream.iterator();
                try {
                    while (it.hasNext()) {
                        MessageAndMetadata<byte[], byte[]> m = it.next();
                        String value = m.message() == null ? "" : new String(m.message(), StandardCharsets.UTF_8);
                        long t = (System.nanoTime() - START) / 1000000L;
                        emit("{\"member\":" + quote(tag) + ",\"topic\":" + quote(m.topic()) + ",\"partition\":"
                             + m.partition() + ",\"offset\":" + m.offset() + ",\"value\":" + quote(value)
                             + ",\"t\":" + t + "}");
                    }
                } catch (Throwable e) {
                    event("{\"event\":\"error\",\"member\":" + quote(tag) + ",\"error\":" + quote(e.toString()) + "}");
                }
            });
        }
        event("{\"event\":\"started\",\"member\":" + quote(tag) + "}");
        done.await();
    }
}
