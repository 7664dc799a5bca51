// Apache Kafka's own consumer benchmark, org.apache.kafka.tools.ConsumerPerformance (the kafka-tools jar, what
// bin/kafka-consumer-perf-test.sh runs), called again and again in one long-lived JVM so that its JIT is warm: the
// Java KafkaConsumer as the consume suite's limit proxy (bench/consume.py).
//
//   java -cp <kafka 3.9 libs>/*:<dir of this class> JavaConsumerPerf
//
// Each line on stdin holds the tool's arguments, separated by spaces ("quit" exits); for each, this runs the tool's
// main() with them and prints its output line of figures (start.time, end.time, data.consumed.in.MB, MB.sec,
// data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec) followed by a
// line "done". Loaded by reflection: this file compiles without Kafka's jars.
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Method;

public class JavaConsumerPerf {
    public static void main(String[] args) throws Exception {
        Method tool = Class.forName("org.apache.kafka.tools.ConsumerPerformance").getMethod("main", String[].class);
        PrintStream out = System.out;
        BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = stdin.readLine()) != null) {
            if (line.trim().equals("quit")) break;
            ByteArrayOutputStream captured = new ByteArrayOutputStream();
            System.setOut(new PrintStream(captured, true));
            try {
                tool.invoke(null, (Object) line.trim().split(" "));
            } finally {
                System.setOut(out);
            }
            for (String l : captured.toString().split("\n")) {
                if (!l.isEmpty()) out.println(l);
            }
            out.println("done");
            out.flush();
        }
        System.exit(0);
    }
}
