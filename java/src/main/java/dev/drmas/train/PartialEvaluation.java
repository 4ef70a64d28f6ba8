// PartialEvaluation.java — the chunks of a `drmas eval` done so far, kept in the run folder
// (eval/step_N.<fingerprint>.partial.jsonl) as each ends, so that an evaluation of hours stopped
// part-way (a crash, an out-of-memory kill, a lost node) continues from its last whole chunk when it
// is run again, instead of from the start. The fingerprint is of what decides the results (the
// settings that reach generation and grading, the weights, the ranks, the chunk size, the tasks), so
// another evaluation of the step (a smoke test with fewer tasks, another chunk size) keeps its own
// file and leaves this one be. The first line repeats the fingerprint, each further line is one
// chunk's summed results; a line cut short by the stop is dropped.
package dev.drmas.train;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

final class PartialEvaluation {
    private static final ObjectMapper JSON = new ObjectMapper();

    private final Path file;
    private final String fingerprint;

    private PartialEvaluation(Path file, String fingerprint) {
        this.file = file;
        this.fingerprint = fingerprint;
    }

    /** The file of the evaluation {@code fingerprint} names: {@code prefix} (eval/step_N) + its first 16 digits. */
    static PartialEvaluation of(Path prefix, String fingerprint) {
        return new PartialEvaluation(prefix.resolveSibling(prefix.getFileName() + "." + fingerprint.substring(0, 16) + SUFFIX), fingerprint);
    }

    private static final String SUFFIX = ".partial.jsonl";

    /** A hash of what decides an evaluation's results; the same parts give the same fingerprint. */
    static String fingerprint(String... parts) {
        try {
            var md = java.security.MessageDigest.getInstance("SHA-256");
            for (String p : parts) {
                md.update(String.valueOf(p).getBytes(StandardCharsets.UTF_8));
                md.update((byte) 0);
            }
            return HexFormat.of().formatHex(md.digest());
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);  // every JDK has SHA-256
        }
    }

    Path file() {
        return file;
    }

    /** The first {@code chunks} chunks' totals: tasks' correct counts, and the workload's sums with the episodes last. */
    record Loaded(int chunks, double[] correct, double[] sums) {
    }

    /**
     * The chunks kept in the file, in order from the first, of an evaluation of {@code chunks} chunks
     * over {@code tasks} tasks with {@code names} workload sums; the file is then rewritten with them
     * alone (a line cut short, or a file whose first line is not the fingerprint, is not appended to).
     * Says on {@code log} what it continues from, or why it starts over, and which files of other
     * evaluations of the step it leaves.
     */
    Loaded load(int chunks, int tasks, int names, PrintStream log) {
        double[] correct = new double[tasks], sums = new double[names + 1];
        List<String> kept = new ArrayList<>();
        int done = 0;
        String why = null;
        List<String> lines;
        try {
            // bytes that are not UTF-8 (a damaged file) only fail their line's JSON
            lines = new String(Files.readAllBytes(file), StandardCharsets.UTF_8).lines().toList();
        } catch (NoSuchFileException e) {
            lines = List.of();
        } catch (IOException e) {
            throw new UncheckedIOException("reading " + file + ": " + e.getMessage(), e);
        }
        if (!lines.isEmpty()) {
            JsonNode head = parse(lines.getFirst());
            if (head == null || !fingerprint.equals(head.path("fingerprint").asText())) {
                why = "its first line is not this evaluation's fingerprint: starting over";
            } else {
                for (String line : lines.subList(1, lines.size())) {
                    JsonNode c = parse(line);
                    if (c == null || c.path("chunk").asInt(-1) != done || done >= chunks) break;  // cut short by the stop
                    int first = c.path("first").asInt(), n = c.path("correct").size();
                    if (first < 0 || first + n > tasks || c.path("sums").size() != names + 1) break;
                    for (int i = 0; i < n; i++) correct[first + i] = c.path("correct").get(i).asDouble();
                    for (int i = 0; i <= names; i++) sums[i] = c.path("sums").get(i).asDouble();  // totals so far
                    kept.add(line);
                    done++;
                }
            }
        }
        if (why != null) log.println("eval: " + file + ": " + why);
        else if (done > 0) log.printf("eval: continuing from %s: %d of %d chunks done%n", file, done, chunks);
        List<Path> others = others();
        if (!others.isEmpty()) {
            log.println("eval: left as they are, of other evaluations of this step (other settings, weights, ranks, chunk size or"
                    + " tasks): " + others.stream().map(p -> p.getFileName().toString()).sorted().toList());
        }
        rewrite(kept);
        return new Loaded(done, correct, sums);
    }

    /** Appends chunk {@code c}'s line (its tasks from {@code first}, their counts, the sums so far) and forces it to disk. */
    void append(int c, int first, double[] correct, List<String> names, double[] sumsSoFar) {
        ObjectNode o = JSON.createObjectNode();
        o.put("chunk", c).put("first", first);
        ArrayNode a = o.putArray("correct");
        for (double v : correct) a.add((int) v);
        ArrayNode s = o.putArray("sums");  // the workload's sums in the order of names, then the episodes: totals so far
        for (double v : sumsSoFar) s.add(v);
        o.putArray("names").addAll(names.stream().map(JSON.getNodeFactory()::textNode).toList());
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.WRITE, StandardOpenOption.APPEND)) {
            writeAll(ch, o + "\n");
        } catch (IOException e) {
            throw new UncheckedIOException("writing " + file + ": " + e.getMessage(), e);
        }
    }

    // the partial files of the same step beside this one
    private List<Path> others() {
        String name = file.getFileName().toString(), step = name.substring(0, name.length() - SUFFIX.length() - 17);
        try (var s = Files.list(file.getParent())) {
            return s.filter(p -> {
                String n = p.getFileName().toString();
                return n.startsWith(step + ".") && n.endsWith(SUFFIX) && n.length() == name.length() && !n.equals(name);
            }).toList();
        } catch (IOException e) {
            return List.of();  // only a note
        }
    }

    // the fingerprint line and the chunks kept, through a temporary file renamed into place
    private void rewrite(List<String> chunkLines) {
        ObjectNode head = JSON.createObjectNode().put("fingerprint", fingerprint);
        List<String> lines = new ArrayList<>();
        lines.add(head.toString());
        lines.addAll(chunkLines);
        try {
            Files.createDirectories(file.getParent());
            Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
            Files.deleteIfExists(tmp);
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                writeAll(ch, String.join("\n", lines) + "\n");
            }
            Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            throw new UncheckedIOException("writing " + file + ": " + e.getMessage(), e);
        }
    }

    /** Writes all of {@code text} (a write may take part of it: a full disk) and forces it to disk. */
    static void writeAll(FileChannel ch, String text) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(text.getBytes(StandardCharsets.UTF_8));
        while (b.hasRemaining()) ch.write(b);
        ch.force(true);
    }

    private static JsonNode parse(String line) {
        try {
            JsonNode n = JSON.readTree(line);
            return n != null && n.isObject() ? n : null;
        } catch (IOException e) {
            return null;
        }
    }
}
