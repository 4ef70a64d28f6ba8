// SafeTensorsTest.java — the safetensors reader on files assembled byte by byte here from the format
// (8-byte little-endian header length, JSON header, data), independent of our writer; the writer
// against a byte layout written out by hand; BF16/F16 values against roundings computed in Java;
// and every malformed file rejected with a message naming the file and the tensor.
package dev.drmas.model;

import dev.drmas.testing.TorchScope;

import static dev.drmas.algo.TorchReference.floats;
import static dev.drmas.algo.TorchReference.toFloats;
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
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;

@ExtendWith(TorchScope.class)
class SafeTensorsTest {
    /**
     * Retained: a test of another class (CheckpointTest's bf16 helpers) may load this class inside
     * its own PointerScope, whose close would otherwise free this device for the tests here.
     */
    static final Device CPU = Scopes.retain(new Device("cpu"));

    @TempDir
    Path dir;


    // ================================================================== file assembly

    /** 8-byte little-endian header length, the header, the data: a safetensors file. */
    static byte[] assemble(String header, byte[] data) {
        byte[] h = header.getBytes(StandardCharsets.UTF_8);
        return ByteBuffer.allocate(8 + h.length + data.length).order(ByteOrder.LITTLE_ENDIAN)
                .putLong(h.length).put(h).put(data).array();
    }

    static byte[] f32(float... v) {
        ByteBuffer b = ByteBuffer.allocate(4 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (float x : v) b.putFloat(x);
        return b.array();
    }

    static byte[] u16(short... v) {
        ByteBuffer b = ByteBuffer.allocate(2 * v.length).order(ByteOrder.LITTLE_ENDIAN);
        for (short x : v) b.putShort(x);
        return b.array();
    }

    static byte[] concat(byte[]... parts) {
        int n = 0;
        for (byte[] p : parts) n += p.length;
        ByteBuffer b = ByteBuffer.allocate(n);
        for (byte[] p : parts) b.put(p);
        return b.array();
    }

    /** bfloat16 bits of x, rounded to nearest, ties to even (x finite). */
    static short bf16(float x) {
        int bits = Float.floatToRawIntBits(x);
        int lsb = (bits >>> 16) & 1;
        return (short) ((bits + 0x7FFF + lsb) >>> 16);
    }

    static float fromBf16(short b) {
        return Float.intBitsToFloat((b & 0xFFFF) << 16);
    }

    private Path file(String name, byte[] bytes) throws IOException {
        Path f = dir.resolve(name);
        Files.write(f, bytes);
        return f;
    }

    // ================================================================== reading

    @Test
    void readsAHandAssembledFile() throws IOException {
        // keys in no particular order, offsets not following the keys, an odd header length (so
        // the F32 data is not even 4-byte aligned), a scalar and an empty tensor
        String header = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[6,22]},"
                + "\"__metadata__\":{\"format\":\"pt\"},"
                + "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,6]},"
                + "\"h\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[22,26]},"
                + "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[26,30]},"
                + "\"e\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[30,30]}}";
        byte[] data = concat(
                u16((short) 0x3F80, (short) 0xBF00, (short) 0x4049),  // bf16 1.0, -0.5, 3.140625
                f32(1.5f, -2.25f, 1e-3f, 65536f),
                u16((short) 0x7BFF, (short) 0x0001),                   // f16 65504, 2^-24 (subnormal)
                f32(7f));
        Path f = file("hand.safetensors", assemble(header, data));
        try (SafeTensors st = SafeTensors.open(f)) {
            assertEquals(List.of("b", "e", "h", "s", "w"), List.copyOf(st.tensors().keySet()));
            assertArrayEquals(new float[]{1f, -0.5f, 3.140625f}, toFloats(st.get("b", ScalarType.Float, CPU)));
            Tensor w = st.get("w", ScalarType.Float, CPU);
            assertEquals(List.of(2L, 2L), List.of(w.size(0), w.size(1)));
            assertArrayEquals(new float[]{1.5f, -2.25f, 1e-3f, 65536f}, toFloats(w));
            assertArrayEquals(new float[]{65504f, (float) Math.pow(2, -24)}, toFloats(st.get("h", ScalarType.Float, CPU)));
            Tensor s = st.get("s", ScalarType.Float, CPU);
            assertEquals(0, s.dim());
            assertEquals(7.0, s.item_double());
            Tensor e = st.get("e", ScalarType.Float, CPU);
            assertEquals(List.of(0L, 3L), List.of(e.size(0), e.size(1)));
            // kept in its own dtype, the bf16 tensor holds the file's bits
            Tensor b16 = st.get("b", ScalarType.BFloat16, CPU);
            assertEquals(ScalarType.BFloat16, b16.scalar_type().intern());
            assertArrayEquals(new float[]{1f, -0.5f, 3.140625f}, toFloats(b16));
            ModelFileException missing = assertThrows(ModelFileException.class, () -> st.get("x", ScalarType.Float, CPU));
            assertEquals(f + ": no tensor 'x'", missing.getMessage());
            st.close(); // unmapped: reading now is refused instead of touching freed memory
            IllegalStateException closed = assertThrows(IllegalStateException.class, () -> st.get("b", ScalarType.Float, CPU));
            assertEquals(f + " is closed", closed.getMessage());
        }
    }

    @Test
    void bf16AndF16ValuesComeBackAsTheirRoundings() throws IOException {
        Random rnd = new Random(3);
        int n = 1000;
        float[] x = new float[n];
        for (int i = 0; i < n; i++) x[i] = (float) (rnd.nextGaussian() * Math.pow(10, rnd.nextInt(7) - 3));
        x[0] = 1.00390625f;   // 1 + 2^-8: exactly half way between two bf16 values; ties to even -> 1.0
        x[1] = 1.01171875f;   // 1 + 3·2^-8: half way; ties to even -> 1 + 2^-6
        short[] b = new short[n], h = new short[n];
        for (int i = 0; i < n; i++) {
            b[i] = bf16(x[i]);
            h[i] = Float.floatToFloat16(x[i]);
        }
        String header = "{\"bf\":{\"dtype\":\"BF16\",\"shape\":[" + n + "],\"data_offsets\":[0," + 2 * n + "]},"
                + "\"hf\":{\"dtype\":\"F16\",\"shape\":[" + n + "],\"data_offsets\":[" + 2 * n + "," + 4 * n + "]}}";
        Path f = file("half.safetensors", assemble(header, concat(u16(b), u16(h))));
        float[] expectB = new float[n], expectH = new float[n];
        for (int i = 0; i < n; i++) {
            expectB[i] = fromBf16(b[i]);
            expectH[i] = Float.float16ToFloat(h[i]);
        }
        assertEquals(1.0f, expectB[0]);
        assertEquals(1.015625f, expectB[1]);
        try (SafeTensors st = SafeTensors.open(f)) {
            assertArrayEquals(expectB, toFloats(st.get("bf", ScalarType.Float, CPU)));
            assertArrayEquals(expectH, toFloats(st.get("hf", ScalarType.Float, CPU)));
        }
        // and LibTorch's float32 -> bfloat16 cast (what a bf16 save does) rounds the same way
        Tensor cast = floats(x).to(ScalarType.BFloat16);
        Path g = dir.resolve("cast.safetensors");
        SafeTensorsWriter.write(g, Map.of("bf", cast));
        byte[] bytes = Files.readAllBytes(g);
        ByteBuffer data = ByteBuffer.wrap(bytes, bytes.length - 2 * n, 2 * n).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < n; i++) assertEquals(b[i], data.getShort(), "bf16 bits of " + x[i]);
    }

    // ================================================================== writing

    @Test
    void writerLaysBytesOutAsTheReferenceLibrary() throws IOException {
        Map<String, Tensor> t = new LinkedHashMap<>();
        t.put("c", floats(1.5f, -2f).to(ScalarType.BFloat16)); // 0x3FC0, 0xC000
        t.put("b", floats(1.5f, -2f));
        t.put("a", floats(3f).view(1, 1));
        Path f = dir.resolve("w.safetensors");
        SafeTensorsWriter.write(f, t);
        // F32 before BF16 (widest dtype first), then by name; 197 bytes of JSON + 3 spaces = 200
        String header = "{\"__metadata__\":{\"format\":\"pt\"},"
                + "\"a\":{\"dtype\":\"F32\",\"shape\":[1,1],\"data_offsets\":[0,4]},"
                + "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]},"
                + "\"c\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[12,16]}}   ";
        byte[] expected = concat(new byte[]{(byte) 200, 0, 0, 0, 0, 0, 0, 0}, header.getBytes(StandardCharsets.US_ASCII),
                f32(3f, 1.5f, -2f), u16((short) 0x3FC0, (short) 0xC000));
        assertArrayEquals(expected, Files.readAllBytes(f));
    }

    @Test
    void writerRefusesOtherDtypes() {
        Map<String, Tensor> t = Map.of("ids", floats(1f).to(ScalarType.Long));
        Path f = dir.resolve("x.safetensors");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> SafeTensorsWriter.write(f, t));
        assertTrue(e.getMessage().contains("tensor 'ids' is Long; safetensors output supports float32, bfloat16 and float16"),
                e.getMessage());
    }

    // ================================================================== malformed files

    private void assertRejected(byte[] bytes, String... messageParts) throws IOException {
        Path f = file("bad.safetensors", bytes);
        ModelFileException e = assertThrows(ModelFileException.class, () -> SafeTensors.open(f).close());
        assertTrue(e.getMessage().startsWith(f + ": "), e.getMessage());
        for (String m : messageParts) assertTrue(e.getMessage().contains(m), e.getMessage());
    }

    static final String ONE = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}";

    @Test
    void corruptHeaderJson() throws IOException {
        assertRejected(assemble("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],", new byte[24]), "safetensors header: not valid JSON (");
        assertRejected(assemble("[1, 2]", new byte[0]), "safetensors header: not a JSON object (it starts with an array at byte 8)");
        assertRejected(assemble(ONE.replace("[2,3]", "[2,-3]"), new byte[24]), "tensor 'a': shape[1] must be a non-negative integer, got -3");
    }

    @Test
    void headerLengthBeyondTheFile() throws IOException {
        byte[] b = assemble(ONE, new byte[24]);
        ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).putLong(0, 1000);
        assertRejected(b, "header length 1000 exceeds the file size (" + b.length + " bytes)");
        assertRejected(new byte[5], "5 bytes, too short for a safetensors file");
        byte[] huge = assemble(ONE, new byte[24]);
        ByteBuffer.wrap(huge).order(ByteOrder.LITTLE_ENDIAN).putLong(0, -1); // 2^64 − 1 as unsigned
        assertRejected(huge, "header length 18446744073709551615 exceeds the file size");
    }

    @Test
    void truncatedData() throws IOException {
        assertRejected(assemble(ONE, new byte[20]),
                "truncated: tensor 'a' ends at byte 24 of the data section, but the file holds only 20 data bytes");
    }

    @Test
    void tensorEndingPastLongMaxIsReportedTruncated() throws IOException {
        // 4 * (2^61 - 1) = 2^63 - 4 bytes: its end, past 16 data bytes, overflows a long
        assertRejected(assemble("{\"w\":{\"dtype\":\"F32\",\"shape\":[2305843009213693951],"
                        + "\"data_offsets\":[0,9223372036854775804]}}", new byte[16]),
                "truncated: tensor 'w' ends at byte 9223372036854775804 of the data section, but the file holds only 16 data bytes");
    }

    @Test
    void trailingBytes() throws IOException {
        assertRejected(assemble(ONE, new byte[28]), "4 bytes after the end of the last tensor's data");
    }

    @Test
    void anEmptyTensorListedAfterOneAtItsOffsetIsRead() throws IOException {
        // a writer whose JSON order differs from HF's (alphabetical, hash order): "b" is empty at offset 0, after "a"
        String h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                + "\"b\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}";
        Path f = file("empty.safetensors", assemble(h, new byte[8]));
        try (SafeTensors st = SafeTensors.open(f)) {
            assertEquals(java.util.Set.of("a", "b"), st.tensors().keySet());
            assertEquals(0, st.info("b").bytes());
        }
    }

    @Test
    void offsetsInconsistentWithShape() throws IOException {
        assertRejected(assemble(ONE.replace("[0,24]", "[0,20]"), new byte[20]),
                "tensor 'a': data_offsets [0, 20] hold 20 bytes, but F32 [2, 3] needs 24");
        // a gap between two tensors
        String two = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                + "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}";
        assertRejected(assemble(two, new byte[12]), "tensor 'b': data_offsets start at 8 but the previous tensor ends at 4");
        assertRejected(assemble(ONE.replace("[0,24]", "[0]"), new byte[24]), "tensor 'a': data_offsets must be a list of 2 integers");
    }

    @Test
    void unsupportedDtype() throws IOException {
        assertRejected(assemble(ONE.replace("F32", "I64").replace("[0,24]", "[0,48]"), new byte[48]),
                "tensor 'a': dtype I64 is not supported (drmas reads F32, BF16, F16)");
    }

    @Test
    void indexNamingAMissingShard() throws IOException {
        Files.write(dir.resolve("model-00001-of-00002.safetensors"), assemble(ONE, new byte[24]));
        Files.writeString(dir.resolve("model.safetensors.index.json"), """
                {"metadata": {"total_size": 28},
                 "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}
                """);
        ModelFileException e = assertThrows(ModelFileException.class, () -> SafeTensors.open(dir).close());
        assertTrue(e.getMessage().startsWith(dir.resolve("model.safetensors.index.json") + ": weight_map['b'] names shard "
                + "'model-00002-of-00002.safetensors', which does not exist in "), e.getMessage());
        // a shard that lacks a tensor the index puts in it
        Files.write(dir.resolve("model-00002-of-00002.safetensors"), assemble(ONE.replace("\"a\"", "\"c\""), new byte[24]));
        e = assertThrows(ModelFileException.class, () -> SafeTensors.open(dir).close());
        assertTrue(e.getMessage().contains("weight_map puts tensor 'b' in model-00002-of-00002.safetensors, but that file does not hold it"),
                e.getMessage());
        // a shard name that is no file name (a NUL: valid JSON)
        Files.writeString(dir.resolve("model.safetensors.index.json"), """
                {"metadata": {"total_size": 24}, "weight_map": {"a": "a\\u0000.safetensors"}}
                """);
        e = assertThrows(ModelFileException.class, () -> SafeTensors.open(dir).close());
        assertTrue(e.getMessage().startsWith(dir.resolve("model.safetensors.index.json") + ": weight_map['a'] names shard "
                + "'a\\0.safetensors', which is not a valid file name"), e.getMessage());
        // a directory with neither layout
        Path empty = Files.createDirectory(dir.resolve("empty"));
        e = assertThrows(ModelFileException.class, () -> SafeTensors.open(empty).close());
        assertEquals(empty + ": no model.safetensors or model.safetensors.index.json in this directory", e.getMessage());
    }

    @Test
    void aSingleFileWinsOverAStaleIndexBesideIt() throws IOException {
        // transformers' save_pretrained leaves an index (and its shards' names) behind when it saves a
        // single file into a folder that held a sharded save; from_pretrained then loads the single file
        Files.write(dir.resolve("model.safetensors"), assemble(ONE, f32(1, 2, 3, 4, 5, 6)));
        Files.writeString(dir.resolve("model.safetensors.index.json"), """
                {"metadata": {"total_size": 24}, "weight_map": {"a": "model-00001-of-00002.safetensors"}}
                """);
        try (SafeTensors st = SafeTensors.open(dir)) {
            assertArrayEquals(new float[]{1, 2, 3, 4, 5, 6}, toFloats(st.get("a", ScalarType.Float, CPU)));
        }
    }

    // ================================================================== checks found untested (PIT review)

    @Test
    void headerLengthAtTheEdgesOfTheFileAndOfTheLimit() throws IOException {
        // the header may fill the file (no data: no tensors), and 8 bytes are a header length of 0
        Path empty = file("empty.safetensors", assemble("{\"__metadata__\":{\"format\":\"pt\"}}", new byte[0]));
        try (SafeTensors st = SafeTensors.open(empty)) {
            assertTrue(st.tensors().isEmpty());
        }
        assertRejected(new byte[8], "safetensors header: not a JSON object (it is empty)");
        byte[] over = assemble(ONE, new byte[24]);
        ByteBuffer.wrap(over).order(ByteOrder.LITTLE_ENDIAN).putLong(0, over.length - 7);
        assertRejected(over, "header length " + (over.length - 7) + " exceeds the file size (" + over.length + " bytes)");
        // above the reference implementation's limit, 100,000,000 bytes, a header is refused before
        // anything is read (a sparse file: only its length is written). (The limit itself is not
        // read here: 100 MB through the Java heap and the JSON parser unsettled the memory tests
        // that run after this class.)
        Path f = dir.resolve("limit.safetensors");
        try (java.io.RandomAccessFile r = new java.io.RandomAccessFile(f.toFile(), "rw")) {
            r.setLength(8 + 100_000_001L);
            r.write(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(100_000_001L).array());
        }
        ModelFileException e = assertThrows(ModelFileException.class, () -> SafeTensors.open(f).close());
        assertEquals(f + ": header length 100000001 is above the 100000000-byte limit", e.getMessage());
    }

    @Test
    void malformedMetadataAndTensorEntries() throws IOException {
        String a = "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}";
        assertRejected(assemble("{\"__metadata__\":\"pt\"," + a + "}", new byte[24]), "__metadata__ must be an object of strings");
        assertRejected(assemble("{\"__metadata__\":{\"format\":\"pt\",\"step\":3}," + a + "}", new byte[24]),
                "__metadata__.step must be a string, got 3");
        assertRejected(assemble("{\"a\":[1,2]}", new byte[0]), "tensor 'a': expected an object with dtype, shape, data_offsets");
        assertRejected(assemble(ONE.replace("\"dtype\":\"F32\",", ""), new byte[24]), "tensor 'a': dtype is missing");
        assertRejected(assemble(ONE.replace("\"F32\"", "32"), new byte[24]), "tensor 'a': dtype must be a string such as \"F32\", got 32");
        assertRejected(assemble(ONE.replace("\"shape\":[2,3],", ""), new byte[24]), "tensor 'a': shape must be a list of integers, got null");
        assertRejected(assemble(ONE.replace("[2,3]", "[2,3.0]"), new byte[24]), "tensor 'a': shape[1] must be a non-negative integer, got 3.0");
        assertRejected(assemble(ONE.replace("[2,3]", "[2,18446744073709551616]"), new byte[24]),
                "tensor 'a': shape[1] must be a non-negative integer, got 18446744073709551616");
        assertRejected(assemble(ONE.replace("[0,24]", "[24,0]"), new byte[24]),
                "tensor 'a': data_offsets [24, 0] hold -24 bytes, but F32 [2, 3] needs 24");
        // element counts, and byte counts, past a long
        assertRejected(assemble(ONE.replace("[2,3]", "[4294967296,4294967296]"), new byte[24]),
                "tensor 'a': shape [4294967296, 4294967296] overflows");
        assertRejected(assemble(ONE.replace("[2,3]", "[4611686018427387904]"), new byte[24]),
                "tensor 'a': shape [4611686018427387904] overflows");
    }

    /** The tensor entry of a header: name, dtype, shape, offsets. */
    static String entry(String name, String dtype, String shape, long from, long to) {
        return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" + from + "," + to + "]}";
    }

    @Test
    void shardsOpenedThroughTheirIndexFile() throws IOException {
        Files.write(dir.resolve("s1.safetensors"), assemble("{" + entry("a", "F32", "[2]", 0, 8) + "}", f32(1, 2)));
        Files.write(dir.resolve("s2.safetensors"), assemble("{" + entry("b", "F32", "[1]", 0, 4) + "}", f32(3)));
        Path index = dir.resolve("my.index.json");
        Files.writeString(index, "{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s2.safetensors\"}}");
        try (SafeTensors st = SafeTensors.open(index)) {
            assertEquals(index, st.source());
            assertEquals(dir.resolve("s2.safetensors").toAbsolutePath(), st.info("b").file().toAbsolutePath());
            assertArrayEquals(new float[]{1, 2}, toFloats(st.get("a", ScalarType.Float, CPU)));
            assertArrayEquals(new float[]{3}, toFloats(st.get("b", ScalarType.Float, CPU)));
        }
    }

    private void assertIndexRejected(Path index, String json, String message) throws IOException {
        Files.writeString(index, json);
        ModelFileException e = assertThrows(ModelFileException.class, () -> SafeTensors.open(index).close());
        assertEquals(message, e.getMessage());
    }

    @Test
    void malformedIndexFiles() throws IOException {
        Path sub = Files.createDirectory(dir.resolve("sub"));
        Path index = sub.resolve("model.safetensors.index.json");
        Files.write(sub.resolve("s1.safetensors"), assemble("{" + entry("a", "F32", "[1]", 0, 4) + "," + entry("x", "F32", "[1]", 4, 8) + "}",
                f32(1, 2)));
        Files.write(sub.resolve("s2.safetensors"), assemble("{" + entry("a", "F32", "[1]", 0, 4) + "," + entry("b", "F32", "[1]", 4, 8) + "}",
                f32(1, 2)));
        Files.write(dir.resolve("outside.safetensors"), assemble("{" + entry("a", "F32", "[1]", 0, 4) + "}", f32(1)));
        Path s1 = sub.resolve("s1.safetensors"), s2 = sub.resolve("s2.safetensors");
        Path abs = sub.toAbsolutePath();
        assertIndexRejected(index, "{\"metadata\": {}}", index + ": weight_map is missing");
        assertIndexRejected(index, "{\"weight_map\": [\"s1.safetensors\"]}",
                index + ": weight_map must be an object of tensor names and their shard files, got [\"s1.safetensors\"]");
        assertIndexRejected(index, "{\"weight_map\": {\"a\": 3}}", index + ": weight_map['a'] must be a file name, got 3");
        // a shard beside the folder, not in it, even though it exists
        assertIndexRejected(index, "{\"weight_map\": {\"a\": \"../outside.safetensors\"}}",
                index + ": weight_map['a'] names shard '../outside.safetensors', which does not exist in " + abs);
        // a shard that holds a tensor the index does not list (x), or lists in another shard
        assertIndexRejected(index, "{\"weight_map\": {\"a\": \"s1.safetensors\"}}",
                abs.resolve("s1.safetensors") + ": tensor 'x' is not listed for this file in " + index);
        assertIndexRejected(index, "{\"weight_map\": {\"a\": \"s1.safetensors\", \"x\": \"s1.safetensors\", \"b\": \"s2.safetensors\"}}",
                abs.resolve("s2.safetensors") + ": tensor 'a' is also in " + abs.resolve("s1.safetensors") + " (see " + index + ")");
        Files.writeString(index, "{\"weight_map\": ");
        ModelFileException e = assertThrows(ModelFileException.class, () -> SafeTensors.open(index).close());
        assertTrue(e.getMessage().startsWith(index + ": not valid JSON ("), e.getMessage());
        assertTrue(Files.exists(s1) && Files.exists(s2));
    }

    /**
     * An index that is not JSON, is cut short, or has a wrongly typed weight_map, is named with what
     * is wrong and where (line:column, or the key), never with the parser's own text (its classes
     * and a "Source: REDACTED").
     */
    @Test
    void indexJsonErrorsAreInDrmasWords() throws IOException {
        Path index = dir.resolve("model.safetensors.index.json");
        assertIndexRejected(index, "{\"weight_map\": {\"a\" \"s1.safetensors\"}}", index
                + ": not valid JSON (unexpected character ('\"' (code 34)): was expecting a colon to separate field name and value)"
                + " at line 1, column 21");
        assertIndexRejected(index, "{\"metadata\": {\"total_size\": 8},\n \"weight_map\": {\"a\": \"s1.safe",
                index + ": not valid JSON (unexpected end-of-input in VALUE_STRING) at line 2, column 30");
        assertIndexRejected(index, "{\"weight_map\": {}}\n{}", index + ": text after the JSON value at line 2, column 1");
        assertIndexRejected(index, "{\"weight_map\": \"x\"}",
                index + ": weight_map must be an object of tensor names and their shard files, got \"x\"");
        assertIndexRejected(index, "{\"weight_map\": {\"a\": [\"s1.safetensors\"]}}",
                index + ": weight_map['a'] must be a file name, got [\"s1.safetensors\"]");
    }

    @Test
    void anIndexFileThatCannotBeReadIsNotCalledInvalidJson() throws IOException {
        Path index = dir.resolve("model.safetensors.index.json");
        ModelFileException e = assertThrows(ModelFileException.class, () -> SafeTensors.open(index).close());
        assertEquals(index + ": no such file", e.getMessage());
        Path single = dir.resolve("model.safetensors");
        e = assertThrows(ModelFileException.class, () -> SafeTensors.open(single).close());
        assertEquals(single + ": no such file", e.getMessage());
        // a folder whose index is no file
        Files.createDirectory(index);
        e = assertThrows(ModelFileException.class, () -> SafeTensors.open(dir).close());
        assertTrue(e.getMessage().startsWith(index + ": cannot read: "), e.getMessage());
    }

    @Test
    void rangedReadsAtTheirEdges() throws IOException {
        Path f = file("r.safetensors", assemble("{" + entry("a", "F32", "[4]", 0, 16) + "}", f32(1, 2, 3, 4)));
        try (SafeTensors st = SafeTensors.open(f)) {
            Tensor whole = torch.zeros(new long[] {4});
            st.read("a", 0, whole);  // from the first element
            assertArrayEquals(new float[]{1, 2, 3, 4}, toFloats(whole));
            Tensor last = torch.zeros(new long[] {2});
            st.read("a", 2, last);  // up to the last element
            assertArrayEquals(new float[]{3, 4}, toFloats(last));
            Tensor none = torch.zeros(new long[] {0});
            st.read("a", 4, none);  // nothing, just past the end
            ModelFileException e = assertThrows(ModelFileException.class, () -> st.read("a", -1, torch.zeros(new long[] {1})));
            assertEquals(f + ": tensor 'a' has 4 elements; elements [-1, 0) of it were asked for", e.getMessage());
            e = assertThrows(ModelFileException.class, () -> st.read("a", 3, torch.zeros(new long[] {2})));
            assertEquals(f + ": tensor 'a' has 4 elements; elements [3, 5) of it were asked for", e.getMessage());
            st.close();
            IllegalStateException closed = assertThrows(IllegalStateException.class, () -> st.read("a", 0, last));
            assertEquals(f + " is closed", closed.getMessage());
        }
    }

    @Test
    void namesAreEscapedAsSerdeJsonEscapesThem() throws IOException {
        // '"', '\\' and the control characters escaped (short forms where JSON has them, else
        // \\u00xx in lower case); a space, DEL and non-ASCII letters written as they are (UTF-8)
        String name = "q\"b\\c\nd\re\tf\bg\fh\u0001i\u001fj k\u007fé";
        String escaped = "q\\\"b\\\\c\\nd\\re\\tf\\bg\\fh\\u0001i\\u001fj k\u007fé";
        Path f = dir.resolve("names.safetensors");
        SafeTensorsWriter.write(f, Map.of(name, floats(2f)));
        String json = "{\"__metadata__\":{\"format\":\"pt\"},\"" + escaped + "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
        byte[] j = json.getBytes(StandardCharsets.UTF_8);
        int pad = (8 - j.length % 8) % 8;
        byte[] expected = concat(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(j.length + pad).array(), j,
                " ".repeat(pad).getBytes(StandardCharsets.US_ASCII), f32(2f));
        assertArrayEquals(expected, Files.readAllBytes(f));
        try (SafeTensors st = SafeTensors.open(f)) {
            assertEquals(List.of(name), List.copyOf(st.tensors().keySet()));
        }
    }

    @Test
    void writersRefuseNamesTheFormatReserves() {
        Path f = dir.resolve("x.safetensors");
        for (String bad : List.of("", "__metadata__")) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> SafeTensorsWriter.write(f, Map.of(bad, floats(1f))));
            assertEquals("invalid tensor name '" + bad + "'", e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> SafeTensorsStreamWriter.file(f,
                    List.of(new SafeTensorsWriter.Spec(bad, SafeTensors.Dtype.F32, new long[]{1}))).close());
            assertEquals("invalid tensor name '" + bad + "'", e.getMessage());
        }
        SafeTensorsWriter.Spec a = new SafeTensorsWriter.Spec("a", SafeTensors.Dtype.F32, new long[]{1});
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> SafeTensorsStreamWriter.file(f, List.of(a, a)).close());
        assertEquals(f + ": tensor 'a' twice", e.getMessage());
        Path d = dir.resolve("ckpt");
        e = assertThrows(IllegalArgumentException.class, () -> SafeTensorsStreamWriter.checkpoint(d, List.of(a, a), 100).close());
        assertEquals(d + ": tensor 'a' twice", e.getMessage());
    }

    @Test
    void shardPlanIsSavePretrainedsGreedyCut() {
        // huggingface_hub's split_state_dict_into_shards: a tensor above the limit alone (its shard
        // listed where it comes); one that would take the current shard above the limit starts the
        // next; exactly the limit fits
        Map<String, Long> bytes = new LinkedHashMap<>();
        bytes.put("a", 4L);
        bytes.put("b", 6L);   // 4 + 6 = 10: fits
        bytes.put("c", 1L);   // 11: a new shard
        bytes.put("d", 10L);  // 1 + 10: a new shard; 10 alone fits
        bytes.put("e", 11L);  // above the limit: a shard of its own
        bytes.put("f", 0L);   // 10 + 0 fits with d
        assertEquals(List.of(List.of("a", "b"), List.of("c"), List.of("e"), List.of("d", "f")), SafeTensorsWriter.shardPlan(bytes, 10));
        assertEquals(List.of(List.of()), SafeTensorsWriter.shardPlan(Map.of(), 10));
        assertEquals(List.of(List.of("e")), SafeTensorsWriter.shardPlan(Map.of("e", 11L), 10));
        assertEquals(List.of(List.of("x")), SafeTensorsWriter.shardPlan(Map.of("x", 1L), 1));
        for (long max : new long[] {0, -5}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> SafeTensorsWriter.shardPlan(bytes, max));
            assertEquals("maxShardBytes must be > 0, got " + max, e.getMessage());
        }
        assertEquals(List.of("model.safetensors"), SafeTensorsWriter.shardFileNames(1));
        assertEquals(List.of("model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors", "model-00003-of-00003.safetensors"),
                SafeTensorsWriter.shardFileNames(3));
    }

    @Test
    void widerDtypesComeFirstWhateverTheNames() throws IOException {
        // the reference library sorts by dtype, descending in its enum (F16 < BF16 < F32), then by
        // name: here the names' order is the opposite of the dtypes'
        Map<String, Tensor> t = new LinkedHashMap<>();
        t.put("a", floats(1.5f).to(ScalarType.Half));       // 0x3E00
        t.put("b", floats(1.5f).to(ScalarType.BFloat16));   // 0x3FC0
        t.put("c", floats(3f));
        t.put("d", floats(-2f).to(ScalarType.Half));      // 0xC000
        Path f = dir.resolve("order.safetensors");
        SafeTensorsWriter.write(f, t);
        String json = "{\"__metadata__\":{\"format\":\"pt\"},"
                + "\"c\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                + "\"b\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[4,6]},"
                + "\"a\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[6,8]},"
                + "\"d\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[8,10]}}";
        byte[] j = json.getBytes(StandardCharsets.US_ASCII);
        int pad = (8 - j.length % 8) % 8;
        byte[] expected = concat(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(j.length + pad).array(), j,
                " ".repeat(pad).getBytes(StandardCharsets.US_ASCII), f32(3f), u16((short) 0x3FC0, (short) 0x3E00, (short) 0xC000));
        assertArrayEquals(expected, Files.readAllBytes(f));
        // the layout's size is the file's
        List<SafeTensorsWriter.Spec> specs = List.of(new SafeTensorsWriter.Spec("a", SafeTensors.Dtype.F16, new long[]{1}),
                new SafeTensorsWriter.Spec("b", SafeTensors.Dtype.BF16, new long[]{1}), new SafeTensorsWriter.Spec("c", SafeTensors.Dtype.F32,
                        new long[]{1}), new SafeTensorsWriter.Spec("d", SafeTensors.Dtype.F16, new long[]{1}));
        assertEquals(expected.length, SafeTensorsWriter.layout(f, specs).size());
        assertEquals(40, SafeTensorsWriter.layout(f, List.of()).size());  // 8 + {"__metadata__":{"format":"pt"}}, 32 bytes: no padding
    }

    @Test
    void writeCheckpointReplacesAnEarlierSaveAndListsItsFiles() throws IOException {
        Map<String, Tensor> t = new LinkedHashMap<>();
        t.put("x", floats(1f, 2f));
        t.put("y", floats(3f, 4f));
        Path d = dir.resolve("ckpt");
        List<Path> sharded = SafeTensorsWriter.writeCheckpoint(d, t, 8);
        assertEquals(List.of(d.resolve("model-00001-of-00002.safetensors"), d.resolve("model-00002-of-00002.safetensors"),
                d.resolve("model.safetensors.index.json")), sharded);
        Files.writeString(d.resolve("config.json"), "{}");
        List<Path> single = SafeTensorsWriter.writeCheckpoint(d, t, 16);
        assertEquals(List.of(d.resolve("model.safetensors")), single);
        try (java.util.stream.Stream<Path> s = Files.list(d)) {
            assertEquals(List.of("config.json", "model.safetensors"), s.map(p -> p.getFileName().toString()).sorted().toList());
        }
    }

    /** The lines of /proc/self/maps that map {@code f} (Linux). */
    static List<String> mappings(Path f) throws IOException {
        String name = f.toAbsolutePath().toString();
        return Files.readAllLines(Path.of("/proc/self/maps")).stream().filter(l -> l.endsWith(" " + name)).toList();
    }

    @Test
    void aCheckpointThatFailsToOpenIsUnmapped() throws IOException {
        org.junit.jupiter.api.Assumptions.assumeTrue(Files.isReadable(Path.of("/proc/self/maps")), "Linux's /proc");
        // the first shard opens and is mapped, the second fails its check: both are unmapped
        // before the error reaches the caller, not left to the end of the process
        Path good = dir.resolve("s1.safetensors"), bad = dir.resolve("s2.safetensors");
        Files.write(good, assemble("{" + entry("a", "F32", "[1]", 0, 4) + "}", f32(1)));
        Files.write(bad, assemble("{" + entry("b", "F32", "[1]", 0, 4) + "}", f32(1, 2)));
        Path index = dir.resolve("model.safetensors.index.json");
        Files.writeString(index, "{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s2.safetensors\"}}");
        ModelFileException e = assertThrows(ModelFileException.class, () -> SafeTensors.open(index).close());
        assertEquals(bad.toAbsolutePath() + ": 4 bytes after the end of the last tensor's data", e.getMessage());
        assertEquals(List.of(), mappings(good));
        assertEquals(List.of(), mappings(bad));
        try (SafeTensors st = SafeTensors.open(good)) {
            assertEquals(1, mappings(good).size());  // (the check sees a mapping where there is one)
        }
        assertEquals(List.of(), mappings(good));
    }
}
