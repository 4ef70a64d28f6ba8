// StdStreams.java — the command's standard streams, made to fail loudly. System.out swallows write
// errors (a full disk, a closed pipe) and the command would end 0 with its output lost; here every
// failed write throws OutputFailure, naming the output. A standard stream that was closed when the
// JVM started is worse: the JVM's own first files (its lib/modules image) take its descriptor, so
// reading "stdin" reads the JDK and closing it pulls the class image from under the JVM (a
// segfault); such a stream is recognised by where its descriptor points and refused.
package dev.drmas.cli;

import java.io.BufferedOutputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.FilterInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;

final class StdStreams {
    private StdStreams() {
    }

    /** A write to one of the command's outputs failed; {@link #target} names it. */
    static final class OutputFailure extends UncheckedIOException {
        final String target;

        OutputFailure(String target, IOException cause) {
            super("cannot write to " + target + ": " + Errors.reason(cause), cause);
            this.target = target;
        }
    }

    /**
     * Whether descriptor {@code fd} (0, 1 or 2) was closed when the JVM started: it is absent, or
     * it points into the JDK (the descriptor was reused for the JVM's own files).
     */
    static boolean wasClosed(int fd) {
        Path link = Path.of("/proc/self/fd/" + fd);
        if (!Files.exists(Path.of("/proc/self/fd"))) return false;  // not Linux: cannot tell, assume open
        if (!Files.exists(link, LinkOption.NOFOLLOW_LINKS)) return true;
        try {
            Path target = Files.readSymbolicLink(link);
            Path jdk = Path.of(System.getProperty("java.home")).toRealPath();
            return target.isAbsolute() && target.normalize().startsWith(jdk);
        } catch (IOException | UnsupportedOperationException e) {
            return false;
        }
    }

    /** Replaces System.out by a stream whose failed writes throw, or that refuses to write when stdout was closed. */
    static void install() {
        OutputStream fd = wasClosed(1) ? new ClosedOutput() : new FileOutputStream(FileDescriptor.out);
        System.setOut(new PrintStream(new Checked(new BufferedOutputStream(fd, 8192), "standard output"), true,
                StandardCharsets.UTF_8));
    }

    /** Flushes System.out; throws OutputFailure when what is left cannot be written. */
    static void flushOut() {
        System.out.flush();
    }

    /**
     * Standard input for a command that reads it, never closing the JVM's descriptor 0 (the
     * returned stream's close does nothing).
     *
     * @throws UserError when stdin was closed when the command started
     */
    static InputStream stdin() {
        if (wasClosed(0)) {
            throw new UserError("<stdin>: standard input is closed; give a file name, or pipe the rows in");
        }
        return new FilterInputStream(System.in) {
            @Override
            public void close() {
                // System.in stays open: its descriptor would be reused by the next file the JVM opens
            }
        };
    }

    /** Turns the IOExceptions of {@code out} into OutputFailure (PrintStream would swallow them). */
    static final class Checked extends OutputStream {
        private final OutputStream out;
        private final String target;

        Checked(OutputStream out, String target) {
            this.out = out;
            this.target = target;
        }

        @Override
        public void write(int b) {
            try {
                out.write(b);
            } catch (IOException e) {
                throw new OutputFailure(target, e);
            }
        }

        @Override
        public void write(byte[] b, int off, int len) {
            try {
                out.write(b, off, len);
            } catch (IOException e) {
                throw new OutputFailure(target, e);
            }
        }

        @Override
        public void flush() {
            try {
                out.flush();
            } catch (IOException e) {
                throw new OutputFailure(target, e);
            }
        }

        @Override
        public void close() {
            flush();
        }
    }

    /** What stdout is when it was closed at start: every write fails, saying so. */
    private static final class ClosedOutput extends OutputStream {
        @Override
        public void write(int b) throws IOException {
            throw new IOException("it was closed when drmas started");
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            if (len > 0) throw new IOException("it was closed when drmas started");
        }
    }
}
