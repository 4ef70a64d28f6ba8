// RunLock.java — one process at a time in a run folder. Two `drmas train` on one folder would both
// append every step to metrics.jsonl and write the same checkpoints; the second now stops at once,
// naming the folder and the process that holds it. The lock is an OS file lock (FileChannel.lock
// on run_dir/drmas.lock), so it ends with its process however that ends (kill -9 included) and no
// stale lock is ever left to clean up; the file's text (pid, command, start time) only serves the
// message. Taking the lock is also the first write into the run folder, so a folder that cannot be
// made or written (a path through a file, /proc, a read-only or immutable folder) is reported here,
// with its key, before any work. Re-entrant within a process (drmas demo runs sft then train).
package dev.drmas.train;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;

public final class RunLock implements AutoCloseable {
    /** The lock file in the run folder. */
    public static final String FILE = "drmas.lock";

    /** The run folder cannot be used: taken by another process, or not writable. */
    public static final class RunFolderException extends RuntimeException {
        private final boolean inUse;

        RunFolderException(String message, Throwable cause) {
            this(message, cause, false);
        }

        RunFolderException(String message, Throwable cause, boolean inUse) {
            super(message, cause);
            this.inUse = inUse;
        }

        /** Whether another process holds the folder (else it cannot be made, written or locked). */
        public boolean inUse() {
            return inUse;
        }
    }

    // locks this process holds, by real folder path, with how many holders share each
    private static final Map<Path, RunLock> HELD = new HashMap<>();

    private final Path folder;
    private final FileChannel channel;
    private final FileLock lock;
    private int holders = 1;

    private RunLock(Path folder, FileChannel channel, FileLock lock) {
        this.folder = folder;
        this.channel = channel;
        this.lock = lock;
    }

    /**
     * Creates {@code runDir} if needed and locks it for {@code command} (e.g. "drmas train").
     *
     * @throws RunFolderException when another process holds it, or the folder cannot be created
     *                            or written (the message names run.output_dir / run.name and why)
     */
    public static RunLock acquire(Path runDir, String command) {
        try {
            Durable.createFolders(runDir);
        } catch (IOException e) {
            throw new RunFolderException("run folder " + runDir + " (run.output_dir/run.name): cannot create it: " + reason(e), e);
        }
        Path key;
        try {
            key = runDir.toRealPath();
        } catch (IOException e) {
            throw new RunFolderException("run folder " + runDir + ": " + reason(e), e);
        }
        synchronized (HELD) {
            RunLock mine = HELD.get(key);
            if (mine != null) {
                mine.holders++;
                return mine;
            }
            Path file = key.resolve(FILE);
            FileChannel ch;
            try {
                ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE);
            } catch (IOException e) {
                throw new RunFolderException("run folder " + runDir + " (run.output_dir/run.name) is not writable: " + reason(e), e);
            }
            try {
                FileLock l;
                try {
                    l = ch.tryLock();
                } catch (OverlappingFileLockException e) {
                    l = null;  // another channel of this process (not through this class)
                }
                if (l == null) {
                    String holder = holder(ch);
                    ch.close();
                    throw new RunFolderException("run folder " + runDir + " is in use by another drmas process"
                            + (holder.isEmpty() ? "" : " (" + holder + ")")
                            + "; wait for it to end, or give this run another run.name or run.output_dir", null, true);
                }
                String text = "pid " + ProcessHandle.current().pid() + ": " + command + ", since " + Instant.now() + "\n";
                ch.truncate(0);
                ch.write(ByteBuffer.wrap(text.getBytes(StandardCharsets.UTF_8)), 0);
                RunLock lock = new RunLock(key, ch, l);
                HELD.put(key, lock);
                return lock;
            } catch (IOException e) {
                try {
                    ch.close();
                } catch (IOException ignored) {
                    // the lock goes with the channel
                }
                throw new RunFolderException("run folder " + runDir + ": cannot lock " + file + ": " + reason(e), e);
            }
        }
    }

    /** What the holder wrote into the lock file (its pid, command and start), or "" when unreadable. */
    private static String holder(FileChannel ch) {
        try {
            ByteBuffer b = ByteBuffer.allocate(512);
            int n = ch.read(b, 0);
            return n <= 0 ? "" : new String(b.array(), 0, n, StandardCharsets.UTF_8).strip();
        } catch (IOException e) {
            return "";
        }
    }

    private static String reason(IOException e) {
        if (e instanceof FileSystemException f) {
            String why = f.getReason() != null ? f.getReason() : switch (e.getClass().getSimpleName()) {
                case "NoSuchFileException" -> "no such file or folder";
                case "AccessDeniedException" -> "permission denied";
                case "FileAlreadyExistsException" -> "a file of that name is in the way";
                default -> e.getClass().getSimpleName();
            };
            return (f.getFile() != null ? f.getFile() + ": " : "") + why;
        }
        return String.valueOf(e.getMessage());
    }

    /** The locked folder (its real path). */
    public Path folder() {
        return folder;
    }

    /** Releases the lock when its last holder in this process closes it. The file stays (the lock, not the file, is the truth). */
    @Override
    public void close() {
        synchronized (HELD) {
            if (holders <= 0 || --holders > 0) return;
            HELD.remove(folder);
            try {
                lock.release();
                channel.close();
            } catch (IOException e) {
                // closing the channel releases the lock in any case
            }
        }
    }
}
