// SafeTensorsHeader.java — the header of one safetensors file, validated the way the reference
// (Rust) implementation does: the 8-byte little-endian length, the JSON header (at most 100 MB),
// __metadata__ as strings, each tensor's dtype, shape and data_offsets, and tensors that tile the
// data section exactly. Shared by the checkpoint reader (SafeTensors) and `drmas normalize`'s
// columnar input, which accept different dtypes: the caller says which, with their sizes.
package dev.drmas.model;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

public final class SafeTensorsHeader {
    private SafeTensorsHeader() {
    }

    /** Every dtype of the format with its element size, in the format's own order. */
    public static final Map<String, Integer> ALL_DTYPES = allDtypes();

    /** One tensor: {@code offset} is its first byte in the file (header included), {@code bytes} its length. */
    public record Tensor(String name, String dtype, long[] shape, long offset, long bytes) {
        public long numel() {
            long n = 1;
            for (long d : shape) n *= d;
            return n;
        }
    }

    /** The header: its __metadata__ (empty when absent), the tensors sorted by offset, and where the data starts. */
    public record Parsed(Map<String, String> metadata, List<Tensor> tensors, long dataStart) {
    }

    /**
     * Validates the header of {@code file}, mapped whole as {@code seg}. {@code dtypes} are the
     * dtypes the caller reads, with their element sizes (its order is the one the error lists).
     *
     * @throws ModelFileException naming the file and, where it is one tensor's, the tensor
     */
    public static Parsed parse(Path file, MemorySegment seg, Map<String, Integer> dtypes) {
        long size = seg.byteSize();
        if (size < 8) {
            throw new ModelFileException(file + ": " + size + " bytes, too short for a safetensors file "
                    + "(8-byte header length, JSON header, data)");
        }
        long n = seg.get(ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN), 0);
        if (n < 0 || n > size - 8) {
            throw new ModelFileException(file + ": header length " + Long.toUnsignedString(n) + " exceeds the file size ("
                    + size + " bytes): not a safetensors file, or truncated");
        }
        if (n > SafeTensors.MAX_HEADER_BYTES) {
            throw new ModelFileException(file + ": header length " + n + " is above the " + SafeTensors.MAX_HEADER_BYTES + "-byte limit");
        }
        JsonNode header;
        try {
            header = ModelConfig.JSON.readTree(seg.asSlice(8, n).toArray(ValueLayout.JAVA_BYTE));
        } catch (IOException e) {
            throw new ModelFileException(file + ": header is not valid JSON: " + e.getMessage(), e);
        }
        if (header == null || !header.isObject()) throw new ModelFileException(file + ": header is not a JSON object");

        long dataStart = 8 + n, dataSize = size - dataStart;
        Map<String, String> metadata = new LinkedHashMap<>();
        List<Tensor> tensors = new ArrayList<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = header.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            if (e.getKey().equals("__metadata__")) {
                metadata(file, e.getValue(), metadata);
                continue;
            }
            tensors.add(tensor(file, e.getKey(), e.getValue(), dataStart, dtypes));
        }
        // the tensors must tile the data section: sorted by offset, each starts where the last ended
        tensors.sort(Comparator.comparingLong(Tensor::offset));
        long end = dataStart;
        for (Tensor t : tensors) {
            if (t.offset() != end) {
                throw new ModelFileException(file + ": tensor '" + t.name() + "': data_offsets start at "
                        + (t.offset() - dataStart) + " but the previous tensor ends at " + (end - dataStart)
                        + " (tensors must follow each other without gaps or overlaps)");
            }
            if (t.bytes() > size - t.offset()) {  // (offset + bytes can overflow a long: bytes may be near 2^63)
                throw new ModelFileException(file + ": truncated: tensor '" + t.name() + "' ends at byte "
                        + Long.toUnsignedString(t.offset() - dataStart + t.bytes()) + " of the data section, but the file holds only "
                        + dataSize + " data bytes");
            }
            end = t.offset() + t.bytes();
        }
        if (end != size) {
            throw new ModelFileException(file + ": " + (size - end) + " bytes after the end of the last tensor's data");
        }
        return new Parsed(metadata, List.copyOf(tensors), dataStart);
    }

    private static void metadata(Path file, JsonNode m, Map<String, String> out) {
        if (!m.isObject()) throw new ModelFileException(file + ": __metadata__ must be an object of strings");
        for (Iterator<Map.Entry<String, JsonNode>> it = m.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            if (!e.getValue().isTextual()) {
                throw new ModelFileException(file + ": __metadata__." + e.getKey() + " must be a string, got " + e.getValue());
            }
            out.put(e.getKey(), e.getValue().asText());
        }
    }

    private static Tensor tensor(Path file, String name, JsonNode t, long dataStart, Map<String, Integer> dtypes) {
        String where = file + ": tensor '" + name + "'";
        if (!t.isObject()) throw new ModelFileException(where + ": expected an object with dtype, shape, data_offsets");
        JsonNode dt = t.get("dtype");
        if (dt == null || !dt.isTextual()) throw new ModelFileException(where + ": dtype is missing");
        Integer elem = dtypes.get(dt.asText());
        if (elem == null) {
            throw new ModelFileException(where + ": dtype " + dt.asText() + " is not supported (drmas reads "
                    + String.join(", ", dtypes.keySet()) + ")");
        }
        long[] shape = longs(t.get("shape"), -1, where + ": shape");
        long[] off = longs(t.get("data_offsets"), 2, where + ": data_offsets");
        long bytes;
        try {
            long numel = 1;
            for (long d : shape) numel = Math.multiplyExact(numel, d);
            bytes = Math.multiplyExact(numel, (long) elem);
        } catch (ArithmeticException e) {
            throw new ModelFileException(where + ": shape " + Arrays.toString(shape) + " overflows");
        }
        if (off[1] < off[0] || off[1] - off[0] != bytes) {
            throw new ModelFileException(where + ": data_offsets [" + off[0] + ", " + off[1] + "] hold " + (off[1] - off[0])
                    + " bytes, but " + dt.asText() + " " + Arrays.toString(shape) + " needs " + bytes);
        }
        return new Tensor(name, dt.asText(), shape, dataStart + off[0], bytes);
    }

    /** A JSON array of non-negative integers (of length {@code len} unless negative). */
    private static long[] longs(JsonNode a, int len, String where) {
        if (a == null || !a.isArray() || (len >= 0 && a.size() != len)) {
            throw new ModelFileException(where + " must be a list of " + (len >= 0 ? len + " " : "") + "integers, got " + a);
        }
        long[] out = new long[a.size()];
        for (int i = 0; i < out.length; i++) {
            JsonNode v = a.get(i);
            if (!v.isIntegralNumber() || !v.canConvertToLong() || v.longValue() < 0) {
                throw new ModelFileException(where + "[" + i + "] must be a non-negative integer, got " + v);
            }
            out[i] = v.longValue();
        }
        return out;
    }

    private static Map<String, Integer> allDtypes() {
        Map<String, Integer> m = new LinkedHashMap<>();
        for (String d : List.of("BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3")) m.put(d, 1);
        for (String d : List.of("I16", "U16", "F16", "BF16")) m.put(d, 2);
        for (String d : List.of("I32", "U32", "F32")) m.put(d, 4);
        for (String d : List.of("F64", "I64", "U64")) m.put(d, 8);
        return java.util.Collections.unmodifiableMap(m);
    }
}
