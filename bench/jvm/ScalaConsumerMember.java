// One member of a ZooKeeper-coordinated group run by Kafka 1.1.1's Scala consumer, driven over stdin by the
// rebalance and churn suites (bench/rebalance.py, bench/churn.py):
//
//   java -cp <kafka 1.1.1 libs>/*:<dir of this class> ScalaConsumerMember consumer.properties TAG TOPIC
//
// Connects to ZooKeeper at once (the connector's constructor) and prints {"event":"connected"}; then on stdin
// "go" subscribes to TOPIC with one stream (the group rebalances) and "stop" shuts the connector down (releasing
// its owner nodes, as a graceful stop does) and exits. Events, one JSON line each on stdout, t = ms on the
// monotonic clock since the process started:
//   {"event":"releasing","t"}                 the rebalance listener's beforeReleasingPartitions
//   {"event":"assigned","partitions":[..],"t"} beforeStartingFetchers: this member's partitions, fetchers next
//   {"event":"consumed","partition","t"}       the first message of a partition since the last assignment
//   {"event":"stopped","t"}
import java.io.BufferedReader;
import java.io.FileInputStream;
import java.io.InputStreamReader;
import java.util.*;

import kafka.consumer.ConsumerConfig;
import kafka.consumer.ConsumerIterator;
import kafka.consumer.ConsumerThreadId;
import kafka.consumer.KafkaStream;
import kafka.javaapi.consumer.ConsumerConnector;
import kafka.javaapi.consumer.ConsumerRebalanceListener;

public class ScalaConsumerMember {
    static final long START = System.nanoTime();
    static final Set<Integer> seen = Collections.synchronizedSet(new HashSet<>());

    static synchronized void emit(String json) {
        long t = (System.nanoTime() - START) / 1000000L;
        System.out.println("{" + json + ",\"t\":" + t + "}");
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        try (FileInputStream in = new FileInputStream(args[0])) {
            props.load(in);
        }
        final String topic = args[2];
        final ConsumerConnector connector =
            kafka.consumer.Consumer.createJavaConsumerConnector(new ConsumerConfig(props));
        connector.setConsumerRebalanceListener(new ConsumerRebalanceListener() {
            public void beforeReleasingPartitions(Map<String, Set<Integer>> owned) {
                emit("\"event\":\"releasing\"");
            }

            public void beforeStartingFetchers(String consumerId,
                                               Map<String, Map<Integer, ConsumerThreadId>> assignment) {
                List<Integer> mine = new ArrayList<>();
                Map<Integer, ConsumerThreadId> forTopic = assignment.get(topic);
                if (forTopic != null) {
                    for (Map.Entry<Integer, ConsumerThreadId> e : forTopic.entrySet()) {
                        if (e.getValue().consumer().equals(consumerId)) mine.add(e.getKey());
                    }
                }
                Collections.sort(mine);
                seen.clear();
                emit("\"event\":\"assigned\",\"partitions\":" + mine);
            }
        });
        emit("\"event\":\"connected\"");
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = stdin.readLine()) != null) {
            if (line.equals("go")) {
                Map<String, Integer> counts = new HashMap<>();
                counts.put(topic, 1);
                final KafkaStream<byte[], byte[]> stream = connector.createMessageStreams(counts).get(topic).get(0);
                Thread reader = new Thread(() -> {
                    ConsumerIterator<byte[], byte[]> it = stream.iterator();
                    try {
                        while (it.hasNext()) {
                            int p = it.next().partition();
                            if (seen.add(p)) emit("\"event\":\"consumed\",\"partition\":" + p);
                        }
                    } catch (Throwable e) {
                        // the stream ends with the connector
                    }
                });
                reader.setDaemon(true);
                reader.start();
            } else if (line.equals("stop")) {
                break;
            }
        }
        connector.shutdown();
        emit("\"event\":\"stopped\"");
        System.exit(0);
    }
}
