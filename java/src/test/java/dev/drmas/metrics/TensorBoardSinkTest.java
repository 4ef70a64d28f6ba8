// TensorBoardSinkTest.java — the event file checked two ways: byte for byte against a file that
// TensorBoard's own writer produced (tensorboard 2.21.0: RecordWriter and event_pb2), and through
// a TFRecord/protobuf decoder written here (both CRCs verified, every field decoded) for
// round-trips of steps, tags and values, non-finite values left out, finite ones past float's range
// written as the ±Inf of their conversion (not left out: the largest spike stays on the chart).
package dev.drmas.metrics;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.time.InstantSource;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import java.util.zip.CRC32C;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.opentest4j.AssertionFailedError;

class TensorBoardSinkTest {
    @TempDir
    Path dir;

    /**
     * Written by tensorboard 2.21.0's RecordWriter from event_pb2.Event messages:
     * Event(wall_time=1700000000.25, file_version="brain.Event:2"),
     * Event(wall_time=1700000000.25, step=4, session_log=SessionLog(status=START)),
     * Event(wall_time=1700000001.5, step=300, summary=Summary(value=[
     * Value(tag="agent/solver/adv_std", simple_value=0.125), Value(tag="reward/mean", simple_value=-2.5)])).
     */
    static final String TENSORBOARD_GOLDEN = "1800000000000000a37f4b220900001040fc54d9411a0d627261696e2e4576656e74"
            + "3a32338d2fe90f000000000000006d532b090900001040fc54d94110043a02080128b189573f0000000000000051657661"
            + "0900006040fc54d94110ac022a310a1b0a146167656e742f736f6c7665722f6164765f737464150000003e0a120a0b72"
            + "65776172642f6d65616e15000020c0aedeaa66";

    /**
     * As above for a new run logging step 0 (proto3 leaves step = 0 off the wire):
     * Event(wall_time=1700000000.25, file_version="brain.Event:2"),
     * Event(wall_time=1700000000.25, step=0, session_log=SessionLog(status=START)),
     * Event(wall_time=1700000002.0, step=0, summary=Summary(value=[Value(tag="eval/pass@1", simple_value=0.5)])).
     */
    static final String TENSORBOARD_GOLDEN_NEW_RUN = "1800000000000000a37f4b220900001040fc54d9411a0d627261696e2e"
            + "4576656e743a32338d2fe90d000000000000003c37b8340900001040fc54d9413a0208018c8e54cd1f000000000000005"
            + "14b44180900008040fc54d9412a140a120a0b6576616c2f706173734031150000003fd5d079c1";

    static InstantSource clock(double... seconds) {
        Iterator<Double> it = Arrays.stream(seconds).boxed().iterator();
        return () -> {
            double s = it.next();
            long whole = (long) Math.floor(s);
            return Instant.ofEpochSecond(whole, Math.round((s - whole) * 1e9));
        };
    }

    @Test
    void bytesEqualTensorBoardsOwnWriter() throws IOException {
        Path file;
        // a run resumed from the checkpoint of step 3, then logging step 300
        try (var sink = TensorBoardSink.open(dir, 3, clock(1700000000.25, 1700000001.5))) {
            sink.log(300, Map.of("reward/mean", -2.5, "agent/solver/adv_std", 0.125));
            file = sink.file();
        }
        assertEquals(TENSORBOARD_GOLDEN, HexFormat.of().formatHex(Files.readAllBytes(file)));
    }

    @Test
    void newRunBytesEqualTensorBoardsOwnWriter() throws IOException {
        Path file;
        try (var sink = TensorBoardSink.open(dir, -1, clock(1700000000.25, 1700000002.0))) {
            sink.log(0, Map.of("eval/pass@1", 0.5));
            file = sink.file();
        }
        assertEquals(TENSORBOARD_GOLDEN_NEW_RUN, HexFormat.of().formatHex(Files.readAllBytes(file)));
    }

    @Test
    void roundTripsThroughAnIndependentDecoder() throws IOException {
        Path file;
        var step1 = new LinkedHashMap<String, Double>();
        step1.put("reward/mean", 0.5);
        step1.put("agent/solvér/adv_std", -1e-7); // non-ASCII tag, UTF-8 on the wire
        step1.put("loss", Double.NaN);
        step1.put("too_big_for_float", 1e300);
        step1.put("too_negative_for_float", -1e39);
        step1.put("grad_norm", Double.POSITIVE_INFINITY);
        step1.put("big", 3.0e38);
        long hugeStep = 1L << 40;
        try (var sink = TensorBoardSink.open(dir, -1, clock(1.0e9, 1.0e9 + 0.5, 1.0e9 + 1.0, 1.0e9 + 2.0))) {
            sink.log(1, step1);
            sink.log(2, Map.of("loss", Double.NaN)); // nothing finite: no record at all
            sink.log(hugeStep, Map.of("time/rollout_s", 123456.789));
            file = sink.file();
        }
        List<byte[]> records = readRecords(Files.readAllBytes(file));
        assertEquals(4, records.size());

        List<Field> first = decode(records.get(0));
        assertEquals(1.0e9, Double.longBitsToDouble(only(first, 1, 1).bits));
        assertEquals("brain.Event:2", new String(only(first, 3, 2).bytes, StandardCharsets.UTF_8));
        assertEquals(2, first.size());
        assertEquals(0, step(decode(records.get(1)))); // a new run starts its session at step 0
        assertArrayEquals(new byte[] {0x08, 0x01}, only(decode(records.get(1)), 7, 2).bytes);

        Event e1 = event(records.get(2));
        assertEquals(1.0e9 + 0.5, e1.wallTime);
        assertEquals(1, e1.step);
        assertEquals(List.of("agent/solvér/adv_std", "big", "reward/mean", "too_big_for_float", "too_negative_for_float"),
                List.copyOf(e1.values.keySet()));
        assertEquals((float) -1e-7, e1.values.get("agent/solvér/adv_std"));
        assertEquals(3.0e38f, e1.values.get("big"));
        assertEquals(Float.POSITIVE_INFINITY, e1.values.get("too_big_for_float"));
        assertEquals(Float.NEGATIVE_INFINITY, e1.values.get("too_negative_for_float"));
        assertEquals(0.5f, e1.values.get("reward/mean"));

        Event e2 = event(records.get(3));
        assertEquals(1.0e9 + 2.0, e2.wallTime); // the all-NaN step read the clock and wrote nothing
        assertEquals(hugeStep, e2.step);
        assertEquals(Map.of("time/rollout_s", 123456.789f), e2.values);
    }

    @Test
    void decoderCatchesACorruptedByte() throws IOException {
        Path file;
        try (var sink = TensorBoardSink.open(dir, -1, clock(5.0, 6.0))) {
            sink.log(7, Map.of("x", 1.0));
            file = sink.file();
        }
        byte[] bytes = Files.readAllBytes(file);
        readRecords(bytes); // intact: passes
        bytes[bytes.length - 6] ^= 0x01; // inside the last record's data
        assertThrows(AssertionFailedError.class, () -> readRecords(bytes));
    }

    @Test
    void eachWriterGetsItsOwnFileNamedAsTensorBoardExpects() throws IOException {
        var a = TensorBoardSink.open(dir, -1, clock(1700000000.0, 1700000000.0));
        var b = TensorBoardSink.open(dir, 5, clock(1700000000.0));
        a.log(1, Map.of("x", 1.0)); // still open: flushed anyway
        assertEquals(3, readRecords(Files.readAllBytes(a.file())).size());
        a.close();
        b.close();
        assertTrue(a.file().getFileName().toString().matches("events\\.out\\.tfevents\\.1700000000\\..+"), a.file().toString());
        assertTrue(!a.file().equals(b.file()));
        try (Stream<Path> files = Files.list(dir)) {
            assertEquals(2, files.count());
        }
        assertThrows(IllegalStateException.class, () -> a.log(2, Map.of()));
    }

    // ---- the decoder, independent of the sink's encoder ----

    /** TFRecord mask, as TensorFlow's crc32c.h states it: ((crc >> 15) | (crc << 17)) + 0xa282ead8, mod 2^32. */
    static long masked(byte[] b, int off, int len) {
        var crc = new CRC32C();
        crc.update(b, off, len);
        long c = crc.getValue();
        long rotated = ((c >>> 15) | (c << 17)) & 0xFFFFFFFFL;
        return (rotated + 0xA282EAD8L) & 0xFFFFFFFFL;
    }

    static List<byte[]> readRecords(byte[] file) {
        var buf = ByteBuffer.wrap(file).order(ByteOrder.LITTLE_ENDIAN);
        var out = new ArrayList<byte[]>();
        while (buf.hasRemaining()) {
            int start = buf.position();
            long len = buf.getLong();
            assertEquals(masked(file, start, 8), buf.getInt() & 0xFFFFFFFFL, "length CRC of record at byte " + start);
            byte[] data = new byte[Math.toIntExact(len)];
            buf.get(data);
            assertEquals(masked(data, 0, data.length), buf.getInt() & 0xFFFFFFFFL, "data CRC of record at byte " + start);
            out.add(data);
        }
        return out;
    }

    record Field(int number, int wireType, long bits, byte[] bytes) {}

    static List<Field> decode(byte[] msg) {
        var fields = new ArrayList<Field>();
        int[] pos = {0};
        while (pos[0] < msg.length) {
            long key = readVarint(msg, pos);
            int number = (int) (key >>> 3), wire = (int) (key & 7);
            switch (wire) {
                case 0 -> fields.add(new Field(number, wire, readVarint(msg, pos), null));
                case 1 -> {
                    fields.add(new Field(number, wire, ByteBuffer.wrap(msg, pos[0], 8).order(ByteOrder.LITTLE_ENDIAN).getLong(), null));
                    pos[0] += 8;
                }
                case 5 -> {
                    fields.add(new Field(number, wire, ByteBuffer.wrap(msg, pos[0], 4).order(ByteOrder.LITTLE_ENDIAN).getInt(), null));
                    pos[0] += 4;
                }
                case 2 -> {
                    int len = Math.toIntExact(readVarint(msg, pos));
                    fields.add(new Field(number, wire, 0, Arrays.copyOfRange(msg, pos[0], pos[0] + len)));
                    pos[0] += len;
                }
                default -> throw new AssertionError("unexpected wire type " + wire);
            }
        }
        assertEquals(msg.length, pos[0]);
        return fields;
    }

    static long readVarint(byte[] b, int[] pos) {
        long v = 0;
        for (int shift = 0; ; shift += 7) {
            int x = b[pos[0]++] & 0xFF;
            v |= (long) (x & 0x7F) << shift;
            if (x < 0x80) return v;
        }
    }

    static Field only(List<Field> fields, int number, int wireType) {
        List<Field> f = fields.stream().filter(x -> x.number == number).toList();
        assertEquals(1, f.size(), "field " + number);
        assertEquals(wireType, f.getFirst().wireType, "wire type of field " + number);
        return f.getFirst();
    }

    record Event(double wallTime, long step, Map<String, Float> values) {}

    /** The step field, 0 when absent (proto3 does not write a default). */
    static long step(List<Field> event) {
        boolean present = event.stream().anyMatch(f -> f.number == 2);
        return present ? only(event, 2, 0).bits : 0;
    }

    static Event event(byte[] data) {
        List<Field> e = decode(data);
        long step = step(e);
        assertEquals(step == 0 ? 2 : 3, e.size());
        double wall = Double.longBitsToDouble(only(e, 1, 1).bits);
        var values = new LinkedHashMap<String, Float>();
        for (Field v : decode(only(e, 5, 2).bytes)) {
            assertEquals(1, v.number);
            List<Field> value = decode(v.bytes);
            assertEquals(2, value.size());
            String tag = new String(only(value, 1, 2).bytes, StandardCharsets.UTF_8);
            float x = Float.intBitsToFloat((int) only(value, 2, 5).bits);
            values.put(tag, x);
        }
        return new Event(wall, step, values);
    }

    @Test
    void decoderAgreesWithTheGoldenFile() {
        // the decoder itself, on TensorBoard's bytes: keeps it honest about what it accepts
        List<byte[]> records = readRecords(HexFormat.of().parseHex(TENSORBOARD_GOLDEN));
        assertEquals(3, records.size());
        Field sessionLog = only(decode(records.get(1)), 7, 2);
        assertArrayEquals(new byte[] {0x08, 0x01}, sessionLog.bytes); // status = START
        Event e = event(records.get(2));
        assertEquals(300, e.step);
        assertEquals(Map.of("agent/solver/adv_std", 0.125f, "reward/mean", -2.5f), e.values);
    }
}
