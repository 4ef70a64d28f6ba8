// SafeTensorsHeader.java — the header of one safetensors file, validated the way the reference
// (Rust) implementation does: the 8-byte little-endian length, the JSON header (at most 100 MB),
// __metadata__ as strings, each tensor's dtype, shape and data_offsets, and tensors that tile the
// data section exactly; its errors are drmas's own words with the byte of the file where the fault
// is, never the JSON parser's text. Shared by the checkpoint reader (SafeTensors) and `drmas normalize`'s
// columnar input, which accept different dtypes: the caller says which, with their sizes.
package dev.drmas.model;

import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectReader;
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

    /**
     * Reads one entry's value where the parser stands (strict about duplicate keys, as ModelConfig.JSON
     * is; what follows the value is the next entry, not trailing text).
     */
    private static final ObjectReader TREE = ModelConfig.JSON.reader().without(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);

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
        checkHeaderLength(file, n);
        Parsed h = header(file, seg.asSlice(8, n).toArray(ValueLayout.JAVA_BYTE), dtypes);
        tile(file, h, size);
        return h;
    }

    /** Refuses a header length (unsigned) above the reference implementation's limit, before anything is read. */
    public static void checkHeaderLength(Path file, long n) {
        if (n < 0 || n > SafeTensors.MAX_HEADER_BYTES) {
            throw new ModelFileException(file + ": header length " + Long.toUnsignedString(n) + " is above the "
                    + SafeTensors.MAX_HEADER_BYTES + "-byte limit");
        }
    }

    /**
     * The JSON header {@code json} (the bytes after the 8-byte length) parsed and checked on its
     * own: __metadata__ and each tensor's fields, the tensors sorted by offset. Nothing here needs
     * the data, so a stream's header can be checked before the rest is read; {@link #tile} checks
     * the tensors against the file's size. The errors are drmas's own, "FILE: safetensors header:
     * what is wrong" and the byte of the file where it is (the parser's own text names its classes
     * and a "Source" the user never saw).
     */
    public static Parsed header(Path file, byte[] json, Map<String, Integer> dtypes) {
        String where = file + ": safetensors header: ";
        long dataStart = 8L + json.length;
        Map<String, String> metadata = new LinkedHashMap<>();
        List<Tensor> tensors = new ArrayList<>();
        // a token at a time rather than readTree, so that each entry's place in the file is known
        try (JsonParser p = ModelConfig.JSON.createParser(json)) {
            JsonToken tok = p.nextToken();
            if (tok != JsonToken.START_OBJECT) {
                throw new ModelFileException(where + "not a JSON object (" + (tok == null ? "it is empty"
                        : "it starts with " + kind(tok) + " at byte " + byteOf(p.currentTokenLocation())) + ")");
            }
            while (p.nextToken() == JsonToken.FIELD_NAME) {  // (else END_OBJECT: a parse error is thrown, not returned)
                String key = p.currentName();
                p.nextToken();
                String at = " (the entry at byte " + byteOf(p.currentTokenLocation()) + ")";
                JsonNode v = TREE.readTree(p);
                if (key.equals("__metadata__")) {
                    metadata(where, at, v, metadata);
                } else {
                    tensors.add(tensor(where + "tensor '" + key + "'", at, key, v, dataStart, dtypes));
                }
            }
            if (p.nextToken() != null) {  // (the reference reader refuses it too)
                throw new ModelFileException(where + "text after the JSON object at byte " + byteOf(p.currentTokenLocation()));
            }
        } catch (JsonProcessingException e) {
            long at = e.getLocation() == null ? -1 : byteOf(e.getLocation());
            ModelFileException x = new ModelFileException(where + "not valid JSON (" + JsonProblem.describe(e) + ")" + (at < 0 ? "" : " at byte " + at));
            x.addSuppressed(e);  // for --verbose's stack trace; not a cause, whose text the one-line report would repeat
            throw x;
        } catch (IOException e) {  // (the parser's signature: a byte array is never an I/O error)
            throw new ModelFileException(where + "cannot be read: " + e.getMessage(), e);
        }
        // an empty tensor first where it shares its offset with the next (the reference reader sorts by (start, end))
        tensors.sort(Comparator.comparingLong(Tensor::offset).thenComparingLong(Tensor::bytes));
        return new Parsed(metadata, List.copyOf(tensors), dataStart);
    }

    /**
     * Checks that the tensors of {@code h} tile the data section (sorted by offset, each starting
     * where the last ended) and that a file of {@code size} bytes holds them and nothing after them;
     * {@code size} -1 (a stream not yet read) checks the tiling alone. Returns where the last
     * tensor ends: the size of the file the header describes.
     */
    public static long tile(Path file, Parsed h, long size) {
        long end = h.dataStart(), room = size < 0 ? Long.MAX_VALUE : size;
        for (Tensor t : h.tensors()) {
            if (t.offset() != end) {
                throw new ModelFileException(file + ": tensor '" + t.name() + "': data_offsets start at "
                        + (t.offset() - h.dataStart()) + " but the previous tensor ends at " + (end - h.dataStart())
                        + " (tensors must follow each other without gaps or overlaps)");
            }
            if (t.bytes() > room - t.offset()) {  // (offset + bytes can overflow a long: bytes may be near 2^63)
                throw new ModelFileException(file + ": truncated: tensor '" + t.name() + "' ends at byte "
                        + Long.toUnsignedString(t.offset() - h.dataStart() + t.bytes()) + " of the data section, but "
                        + (size < 0 ? "no file holds that much" : "the file holds only " + (size - h.dataStart()) + " data bytes"));
            }
            end = t.offset() + t.bytes();
        }
        if (size >= 0 && end != size) {
            throw new ModelFileException(file + ": " + (size - end) + " bytes after the end of the last tensor's data");
        }
        return end;
    }

    /** The byte of the file at {@code loc} of the header (which starts at byte 8), or -1 where unknown. */
    private static long byteOf(JsonLocation loc) {
        long b = loc.getByteOffset();
        return b < 0 ? -1 : 8 + b;
    }

    private static String kind(JsonToken t) {
        return switch (t) {
            case START_ARRAY -> "an array";
            case VALUE_STRING -> "a string";
            case VALUE_NUMBER_INT, VALUE_NUMBER_FLOAT -> "a number";
            case VALUE_TRUE, VALUE_FALSE -> "a boolean";
            case VALUE_NULL -> "null";
            default -> "something else";
        };
    }

    /** A JSON value as text for a message, shortened (a wrong value may be megabytes long). */
    private static String shown(JsonNode v) {
        String s = String.valueOf(v);
        if (s.length() <= 60) return s;
        return s.substring(0, 50) + (v.isTextual() ? "...\"" : "...");
    }

    private static void metadata(String where, String at, JsonNode m, Map<String, String> out) {
        if (!m.isObject()) throw new ModelFileException(where + "__metadata__ must be an object of strings, got " + shown(m) + at);
        for (Iterator<Map.Entry<String, JsonNode>> it = m.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            if (!e.getValue().isTextual()) {
                throw new ModelFileException(where + "__metadata__." + e.getKey() + " must be a string, got " + shown(e.getValue()) + at);
            }
            out.put(e.getKey(), e.getValue().asText());
        }
    }

    private static Tensor tensor(String where, String at, String name, JsonNode t, long dataStart, Map<String, Integer> dtypes) {
        if (!t.isObject()) throw new ModelFileException(where + ": expected an object with dtype, shape, data_offsets, got " + shown(t) + at);
        JsonNode dt = t.get("dtype");
        if (dt == null) throw new ModelFileException(where + ": dtype is missing" + at);
        if (!dt.isTextual()) throw new ModelFileException(where + ": dtype must be a string such as \"F32\", got " + shown(dt) + at);
        Integer elem = dtypes.get(dt.asText());
        if (elem == null) {
            String d = dt.asText().length() <= 60 ? dt.asText() : dt.asText().substring(0, 50) + "...";
            throw new ModelFileException(where + ": dtype " + d + " is not supported (drmas reads "
                    + String.join(", ", dtypes.keySet()) + ")" + at);
        }
        long[] shape = longs(t.get("shape"), -1, where + ": shape", at);
        long[] off = longs(t.get("data_offsets"), 2, where + ": data_offsets", at);
        long bytes;
        try {
            long numel = 1;
            for (long d : shape) numel = Math.multiplyExact(numel, d);
            bytes = Math.multiplyExact(numel, (long) elem);
        } catch (ArithmeticException e) {
            throw new ModelFileException(where + ": shape " + Arrays.toString(shape) + " overflows" + at);
        }
        if (off[1] < off[0] || off[1] - off[0] != bytes) {
            throw new ModelFileException(where + ": data_offsets [" + off[0] + ", " + off[1] + "] hold " + (off[1] - off[0])
                    + " bytes, but " + dt.asText() + " " + Arrays.toString(shape) + " needs " + bytes + at);
        }
        return new Tensor(name, dt.asText(), shape, dataStart + off[0], bytes);
    }

    /** A JSON array of non-negative integers (of length {@code len} unless negative). */
    private static long[] longs(JsonNode a, int len, String where, String at) {
        if (a == null || !a.isArray() || (len >= 0 && a.size() != len)) {
            throw new ModelFileException(where + " must be a list of " + (len >= 0 ? len + " " : "") + "integers, got " + shown(a) + at);
        }
        long[] out = new long[a.size()];
        for (int i = 0; i < out.length; i++) {
            JsonNode v = a.get(i);
            if (!v.isIntegralNumber() || !v.canConvertToLong() || v.longValue() < 0) {
                throw new ModelFileException(where + "[" + i + "] must be a non-negative integer, got " + shown(v) + at);
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
