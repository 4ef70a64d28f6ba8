// ScoredRows.java — the rows of a `drmas normalize` input: one JSON object per line with uid,
// traj, agent (strings or integers) and score (a number). Reads the whole file before anything
// is written, so that a malformed line is reported (file:line and field) with no partial output.
// Keys become dense ids in order of first appearance; a trajectory id is scoped by its uid,
// so files that number rollouts 0..N-1 within each task work as they are.
package dev.drmas.cli;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

final class ScoredRows {
    /** Keeps numbers as written (0.1 stays 0.1, 1.0 stays 1.0) when rows are echoed back. */
    static final ObjectMapper JSON = new ObjectMapper()
            .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
            // {"score": 1, "score": 0} is an error, not "the last one wins"
            .enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION)
            .setNodeFactory(JsonNodeFactory.withExactBigDecimals(true));

    final String source;
    final List<ObjectNode> objects = new ArrayList<>();
    final List<String> agentNames = new ArrayList<>();
    float[] scores;
    int[] uid;
    int[] traj;
    int[] agent;
    int numUids;
    int numTrajs;

    private ScoredRows(String source) {
        this.source = source;
    }

    int size() {
        return objects.size();
    }

    int numAgents() {
        return agentNames.size();
    }

    static ScoredRows read(Path input) {
        boolean stdin = input.toString().equals("-");
        String name = stdin ? "<stdin>" : input.toString();
        if (!stdin && Files.isDirectory(input)) throw new UserError(name + ": is a folder, not a JSONL file");
        try (InputStream in = stdin ? StdStreams.stdin() : Files.newInputStream(input)) {
            return read(name, in);
        } catch (NoSuchFileException e) {
            throw new UserError(name + ": no such file");
        } catch (IOException e) {
            throw new UserError(name + ": cannot read: " + Errors.reason(e), e);
        }
    }

    static ScoredRows read(String name, InputStream input) throws IOException {
        ScoredRows rows = new ScoredRows(name);
        Map<String, Integer> uids = new HashMap<>(), trajs = new HashMap<>(), agents = new HashMap<>();
        List<Float> scores = new ArrayList<>();
        List<int[]> keys = new ArrayList<>();
        BufferedInputStream in = new BufferedInputStream(input, 1 << 16);
        // a decoder that reports bad bytes (a Reader with a charset silently replaces them), one line at a time
        // so that the error can name the line
        CharsetDecoder utf8 = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT);
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        String line;
        int lineNo = 0;
        while ((line = nextLine(in, bytes, utf8, name, lineNo + 1)) != null) {
            lineNo++;
            if (line.isBlank()) continue;
            String where = name + ":" + lineNo;
            JsonNode node;
            try {
                node = JSON.readTree(line);
            } catch (JsonProcessingException e) {
                throw new UserError(where + ": not valid JSON: " + e.getOriginalMessage());
            }
            if (!(node instanceof ObjectNode obj)) {
                throw new UserError(where + ": expected a JSON object, got " + node.getNodeType().toString().toLowerCase());
            }
            String u = key(obj, "uid", where);
            String t = u + "\u0000" + key(obj, "traj", where);
            String a = key(obj, "agent", where);
            JsonNode s = obj.get("score");
            if (s == null) throw new UserError(where + ": field 'score' is missing");
            if (!s.isNumber()) throw new UserError(where + ": field 'score' must be a number, got " + s);
            double v = s.doubleValue();
            if (!Double.isFinite(v) || Math.abs(v) > Float.MAX_VALUE) {
                throw new UserError(where + ": field 'score' = " + s + " is not a finite float");
            }
            if (obj.has("advantage")) throw new UserError(where + ": the row already has a field 'advantage'");
            int ui = uids.computeIfAbsent(u, k -> uids.size());
            int ti = trajs.computeIfAbsent(t, k -> trajs.size());
            Integer ai = agents.get(a);
            if (ai == null) {
                ai = agents.size();
                agents.put(a, ai);
                rows.agentNames.add(a.substring(2));
            }
            keys.add(new int[] {ui, ti, ai});
            scores.add((float) v);
            rows.objects.add(obj);
        }
        int n = rows.objects.size();
        rows.scores = new float[n];
        rows.uid = new int[n];
        rows.traj = new int[n];
        rows.agent = new int[n];
        for (int i = 0; i < n; i++) {
            rows.scores[i] = scores.get(i);
            rows.uid[i] = keys.get(i)[0];
            rows.traj[i] = keys.get(i)[1];
            rows.agent[i] = keys.get(i)[2];
        }
        rows.numUids = uids.size();
        rows.numTrajs = trajs.size();
        return rows;
    }

    /** The next line without its \n (and \r), or null at the end; bytes that are not UTF-8 are an error naming the line. */
    private static String nextLine(BufferedInputStream in, ByteArrayOutputStream buf, CharsetDecoder utf8, String name, int lineNo)
            throws IOException {
        buf.reset();
        int b;
        while ((b = in.read()) != -1 && b != '\n') buf.write(b);
        if (b == -1 && buf.size() == 0) return null;
        byte[] raw = buf.toByteArray();
        int n = raw.length > 0 && raw[raw.length - 1] == '\r' ? raw.length - 1 : raw.length;
        try {
            return utf8.reset().decode(ByteBuffer.wrap(raw, 0, n)).toString();
        } catch (CharacterCodingException e) {
            int at = firstBadByte(raw, n);
            throw new UserError(name + ":" + lineNo + ": not UTF-8 text (byte " + (at + 1) + " of the line, 0x"
                    + String.format("%02x", raw[at] & 0xff) + ", is not valid UTF-8)");
        }
    }

    private static int firstBadByte(byte[] raw, int n) {
        CharsetDecoder d = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT);
        ByteBuffer in = ByteBuffer.wrap(raw, 0, n);
        var r = d.decode(in, java.nio.CharBuffer.allocate(n + 1), true);
        return r.isError() ? in.position() : 0;
    }

    // A key is a string or an integer; the type is part of the key ("1" and 1 differ).
    private static String key(ObjectNode obj, String field, String where) {
        JsonNode k = obj.get(field);
        if (k == null) throw new UserError(where + ": field '" + field + "' is missing");
        if (k.isTextual()) return "s:" + k.textValue();
        if (k.isIntegralNumber()) return "i:" + k.bigIntegerValue();
        throw new UserError(where + ": field '" + field + "' must be a string or an integer, got " + k);
    }
}
