// AnswerGrader.java — how a workflow grades a final answer: its built-in check, or the user's grader
// command (orchestra.options.grader), so that a run can score answers exactly as another code base
// does (a verl reward function, the Dr. MAS reference's math grader) without porting it to Java.
//
// The command is started once per process when the workload opens; its first line on stdout must be
//   {"ready": true}
// (said once it has loaded what it needs: a grader script that is not there or fails to import stops
// the run then, before any model loads, not after a rollout); then one JSON request a line on its stdin,
//   {"data_source": D, "solution_str": S, "ground_truth": G, "extra_info": {"task_id": I, "answers": [A...]}}
// (verl's compute_score(data_source, solution_str, ground_truth, extra_info) arguments: S is the final
// agent's whole reply, G the task's answer as the workflow's data files give it to verl: math a string,
// search {"target": [answers]}; D is null for synthetic tasks), answered in order by one line
//   {"score": X}
// on its stdout, X finite; 1.0 counts as solved in avg@k and pass@k. Anything else on stdout (a print left
// in a reward function) is an error naming the line, not a score; the grader's stderr is the run's. A
// grader that ends, hangs past timeout_s or answers out of protocol stops the run naming the command,
// the request and its task. configs/reward/verl_reward.py serves any verl-style reward function this way.
// A grader should end when its stdin closes (close(), or this process gone) and outlive SIGINT and
// SIGTERM, which reach it with drmas's own (Ctrl-C, a scheduler's stop) while drmas finishes its step.
// timeout_s bounds the whole exchange, the request's write included (a grader that stopped reading);
// a grader that fails is stopped with every process it started.
package dev.drmas.workflow;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.drmas.config.ConfigException;
import dev.drmas.env.Task;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.File;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;

public final class AnswerGrader implements AutoCloseable {
    /** A workflow's own check: the score of {@code solution}, a final reply, for {@code task} (1.0: solved). */
    public interface Check {
        double score(String solution, Task task);
    }

    /** What went wrong with the grader command: the run stops with it. */
    public static final class GraderException extends RuntimeException {
        GraderException(String message) {
            super(message);
        }
    }

    static final String KEY = "orchestra.options.grader";
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Object EOF = new Object();
    /** Why the reader thread stopped reading the grader's output other than at its end; null if it did not. */
    private volatile Throwable readFailure;

    private final Check builtIn;
    private final GraderOptions options;
    private final Function<Task, Object> groundTruth;
    private Process process;
    private BufferedWriter toGrader;
    private ExecutorService writer;  // writes a request, so that a grader that does not read cannot block past timeout_s
    private BlockingQueue<Object> answers;
    private long requests;
    private String failed;  // the error that stopped the grader: later calls fail with it too

    private AnswerGrader(GraderOptions options, Check builtIn, Function<Task, Object> groundTruth) {
        this.options = options;
        this.builtIn = builtIn;
        this.groundTruth = groundTruth;
    }

    /**
     * The grader of a workflow whose own check is {@code builtIn}; with a command in {@code options}, that
     * command instead, sent {@code groundTruth} of each task, started now: a program that is not there, or
     * a grader that ends or says anything but that it is ready, is a ConfigException naming the key now,
     * not after a rollout.
     */
    public static AnswerGrader of(GraderOptions options, Check builtIn, Function<Task, Object> groundTruth) {
        AnswerGrader g = new AnswerGrader(options, builtIn, groundTruth);
        if (options.external()) {
            requireProgram(options.command().getFirst());
            g.start();
        }
        return g;
    }

    /** Whether a command grades (else the workflow's own check). */
    public boolean external() {
        return options.external();
    }

    /** The score of {@code solution}, the final reply of an episode of {@code task}. */
    public double score(String solution, Task task) {
        return options.external() ? ask(solution, task) : builtIn.score(solution, task);
    }

    private synchronized double ask(String solution, Task task) {
        if (failed != null) throw new GraderException(failed);
        if (process == null) throw new IllegalStateException("the grader is closed");
        long n = ++requests;
        String request;
        try {
            request = JSON.writeValueAsString(request(solution, task));
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("cannot write a grader request as JSON", e);
        }
        long deadline = System.nanoTime() + (long) (options.timeoutS() * 1e9);
        Future<?> sent = writer.submit(() -> {
            toGrader.write(request);
            toGrader.write('\n');
            toGrader.flush();
            return null;
        });
        Object got;
        try {
            sent.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            got = answers.poll(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (ExecutionException e) {
            throw fail(n, task, "it could not be sent: the grader " + ended() + "; its error output is above");
        } catch (TimeoutException e) {
            got = null;  // the write is still blocked: the grader does not read
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw fail(n, task, "interrupted while waiting for its answer");
        }
        if (got == null) {
            throw fail(n, task, "no answer within " + timeout() + "; the grader was stopped");
        }
        if (got == EOF) throw fail(n, task, atEnd("the grader ended before answering"));
        return parse((String) got, n, task);
    }

    private Map<String, Object> request(String solution, Task task) {
        Map<String, Object> extra = new LinkedHashMap<>();
        extra.put("task_id", task.id());
        extra.put("answers", task.golds());
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("data_source", task.dataSource());
        r.put("solution_str", solution);
        r.put("ground_truth", groundTruth.apply(task));
        r.put("extra_info", extra);
        return r;
    }

    private double parse(String line, long n, Task task) {
        JsonNode node = null;
        try {
            node = JSON.readTree(line);
        } catch (JsonProcessingException e) {
            // reported below with the line
        }
        JsonNode score = node != null && node.isObject() ? node.get("score") : null;
        if (score == null || !score.isNumber() || !Double.isFinite(score.asDouble())) {
            throw fail(n, task, "it answered '" + cut(line) + "', where one line {\"score\": X} with X a finite number was expected "
                    + "(a grader's own prints must go to stderr: configs/reward/verl_reward.py moves a reward function's there)");
        }
        return score.asDouble();
    }

    /** Starts the command and waits (timeout_s) for its {"ready": true}; else a ConfigException at the key. */
    private void start() {
        ProcessBuilder pb = new ProcessBuilder(options.command()).redirectError(ProcessBuilder.Redirect.INHERIT);
        try {
            process = pb.start();
        } catch (IOException e) {
            throw ConfigException.at(KEY + ".command", "cannot start " + shown() + ": " + e.getMessage());
        }
        toGrader = new BufferedWriter(new OutputStreamWriter(process.getOutputStream(), StandardCharsets.UTF_8));
        writer = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "drmas-grader-writer");
            t.setDaemon(true);
            return t;
        });
        answers = new LinkedBlockingQueue<>();
        BlockingQueue<Object> q = answers;
        BufferedReader from = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
        Thread reader = new Thread(() -> {
            try (from) {
                for (String line; (line = from.readLine()) != null; ) q.add(line);
            } catch (IOException e) {
                // the grader is gone: EOF below, and its exit status says why
            } catch (RuntimeException | Error e) {
                readFailure = e;  // (a line too long for the heap, say): said with the EOF, which still ends the wait
            } finally {
                q.add(EOF);
            }
        }, "drmas-grader");
        reader.setDaemon(true);
        reader.start();
        String problem;
        Object first;
        try {
            first = answers.poll((long) (options.timeoutS() * 1e9), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            first = null;
        }
        if (first == null) {
            problem = "did not say it was ready within " + timeout();
        } else if (first == EOF) {
            problem = atEnd("ended before it was ready");
        } else if (!isReady((String) first)) {
            problem = "said '" + cut((String) first) + "' where its first line must be {\"ready\": true}";
        } else {
            return;
        }
        stop();
        throw ConfigException.at(KEY + ".command", shown() + " " + problem);
    }

    private static boolean isReady(String line) {
        try {
            JsonNode n = JSON.readTree(line);
            return n != null && n.isObject() && n.path("ready").asBoolean(false);
        } catch (JsonProcessingException e) {
            return false;
        }
    }

    /**
     * Stops the grader and every process it started (a shell's child would otherwise live on, holding the
     * pipes): the kill signals alone, through the handles. Process.destroyForcibly also closes the grader's
     * stdin, which waits for a write blocked on the full pipe, for as long as anything holds its read end.
     */
    private void stop() {
        if (process == null) return;
        process.descendants().forEach(ProcessHandle::destroyForcibly);
        process.toHandle().destroyForcibly();
        if (writer != null) writer.shutdownNow();
    }

    /** What the end of the grader's output means: {@code ended} with its status, or that its output could not be read. */
    private String atEnd(String ended) {
        Throwable r = readFailure;
        if (r != null) return "its output could not be read (" + r + "); it " + ended();
        return ended + " (" + ended() + "); its error output is above";
    }

    /** The grader's state after a failed exchange: its exit status, when it has ended within a moment. */
    private String ended() {
        try {
            if (process.waitFor(2, TimeUnit.SECONDS)) return "exited with status " + process.exitValue();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return "is still running";
    }

    private GraderException fail(long n, Task task, String problem) {
        failed = KEY + ": " + shown() + ", request " + n + " (task '" + task.id() + "'): " + problem;
        stop();
        return new GraderException(failed);
    }

    private String shown() {
        return "`" + String.join(" ", options.command()) + "`";
    }

    /** "timeout_s (N s)", for messages (dev.drmas.config.Check's number: this class's Check is the workflow's). */
    private String timeout() {
        return "timeout_s (" + dev.drmas.config.Check.num(options.timeoutS()) + " s)";
    }

    /** A line of the grader's in a message: its first 200 characters. */
    private static String cut(String line) {
        return line.length() > 200 ? line.substring(0, 200) + "..." : line;
    }

    /** The program of a command is a file that can run, or a name found on PATH. */
    private static void requireProgram(String program) {
        if (program.contains(File.separator)) {
            if (!Files.isExecutable(Path.of(program))) {
                throw ConfigException.at(KEY + ".command", "its program " + program + " is " + (Files.exists(Path.of(program))
                        ? "not executable" : "not there") + " (relative to the folder drmas runs in)");
            }
            return;
        }
        if (!onPath(program)) throw ConfigException.at(KEY + ".command", "its program '" + program + "' is not on PATH");
    }

    /** Whether {@code program} is an executable file in a folder of PATH. */
    static boolean onPath(String program) {
        String path = System.getenv("PATH");
        if (path == null) return false;
        for (String dir : path.split(File.pathSeparator)) {
            if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, program))) return true;
        }
        return false;
    }

    /** Ends the grader: its stdin closes (a grader reading lines then ends), then it is stopped if still there. */
    @Override
    public synchronized void close() {
        if (process == null) return;
        try {
            if (failed == null) toGrader.close();  // (after a failure a write may still hold it: the grader is stopped already)
        } catch (IOException e) {
            // it has ended already
        }
        try {
            if (!process.waitFor(5, TimeUnit.SECONDS)) stop();
        } catch (InterruptedException e) {
            stop();
            Thread.currentThread().interrupt();
        }
        if (writer != null) writer.shutdownNow();
        process = null;
    }
}
