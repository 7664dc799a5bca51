import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The reference for zkconsumer's Java regex evaluation (tests/core/test_topic_filter_java.py): java.util.regex itself.
 *
 * Run as a single-file program: {@code java RegexOracle.java < input}. Input lines (UTF-8, every string hex-encoded
 * as UTF-8 bytes so that any character survives): {@code T <hex>} a topic name, {@code P <hex>} a raw whitelist
 * regex. Topics come first. For every pattern one output line: {@code OK <hex of the normalised regex> <i,j,...>} with
 * the indices of the topics that match, or {@code ERR <hex of the normalised regex> <hex of the error description>}.
 *
 * The raw regex is normalised as Kafka 1.1.1's TopicFilter (core/src/main/scala/kafka/consumer/TopicFilter.scala)
 * does: trim, ',' to '|', spaces removed, leading and trailing quotes removed; a topic matches a whitelist when
 * Pattern.compile(regex).matcher(topic).matches() (String.matches).
 */
public class RegexOracle {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        List<String> topics = new ArrayList<>();
        StringBuilder out = new StringBuilder();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isEmpty()) {
                continue;
            }
            String value = unhex(line.substring(2));
            if (line.startsWith("T ")) {
                topics.add(value);
                continue;
            }
            String regex = value.trim().replace(',', '|').replace(" ", "")
                    .replaceAll("^[\"']+", "").replaceAll("[\"']+$", "");
            Pattern p;
            try {
                p = Pattern.compile(regex);
            } catch (IllegalArgumentException | StackOverflowError e) {
                String msg = e.getClass().getSimpleName() + ": " + e.getMessage();
                out.append("ERR ").append(hex(regex)).append(' ').append(hex(msg.replace('\n', ' '))).append('\n');
                continue;
            }
            StringBuilder hits = new StringBuilder();
            for (int i = 0; i < topics.size(); i++) {
                Matcher m = p.matcher(topics.get(i));
                if (m.matches()) {
                    if (hits.length() > 0) {
                        hits.append(',');
                    }
                    hits.append(i);
                }
            }
            out.append("OK ").append(hex(regex)).append(' ').append(hits.length() == 0 ? "-" : hits).append('\n');
        }
        System.out.print(out);
        System.out.flush();
    }

    private static String hex(String s) {
        StringBuilder b = new StringBuilder();
        for (byte x : s.getBytes(StandardCharsets.UTF_8)) {
            b.append(String.format("%02x", x & 0xff));
        }
        return b.length() == 0 ? "-" : b.toString();
    }

    private static String unhex(String h) {
        if (h.equals("-")) {
            return "";
        }
        byte[] bytes = new byte[h.length() / 2];
        for (int i = 0; i < bytes.length; i++) {
            bytes[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
        }
        return new String(bytes, StandardCharsets.UTF_8);
    }
}
