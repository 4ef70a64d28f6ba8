// OutputFile.java — writes a command's -o/--output target without surprising the user. A regular
// file (or one that does not exist yet) is written beside itself, synced and renamed over, so a
// crash or a full disk leaves the old file or the new one, never half of one; the file keeps its
// permissions, and through a symbolic link the link stays and its target is replaced (or created,
// as a shell's "> link" creates it, where the target's folder exists: the folders of a path the user
// typed are created, never those of a link's target, which the user did not name). Anything
// else (a device such as /dev/full, a FIFO, a descriptor's name such as /dev/stdout) is written in
// place: renaming over it would replace the device node by a regular file, or the file behind the
// descriptor by another one that the descriptor does not see. Every error names the output and is reported;
// no temporary file is left behind. Content of a known size (a MappedBody) is produced straight
// into a mapping of the new file, its blocks reserved first: no buffer of its own, no copy.
package dev.drmas.cli;

import dev.drmas.train.Durable;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.channels.WritableByteChannel;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermission;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;

final class OutputFile {
    private OutputFile() {
    }

    /** What writes the content; it may throw IOException or OutputFailure. */
    interface Body {
        void writeTo(OutputStream out) throws IOException;
    }

    /** Content written to a channel: the file's own where there is one (no copy through the heap). */
    interface ChannelBody extends Body {
        void writeTo(WritableByteChannel ch) throws IOException;

        @Override
        default void writeTo(OutputStream out) throws IOException {
            writeTo(Channels.newChannel(out));
            out.flush();
        }
    }

    /**
     * Content of a known size that fills a memory segment: where the output is a new file, the
     * segment is a mapping of it (the content is computed into the file's pages, never copied
     * there); elsewhere (a device, a FIFO, stdout) an off-heap buffer, then written. {@code fill}
     * may throw (a UserError for bad input): the temporary file is removed and the old output kept.
     */
    interface MappedBody extends Body {
        long size();

        void fill(MemorySegment dst) throws IOException;

        @Override
        default void writeTo(OutputStream out) throws IOException {
            try (Arena arena = Arena.ofConfined()) {
                long size = size();
                MemorySegment buf = arena.allocate(Math.max(1, size), 64).asSlice(0, size);
                fill(buf);
                byte[] chunk = new byte[(int) Math.min(1 << 20, Math.max(1, size))];
                for (long off = 0; off < size; off += chunk.length) {
                    int len = (int) Math.min(chunk.length, size - off);
                    MemorySegment.copy(buf, ValueLayout.JAVA_BYTE, off, chunk, 0, len);
                    out.write(chunk, 0, len);
                }
                out.flush();
            }
        }
    }

    /** Writes {@code body} to {@code out} as described above; a failure is a UserError naming {@code out}. */
    static void write(Path out, Body body) {
        if (Files.isDirectory(out)) throw new UserError(out + ": is a folder, not a file to write");
        if (Files.exists(out) && !Files.isRegularFile(out) || special(out)) {
            writeInPlace(out, body);
        } else {
            writeByRename(out, body);
        }
    }

    /** Whether {@code write} replaces {@code out} by a rename (nothing of a failed write is seen there). */
    static boolean replacesByRename(Path out) {
        return !Files.isDirectory(out) && !(Files.exists(out) && !Files.isRegularFile(out) || special(out));
    }

    /**
     * /dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N, /proc/PID/fd/N: names of open descriptors,
     * which a rename must not replace. (Not all of /dev and /proc: a regular file such as one in
     * /dev/shm is replaced by rename like any other, and so not left half written or with the old
     * file's tail after a shorter new one.)
     */
    private static boolean special(Path out) {
        Path abs = out.toAbsolutePath().normalize();
        if (abs.equals(Path.of("/dev/stdout")) || abs.equals(Path.of("/dev/stderr")) || abs.startsWith("/dev/fd")) return true;
        if (!abs.startsWith("/proc") || abs.getNameCount() < 3) return false;
        String pid = abs.getName(1).toString();
        return (pid.equals("self") || pid.equals("thread-self") || pid.chars().allMatch(Character::isDigit)) && abs.getName(2).toString().equals("fd");
    }

    private static void writeInPlace(Path out, Body body) {
        // APPEND: a descriptor's name opened again is a new offset at 0; where it leads to a regular file
        // (the shell's "-o /dev/stdout >> log" or "> log"), writing there would overwrite what the file
        // holds instead of following it. (On a device or a FIFO it changes nothing.)
        boolean regular = Files.isRegularFile(out);
        try (OutputStream os = regular
                ? Files.newOutputStream(out, StandardOpenOption.WRITE, StandardOpenOption.APPEND)
                : Files.newOutputStream(out, StandardOpenOption.WRITE, StandardOpenOption.CREATE)) {
            body.writeTo(os);
            os.flush();
        } catch (IOException e) {
            throw new UserError(out + ": cannot write: " + Errors.reason(e), e);
        } catch (StdStreams.OutputFailure e) {
            throw new UserError(out + ": cannot write: " + Errors.reason(e.getCause()), e);
        }
    }

    private static void writeByRename(Path out, Body body) {
        Path target;
        boolean linked = Files.isSymbolicLink(out);
        try {
            target = finalTarget(out);
        } catch (IOException e) {
            throw new UserError(out + ": cannot follow the link: " + Errors.reason(e), e);
        }
        Path dir = target.toAbsolutePath().getParent();
        Path tmp = dir.resolve("." + target.getFileName() + "." + Long.toHexString(ThreadLocalRandom.current().nextLong()) + ".tmp");
        if (linked && !Files.isDirectory(dir)) {
            // a dangling link: written through where its target's folder exists (as open(2) would), but
            // the folders on the way to a target the link names are the link maker's, not this command's
            throw new UserError(out + ": cannot write: it is a symbolic link to " + target + ", whose folder " + dir
                    + (Files.exists(dir) ? " is not a folder" : " does not exist") + " (drmas creates no folders for a link's target)");
        }
        Path blocker = notAFolder(dir);
        if (blocker != null) {
            String what = !Files.exists(blocker) ? " is a symbolic link to " + linkTarget(blocker) + ", which does not exist"
                    : Files.isRegularFile(blocker) ? " is a file, not a folder" : " is not a folder";
            throw new UserError(out + ": cannot write: " + blocker + what);
        }
        try {
            Files.createDirectories(dir);
            Set<PosixFilePermission> mode = Files.exists(target) ? permissions(target) : null;
            // CREATE_NEW without attributes: a new file gets the user's umask (createTempFile would make it 0600);
            // READ as well, which a writable mapping needs
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE,
                    StandardOpenOption.READ)) {
                if (body instanceof MappedBody m) {
                    fillMapped(tmp, ch, m);
                } else if (body instanceof ChannelBody c) {
                    c.writeTo(ch);
                } else {
                    OutputStream os = Channels.newOutputStream(ch);
                    body.writeTo(os);
                    os.flush();
                }
                ch.force(true);
            }
            if (mode != null) Files.setPosixFilePermissions(tmp, mode);
            try {
                Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING);
            }
            Durable.syncFolder(dir);
        } catch (IOException | StdStreams.OutputFailure e) {
            deleteQuietly(tmp);
            IOException io = e instanceof IOException x ? x : (IOException) e.getCause();
            throw new UserError(out + (target.equals(out) ? "" : " (-> " + target + ")") + ": cannot write: " + Errors.reason(io), e);
        } catch (RuntimeException e) {
            deleteQuietly(tmp);
            throw e;
        }
    }

    /**
     * The body computed into a mapping of the new, empty file {@code tmp}, once its blocks are
     * reserved (FileSpace: a store into a page the disk cannot hold would be a SIGBUS in native
     * code); the pages are written back before the channel's own sync. Where the blocks cannot be
     * reserved, through a buffer and the channel instead.
     */
    private static void fillMapped(Path tmp, FileChannel ch, MappedBody m) throws IOException {
        long size = m.size();
        if (!FileSpace.reserve(tmp, size)) {
            OutputStream os = Channels.newOutputStream(ch);
            m.writeTo(os);
            os.flush();
            return;
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment seg = ch.map(FileChannel.MapMode.READ_WRITE, 0, size, arena);
            m.fill(seg);
            try {
                seg.force();
            } catch (UncheckedIOException e) {
                throw e.getCause();
            }
        }
    }

    /**
     * The first of {@code dir} and its parents that exists, when that is not a folder (a symbolic link
     * whose target is missing counts as one that exists); else null. (createDirectories would fail on
     * it with only "already exists", which reads as if the output did.)
     */
    private static Path notAFolder(Path dir) {
        for (Path p = dir; p != null; p = p.getParent()) {
            if (Files.exists(p, LinkOption.NOFOLLOW_LINKS)) return Files.isDirectory(p) ? null : p;
        }
        return null;
    }

    /** Where the link {@code link} points, resolved against its folder (for messages). */
    private static Path linkTarget(Path link) {
        try {
            return link.toAbsolutePath().getParent().resolve(Files.readSymbolicLink(link)).normalize();
        } catch (IOException e) {
            return link;
        }
    }

    /** Where a chain of symbolic links ends (the path itself when it is none); the end need not exist. */
    static Path finalTarget(Path p) throws IOException {
        Path cur = p;
        for (int hops = 0; Files.isSymbolicLink(cur); hops++) {
            if (hops == 40) throw new IOException("too many levels of symbolic links");
            Path next = Files.readSymbolicLink(cur);
            Path parent = cur.toAbsolutePath().getParent();
            cur = next.isAbsolute() ? next : parent.resolve(next).normalize();
        }
        return cur;
    }

    private static Set<PosixFilePermission> permissions(Path p) throws IOException {
        try {
            return Files.getPosixFilePermissions(p, LinkOption.NOFOLLOW_LINKS);
        } catch (UnsupportedOperationException e) {
            return null;
        }
    }

    private static void deleteQuietly(Path p) {
        try {
            Files.deleteIfExists(p);
        } catch (IOException ignored) {
            // nothing more can be done; the error that got us here is reported
        }
    }
}
