// OutputSafetyTest.java — the CLI's input and output under hostile conditions (issue 20, cases 1–3
// and the normalize list): -o on a device, a FIFO, a symbolic link and an existing file keeps what
// it points at and its mode; write errors and closed or broken standard streams end non-zero with
// a message naming the output, in child JVMs with real descriptors; a closed stdin is refused (it
// crashed the JVM); duplicate keys and bad UTF-8 are named by line; a temporary file never stays;
// a safetensors output, computed into a mapping of the new file, meets a file-size limit or a full
// file system with an error, not a SIGBUS.
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

class OutputSafetyTest {
    @TempDir
    Path dir;

    static final String ROWS = """
            {"uid": "q1", "traj": 0, "agent": "solver", "score": 1.0}
            {"uid": "q1", "traj": 0, "agent": "verifier", "score": 0.5}
            {"uid": "q1", "traj": 1, "agent": "solver", "score": 0}
            {"uid": "q1", "traj": 1, "agent": "verifier", "score": 0.25}
            """;

    record Run(int exit, String err) {
    }

    static Run run(String... args) {
        StringWriter err = new StringWriter();
        var cl = Main.commandLine();
        cl.setErr(new PrintWriter(err));
        return new Run(cl.execute(args), err.toString());
    }

    Path rows() throws Exception {
        Path p = dir.resolve("rows.jsonl");
        if (!Files.exists(p)) Files.writeString(p, ROWS);
        return p;
    }

    /** Names in {@code dir} other than the given ones (a temporary file left behind shows up here). */
    List<String> others(String... expected) throws Exception {
        try (Stream<Path> s = Files.list(dir)) {
            return s.map(p -> p.getFileName().toString()).filter(n -> !List.of(expected).contains(n)).sorted().toList();
        }
    }

    static boolean run(List<String> cmd) throws Exception {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        p.getInputStream().readAllBytes();
        return p.waitFor() == 0;
    }

    @Test
    void outputToADeviceIsWrittenInPlaceAndItsErrorsReported() throws Exception {
        // a private copy of /dev/full (major 1, minor 7): renaming over it, as the old code did, would
        // only replace this node, never the machine's /dev/full
        Path full = dir.resolve("full");
        assumeTrue(run(List.of("mknod", full.toString(), "c", "1", "7")), "mknod needs root; skipped");
        Run r = run("normalize", "--mode", "drmas", "-o", full.toString(), rows().toString());
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains(full + ": cannot write: No space left on device"), r.err());
        assertFalse(Files.isRegularFile(full, LinkOption.NOFOLLOW_LINKS), "the device node was replaced by a file");
        assertEquals(List.of(), others("full", "rows.jsonl"));
    }

    @Test
    @Timeout(30)
    void outputToAFifoGoesToItsReader() throws Exception {
        Path fifo = dir.resolve("fifo");
        assumeTrue(run(List.of("mkfifo", fifo.toString())), "mkfifo failed; skipped");
        CompletableFuture<String> reader = CompletableFuture.supplyAsync(() -> {
            try {
                return Files.readString(fifo);
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
        Run r = run("normalize", "--mode", "drmas", "-o", fifo.toString(), rows().toString());
        assertEquals(0, r.exit(), r.err());
        assertEquals(4, reader.get(20, TimeUnit.SECONDS).lines().count(), "the reader got every row");
        assertFalse(Files.isRegularFile(fifo, LinkOption.NOFOLLOW_LINKS), "the FIFO was replaced by a file");
    }

    @Test
    void aLinkStaysALinkAndFilesKeepTheirMode() throws Exception {
        Path target = dir.resolve("target.jsonl"), link = dir.resolve("link.jsonl");
        Files.writeString(target, "old\n");
        Files.setPosixFilePermissions(target, PosixFilePermissions.fromString("rw-r-----"));
        Files.createSymbolicLink(link, target.getFileName());
        Run r = run("normalize", "--mode", "drmas", "-o", link.toString(), rows().toString());
        assertEquals(0, r.exit(), r.err());
        assertTrue(Files.isSymbolicLink(link), "-o on a link replaced the link");
        assertEquals(4, Files.readAllLines(target).size(), "the link's target holds the output");
        assertEquals("rw-r-----", PosixFilePermissions.toString(Files.getPosixFilePermissions(target)), "mode kept");
        // a new file gets the umask's mode like any other, not createTempFile's 0600
        Path fresh = dir.resolve("fresh.jsonl");
        assertEquals(0, run("normalize", "--mode", "drmas", "-o", fresh.toString(), rows().toString()).exit());
        assertTrue(Files.getPosixFilePermissions(fresh).contains(java.nio.file.attribute.PosixFilePermission.OTHERS_READ)
                || !Files.getPosixFilePermissions(dir).contains(java.nio.file.attribute.PosixFilePermission.OTHERS_READ),
                "new output mode " + PosixFilePermissions.toString(Files.getPosixFilePermissions(fresh)));
        assertEquals(List.of(), others("target.jsonl", "link.jsonl", "rows.jsonl", "fresh.jsonl"));
    }

    @Test
    void anImmutableOutputLeavesNoTemporaryFile() throws Exception {
        Path out = dir.resolve("frozen.jsonl");
        Files.writeString(out, "old\n");
        assumeTrue(run(List.of("chattr", "+i", out.toString())), "chattr +i needs root and ext2/3/4; skipped");
        try {
            Run r = run("normalize", "--mode", "drmas", "-o", out.toString(), rows().toString());
            assertEquals(1, r.exit(), r.err());
            assertTrue(r.err().contains(out + ": cannot write"), r.err());
            assertEquals("old\n", Files.readString(out));
            assertEquals(List.of(), others("frozen.jsonl", "rows.jsonl"), "the temporary file was left behind");
        } finally {
            run(List.of("chattr", "-i", out.toString()));
        }
    }

    @Test
    @Timeout(120)
    void aSafetensorsOutputTheDiskCannotHoldIsAnErrorNotACrash() throws Exception {
        // The advantages are computed into a mapping of the new file; a page the disk cannot back
        // would be a SIGBUS in native code. Its blocks are reserved first, so a file-size limit (as a
        // full disk) is an error naming the output before anything is computed, with no file left.
        var rows = NormalizeSafetensorsTest.Rows.make(2500, 3);  // ~100K rows: ~400 KB of advantages
        Path in = dir.resolve("rows.safetensors");
        Files.write(in, NormalizeSafetensorsTest.saveFile(rows.tensors(false, false)));
        Child.Result r = Child.shell(dir, "ulimit -f 256;", "", 60, "normalize", "--mode", "drmas", "-o", "adv.safetensors", in.toString());
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains("adv.safetensors: cannot write: File too large"), r.err());
        assertEquals(List.of(), others("rows.safetensors"), "no output and no temporary file");
        // without the limit the same command writes it
        Child.Result ok = Child.shell(dir, "", "", 60, "normalize", "--mode", "drmas", "-o", "adv.safetensors", in.toString());
        assertEquals(0, ok.exit(), ok.err());
        assertTrue(Files.size(dir.resolve("adv.safetensors")) > 4L * rows.uid().length);
    }

    @Test
    @Timeout(120)
    void aFullDiskUnderTheMappedOutputIsAnErrorNotACrash() throws Exception {
        // A full file system (a 256 KiB tmpfs) under a ~400 KB output: without the reservation the
        // kernel's first store past the free space was a SIGBUS in libdrmas, and the JVM died.
        Path tiny = Files.createDirectory(dir.resolve("tiny"));
        assumeTrue(run(List.of("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", tiny.toString())),
                "mounting a tmpfs needs root (CAP_SYS_ADMIN); skipped");
        try {
            var rows = NormalizeSafetensorsTest.Rows.make(2500, 3);
            Path in = dir.resolve("rows.safetensors");
            Files.write(in, NormalizeSafetensorsTest.saveFile(rows.tensors(false, false)));
            Path out = tiny.resolve("adv.safetensors");
            Child.Result r = Child.shell(dir, "", "", 60, "normalize", "--mode", "drmas", "-o", out.toString(), in.toString());
            assertEquals(1, r.exit(), r.err());
            assertTrue(r.err().contains(out + ": cannot write: No space left on device"), r.err());
            try (Stream<Path> left = Files.list(tiny)) {
                assertEquals(List.of(), left.toList(), "no output and no temporary file");
            }
            // the same through the chunked path (sorted rows in chunks, written with positional writes)
            Run chunked = NormalizeSafetensorsTest.withChunkRows(1000,
                    () -> run("normalize", "--mode", "drmas", "-o", out.toString(), in.toString()));
            assertEquals(1, chunked.exit(), chunked.err());
            assertTrue(chunked.err().contains(out + ": cannot write: No space left on device"), chunked.err());
            try (Stream<Path> left = Files.list(tiny)) {
                assertEquals(List.of(), left.toList(), "no output and no temporary file");
            }
        } finally {
            run(List.of("umount", tiny.toString()));
        }
    }

    @Test
    void fileSpaceReservesAFilesBlocksHere() throws Exception {
        Path f = Files.createFile(dir.resolve("space.bin"));
        assertTrue(FileSpace.reserve(f, 3 << 20), "posix_fallocate links and works on this Linux file system");
        assertEquals(3 << 20, Files.size(f));
        Process p = new ProcessBuilder("stat", "-c", "%b %B", f.toString()).start();
        String[] st = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim().split(" ");
        assertEquals(0, p.waitFor());
        assertTrue(Long.parseLong(st[0]) * Long.parseLong(st[1]) >= 3 << 20, "blocks allocated: " + String.join(" ", st));
    }

    @Test
    @Timeout(120)
    void aFullOrClosedStdoutIsAnErrorNamingIt() throws Exception {
        String in = rows().toString();
        Child.Result full = Child.shell(dir, "", "> /dev/full", 60, "normalize", "--mode", "drmas", in);
        assertEquals(1, full.exit(), full.err());
        assertTrue(full.err().contains("cannot write to standard output: No space left on device"), full.err());

        Child.Result closed = Child.shell(dir, "", ">&-", 60, "normalize", "--mode", "drmas", in);
        assertEquals(1, closed.exit(), closed.err());
        assertTrue(closed.err().contains("cannot write to standard output: it was closed when drmas started"), closed.err());
    }

    @Test
    @Timeout(120)
    void aBrokenPipeStopsTheCommand() throws Exception {
        // enough rows that the output outlives the pipe's 64 KiB buffer
        StringBuilder many = new StringBuilder();
        for (int i = 0; i < 20000; i++) many.append("{\"uid\": ").append(i / 4).append(", \"traj\": ").append(i % 2)
                .append(", \"agent\": \"a").append(i % 4 / 2).append("\", \"score\": ").append(i % 3).append("}\n");
        Path in = dir.resolve("many.jsonl");
        Files.writeString(in, many);
        Process p = new ProcessBuilder(Child.command("normalize", "--mode", "drmas", in.toString())).start();
        BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        assertTrue(out.readLine().startsWith("{\"uid\":0"));
        out.close();  // `| head -1`
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the command went on writing into a closed pipe");
        String err = new String(p.getErrorStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(1, p.exitValue(), err);
        assertTrue(err.contains("cannot write to standard output: Broken pipe"), err);
    }

    @Test
    @Timeout(120)
    void aClosedStdinIsRefusedWithoutCrashingTheJvm() throws Exception {
        // with fd 0 closed the JVM's class image took descriptor 0: reading it as rows and closing it
        // ended in a segfault (exit 139)
        Child.Result r = Child.shell(dir, "", "<&-", 60, "normalize", "--mode", "drmas", "-");
        assertNotEquals(139, r.exit(), r.err());
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains("<stdin>: standard input is closed"), r.err());
        // and stdin that is open is read as before
        rows();
        Child.Result piped = Child.shell(dir, "", "< rows.jsonl", 60, "normalize", "--mode", "drmas", "-");
        assertEquals(0, piped.exit(), piped.err());
        assertEquals(4, piped.out().lines().count());
    }

    @Test
    void duplicateKeysAndBadUtf8AreNamedByLine() throws Exception {
        Path dup = dir.resolve("dup.jsonl");
        Files.writeString(dup, ROWS + "{\"uid\": 2, \"traj\": 0, \"agent\": \"a\", \"score\": 1, \"score\": 0}\n");
        Run r = run("normalize", "--mode", "drmas", dup.toString());
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains(dup + ":5: not valid JSON: Duplicate field 'score'"), r.err());

        Path bad = dir.resolve("latin1.jsonl");
        byte[] line = "{\"uid\": \"caf\u00e9\", \"traj\": 0, \"agent\": \"a\", \"score\": 1}\n".getBytes(StandardCharsets.ISO_8859_1);
        byte[] text = (ROWS + ROWS).getBytes(StandardCharsets.UTF_8);
        byte[] all = new byte[text.length + line.length];
        System.arraycopy(text, 0, all, 0, text.length);
        System.arraycopy(line, 0, all, text.length, line.length);
        Files.write(bad, all);
        r = run("normalize", "--mode", "drmas", bad.toString());
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains(bad + ":9: not UTF-8 text (byte 13 of the line, 0xe9"), r.err());
    }

    @Test
    void summaryTreatsARoundingSizedStdAsZero() throws Exception {
        // trajectory means 0.7 and (0.6 + 0.8) / 2 are the same number up to float32 rounding: the group
        // std is ~1e-8 and the inflation factor was reported as ~1e15
        Path in = dir.resolve("round.jsonl");
        Files.writeString(in, """
                {"uid": 1, "traj": 0, "agent": "a", "score": 0.7}
                {"uid": 1, "traj": 0, "agent": "b", "score": 0.7}
                {"uid": 1, "traj": 1, "agent": "a", "score": 0.6}
                {"uid": 1, "traj": 1, "agent": "b", "score": 0.8}
                """);
        var saved = System.err;
        var captured = new java.io.ByteArrayOutputStream();
        System.setErr(new java.io.PrintStream(captured, true, StandardCharsets.UTF_8));
        Run r;
        try {
            r = run("normalize", "--mode", "grpo", "--summary", "-o", dir.resolve("o.jsonl").toString(), in.toString());
        } finally {
            System.setErr(saved);
        }
        assertEquals(0, r.exit(), r.err());
        String summary = captured.toString(StandardCharsets.UTF_8);
        assertEquals(2, summary.lines().filter(l -> l.startsWith("  a ") || l.startsWith("  b ")).count(), summary);
        for (String row : summary.lines().filter(l -> l.startsWith("  a ") || l.startsWith("  b ")).toList()) {
            assertTrue(row.matches(".*NaN\\s+NaN\\s*"), "the factor is undefined, not huge: " + summary);
        }
    }
    /**
     * A regular file under /dev (tmpfs /dev/shm) is replaced by rename like any other: a shorter new
     * output leaves no tail of the old one. (All of /dev was written in place without truncation.)
     */
    @Test
    void aRegularFileUnderDevIsReplacedWhole() throws Exception {
        Path shm = Path.of("/dev/shm");
        assumeTrue(Files.isDirectory(shm) && Files.isWritable(shm), "no writable /dev/shm; skipped");
        Path out = shm.resolve("drmas-output-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime() + ".jsonl");
        try {
            Files.writeString(out, "x".repeat(10_000) + "\n");
            Run r = run("normalize", "--mode", "drmas", "-o", out.toString(), rows().toString());
            assertEquals(0, r.exit(), r.err());
            String got = Files.readString(out);
            assertEquals(4, got.lines().count(), got.length() > 400 ? got.substring(0, 400) : got);
            assertFalse(got.contains("xxx"), "the old file's tail is left");
            try (Stream<Path> s = Files.list(shm)) {
                assertEquals(List.of(), s.filter(f -> f.getFileName().toString().startsWith("." + out.getFileName())).toList(),
                        "a temporary file is left");
            }
        } finally {
            Files.deleteIfExists(out);
        }
    }

    /** -o /dev/stdout with stdout appended to a file: the rows follow what the file held (it was overwritten from byte 0). */
    @Test
    @Timeout(120)
    void devStdoutAppendedToAFileFollowsItsContent() throws Exception {
        Path log = dir.resolve("log.txt");
        Files.writeString(log, "first line\n");
        Child.Result r = Child.shell(dir, "", ">> " + log, 60, "normalize", "--mode", "drmas", "-o", "/dev/stdout", rows().toString());
        assertEquals(0, r.exit(), r.err());
        List<String> lines = Files.readAllLines(log);
        assertEquals(5, lines.size(), String.join("\n", lines));
        assertEquals("first line", lines.get(0));
        assertTrue(lines.get(1).contains("\"advantage\""), lines.get(1));
    }

    /**
     * The names of open descriptors are written in place (a rename would replace the device's link or
     * the file behind the descriptor); a name that only looks like one is replaced by rename.
     */
    @Test
    void descriptorNamesAreWrittenInPlaceAndOtherNamesReplaced() {
        for (String p : new String[] {"/dev/stdout", "/dev/stderr", "/dev/fd/7", "/proc/self/fd/9", "/proc/thread-self/fd/9",
                "/proc/4242/fd/3"}) {
            assertFalse(OutputFile.replacesByRename(Path.of(p)), p);
        }
        for (Path p : new Path[] {dir.resolve("out.jsonl"), dir.resolve("proc/self/fd/3"), Path.of("/proc/selfish/fd/3"),
                Path.of("/proc/self/fdx/3"), Path.of("/proc/12a/fd/3"), Path.of("/dev/fdx")}) {
            assertTrue(OutputFile.replacesByRename(p), p.toString());
        }
    }

    @Test
    @Timeout(value = 60, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)  // a loop that is followed for ever fails, not hangs
    void aLoopOfLinksIsAnErrorNamingTheOutput() throws Exception {
        Path a = dir.resolve("a.jsonl"), b = dir.resolve("b.jsonl");
        Files.createSymbolicLink(a, b.getFileName());
        Files.createSymbolicLink(b, a.getFileName());
        Run r = run("normalize", "--mode", "drmas", "-o", a.toString(), rows().toString());
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains(a + ": cannot follow the link: too many levels of symbolic links"), r.err());
        assertTrue(Files.isSymbolicLink(a) && Files.isSymbolicLink(b), "the links are left as they were");
    }
    /**
     * "-o -" is stdout, as "-" is stdin for the input (it wrote a regular file named "-", which a
     * later "normalize -" would not read); "./-" names such a file.
     */
    @Test
    @Timeout(120)
    void dashOutputIsStdout() throws Exception {
        Path want = dir.resolve("want.jsonl");
        assertEquals(0, run("normalize", "--mode", "drmas", "-o", want.toString(), rows().toString()).exit());
        Child.Result r = Child.shell(dir, "", "> stdout.jsonl", 60, "normalize", "--mode", "drmas", "-o", "-", "rows.jsonl");
        assertEquals(0, r.exit(), r.err());
        assertEquals(Files.readString(want), Files.readString(dir.resolve("stdout.jsonl")));
        assertFalse(Files.exists(dir.resolve("-"), LinkOption.NOFOLLOW_LINKS), "no file named -");
        // safetensors too (its output is written whole to stdout, not to a file)
        Path st = dir.resolve("rows.safetensors"), wantSt = dir.resolve("want.safetensors");
        NormalizeSafetensorsTest.Rows rs = NormalizeSafetensorsTest.Rows.make(9, 3);
        Files.write(st, NormalizeSafetensorsTest.saveFile(rs.tensors(false, false)));
        assertEquals(0, run("normalize", "--mode", "drmas", "-o", wantSt.toString(), st.toString()).exit());
        r = Child.shell(dir, "", "> stdout.safetensors", 60, "normalize", "--mode", "drmas", "-o", "-", "rows.safetensors");
        assertEquals(0, r.exit(), r.err());
        org.junit.jupiter.api.Assertions.assertArrayEquals(Files.readAllBytes(wantSt), Files.readAllBytes(dir.resolve("stdout.safetensors")));
        assertFalse(Files.exists(dir.resolve("-"), LinkOption.NOFOLLOW_LINKS), "no file named -");
        // a file named "-" is still there to write, by a path that is not "-"
        r = Child.shell(dir, "", "", 60, "normalize", "--mode", "drmas", "-o", "./-", "rows.jsonl");
        assertEquals(0, r.exit(), r.err());
        assertEquals("", r.out());
        assertEquals(Files.readString(want), Files.readString(dir.resolve("-")));
    }

    /** An output whose folder is a regular file says so (it said "...: already exists"); nothing is written. */
    @Test
    void anOutputUnderARegularFileSaysItIsNotAFolder() throws Exception {
        Path file = rows();
        for (Path out : new Path[] {file.resolve("x.jsonl"), file.resolve("sub").resolve("x.jsonl")}) {
            Run r = run("normalize", "--mode", "drmas", "-o", out.toString(), file.toString());
            assertEquals(1, r.exit(), r.err());
            assertTrue(r.err().contains(out + ": cannot write: " + file + " is a file, not a folder"), r.err());
            assertFalse(r.err().contains("already exists"), r.err());
            assertEquals(ROWS, Files.readString(file));
            assertEquals(List.of(), others("rows.jsonl"));
        }
    }
}
