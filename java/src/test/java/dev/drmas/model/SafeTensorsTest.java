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
        assertRejected(assemble("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],", new byte[24]), "header is not valid JSON");
        assertRejected(assemble("[1, 2]", new byte[0]), "header is not a JSON object");
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
}
