// ProcessGroup.java — the c10d collective: a TCPStore hosted by rank 0 for the rendezvous and a
// ProcessGroupGloo (CPU) or ProcessGroupNCCL (CUDA) backend from the JavaCPP presets. Every wait
// is bounded by distributed.timeout_s (c10d's own defaults are 5 and 30 minutes). Before each
// collective operation (a sum of many buckets is one) a rank bumps its arrival counter in the
// store, so that when a collective fails the survivors can say which rank did not arrive instead
// of only "connection closed"; once per operation, not per bucket: a round trip to rank 0 each.
// The steps ranks take on their own between collectives (opening the trainer) end at ready points
// kept in the store too, where a rank that failed leaves its reason for the others to stop with, and
// where a heartbeat of each rank in the store tells a rank that died from one that is slow. A
// collective's wait polls and looks at the same keys about once a second: a rank that failed
// mid-training, or one behind whose heartbeat stopped, stops the others within moments (see await).
package dev.drmas.dist;

import dev.drmas.config.DistributedConfig;
import dev.drmas.model.Scopes;
import dev.drmas.model.Tensors;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.javacpp.chrono.Milliseconds;
import org.bytedeco.pytorch.AllgatherOptions;
import org.bytedeco.pytorch.AllreduceOptions;
import org.bytedeco.pytorch.Backend;
import org.bytedeco.pytorch.BarrierOptions;
import org.bytedeco.pytorch.ByteVector;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.GlooDeviceVector;
import org.bytedeco.pytorch.LongVector;
import org.bytedeco.pytorch.ProcessGroupGloo;
import org.bytedeco.pytorch.StringVector;
import org.bytedeco.pytorch.TCPStore;
import org.bytedeco.pytorch.TCPStoreOptions;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.Work;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

public final class ProcessGroup implements Collective {
    private static final String ARRIVED = "drmas/arrived/";
    // awaitReady and announceFailure: ready/<point>/<rank> once a rank got to a ready point; failure/<rank>
    // what a failed rank was doing and why (set before it counts itself in failed); failure_seen, the
    // ranks that know of a failure (rank 0 keeps its store up until all of them do)
    private static final String READY = "drmas/ready/";
    private static final String FAILED = "drmas/failed";
    private static final String FAILURE = "drmas/failure/";
    private static final String SEEN = "drmas/failure_seen";
    // dead/<rank>: a rank found it silent (declareDead; the first to add 1 records it); dead_count: how many (they see nothing)
    private static final String DEAD = "drmas/dead/";
    private static final String DEAD_COUNT = "drmas/dead_count";
    /** At most this long rank 0 keeps its store up after a failure for the other ranks to read it. */
    static final long LINGER_MS = 30_000;
    private static final String ALIVE = "drmas/alive/";
    /** How often each rank's heartbeat counts up in the store. */
    static final long HEARTBEAT_MS = 1_000;
    /** A rank whose heartbeat has not moved for this long, while others wait for it at a ready point, is dead (tests lower it). */
    static volatile long heartbeatStaleMs = 10_000;
    /** At most this long a rank that read rank 0's failure waits for rank 0's process to end first. */
    static final long RANK0_END_MS = 3_000;
    /** The longest pause between two looks at the store while waiting at a ready point. */
    private static final long POLL_MS = 20;

    /**
     * Buckets in flight at once in {@link #sumEach}: while the oldest is awaited the next ones are
     * already queued on the link, which hides their making, the waits' latency (NCCL's bounded wait
     * polls the GPU with sleeps of a millisecond or more) and the calls' overheads; each one more
     * holds another bucket (distributed.bucket_mb) of memory, so a few.
     */
    static final int WINDOW = 3;

    private final DistEnv env;
    private final long timeoutMs;
    private final long bucketBytes;
    private final Device device;  // where collective buffers live: cpu for gloo, this rank's GPU for nccl (DistEnv.cudaDevice)
    private final String backendName;
    // the backend (an intrusive_ptr held by its Java peer) owns the store; both live as long as this
    // object, and the store is only used while the backend is
    private final TCPStore store;
    private final Backend backend;
    private final Thread heartbeat;
    private long calls;      // collective operations entered, the arrival counter this rank publishes
    private long readyPoints;  // awaitReady calls: every rank makes the same ones, in the same order
    private boolean failureKnown;  // this rank announced a failure or saw another's: it announces nothing more
    private long busyNanos;
    private boolean closed;

    /**
     * Joins the group: rank 0 hosts the store on MASTER_PORT, every rank connects and the backend
     * connects all pairs. Fails within {@code cfg.timeoutS()} seconds when a rank does not come.
     *
     * @param cuda use NCCL (the backend {@code auto} picks it when training on CUDA)
     */
    public ProcessGroup(DistEnv env, DistributedConfig cfg, boolean cuda) {
        this.env = env;
        this.timeoutMs = Math.max(1, Math.round(cfg.timeoutS() * 1000));
        this.bucketBytes = Math.max(1, Math.round(cfg.bucketMb() * (1 << 20)));
        boolean nccl = switch (cfg.backend()) {
            case AUTO -> cuda;
            case NCCL -> true;
            case GLOO -> false;
        };
        if (nccl && !cuda) {
            throw new DistributedException("distributed.backend: nccl needs run.device cuda (NCCL moves CUDA tensors only); "
                    + "use gloo (or auto) on the CPU");
        }
        this.backendName = nccl ? "nccl" : "gloo";
        // the device Policies.device trains on (the same rule): NCCL's buffers and its barrier's tensor
        this.device = new Device(nccl ? "cuda:" + env.cudaDevice((int) torch.cuda_device_count(), System.getenv("CUDA_VISIBLE_DEVICES"))
                : "cpu");
        if (env.rank() == 0) requirePortFree(env);
        this.store = openStore(env, timeoutMs);
        try {
            this.backend = nccl ? Nccl.create(store, env.rank(), env.worldSize(), timeoutMs) : gloo(env, store, timeoutMs);
        } catch (RuntimeException e) {
            throw new DistributedException("rank " + env.rank() + ": the " + backendName + " process group of " + env.worldSize()
                    + " ranks did not form within " + seconds() + " (distributed.timeout_s): " + firstLine(e)
                    + "; every rank must start with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE", e);
        }
        this.heartbeat = heartbeat(env, timeoutMs);
    }

    /**
     * A daemon thread that counts up ALIVE/rank in the store every {@link #HEARTBEAT_MS}, on a store
     * client of its own (no second thread on the group's): how ranks waiting at a ready point tell a
     * rank that died without a word (killed, out of memory, a crash) from one that is only slow. It
     * ends with {@link #close}; a connection to the store that breaks is opened again.
     */
    private static Thread heartbeat(DistEnv env, long timeoutMs) {
        Thread t = new Thread(() -> {
            // Java owns this client (no backend adopts it): it lives as long as the thread, and is freed with it
            TCPStore own = null;
            boolean beaten = false;
            try {
                while (!Thread.currentThread().isInterrupted()) {
                    try {
                        if (own == null) own = heartbeatStore.apply(env, timeoutMs);
                        own.add(ALIVE + env.rank(), 1);
                        beaten = true;
                    } catch (RuntimeException | Error e) {
                        // (an Error too: a transient OutOfMemoryError here would end the thread, and this live rank be
                        // taken for dead) a connection that broke (a network blip between nodes) is opened again a second later: a heartbeat
                        // that stopped for good would have this live rank taken for dead as soon as it falls heartbeatStaleMs
                        // behind the others, routine with uneven rollouts. The store gone for good (rank 0 ended) leaves
                        // this daemon trying until the group closes
                        if (own != null) {
                            closeQuietly(own);
                            own = null;
                        }
                        if (!beaten) {
                            // the group formed over the same store a moment ago: say so (the others take this rank for dead
                            // once it is heartbeatStaleMs behind them at a ready point or a collective)
                            System.err.println("drmas: rank " + env.rank() + ": no heartbeat in the store yet (" + firstLine(e) + "); trying again");
                            beaten = true;  // (said once)
                        }
                    }
                    Thread.sleep(HEARTBEAT_MS);
                }
            } catch (InterruptedException e) {
                // closed: nobody waits for this rank's heartbeat any more
            } finally {
                if (own != null) closeQuietly(own);
            }
        }, "drmas-heartbeat-rank" + env.rank());
        t.setDaemon(true);
        t.start();
        return t;
    }

    /** Opens the heartbeat's own client of the store (tests route it through a connection they can cut). */
    static volatile java.util.function.BiFunction<DistEnv, Long, TCPStore> heartbeatStore = ProcessGroup::storeClient;

    /** A client of rank 0's store at MASTER_ADDR:MASTER_PORT, whose waits are bounded by {@code timeoutMs}. */
    static TCPStore storeClient(DistEnv env, long timeoutMs) {
        TCPStoreOptions o = new TCPStoreOptions();
        o.port((short) env.masterPort());
        o.isServer(false);
        o.waitWorkers(false);
        o.timeout(new Milliseconds(timeoutMs));
        return new TCPStore(env.masterAddr(), o);
    }

    private static void closeQuietly(TCPStore store) {
        try {
            store.close();
        } catch (RuntimeException ignored) {
            // a client whose connection is gone: nothing to release but its memory, which close() frees regardless
        }
    }

    /**
     * A clear error for the usual mistake (a previous run still holds the port) before c10d's own.
     * The store listens on every interface, as the probe binds: MASTER_ADDR only has to reach this
     * machine (a NAT'd or floating address need not be one of its own).
     */
    static void requirePortFree(DistEnv env) {
        try (ServerSocket s = new ServerSocket()) {
            s.setReuseAddress(true);
            s.bind(new InetSocketAddress(env.masterPort()));
        } catch (IOException e) {
            throw new PortTakenException("MASTER_PORT " + env.masterPort() + " is not free on rank 0's machine for its store ("
                    + e.getMessage() + "): another run may be using it; choose another port (drmas launch --master-port P)", e);
        }
    }

    private static TCPStore openStore(DistEnv env, long timeoutMs) {
        TCPStoreOptions o = new TCPStoreOptions();
        o.port((short) env.masterPort());  // uint16_t in C++: the bits are what count
        o.isServer(env.rank() == 0);
        o.waitWorkers(false);
        o.timeout(new Milliseconds(timeoutMs));
        try {
            TCPStore store = new TCPStore(env.masterAddr(), o);
            // c10 owns the store from here: the presets allocate it with plain new, and the backend's
            // constructor adopts that pointer into a c10::intrusive_ptr (unsafe_steal_from_new) that
            // deletes it with the backend. Java deleting it as well (garbage collection, or the
            // PointerScope of a caller) was a double free that corrupted the heap of later tests. So
            // Java holds one reference it never releases, and the collector is told to leave it.
            store.retainReference();
            store.deallocate(false);
            return store;
        } catch (RuntimeException e) {
            String m = firstLine(e);
            if (env.rank() == 0 && m.toLowerCase(java.util.Locale.ROOT).contains("address already in use")) {
                throw new PortTakenException("MASTER_PORT " + env.masterPort() + " is already in use on " + env.masterAddr()
                        + ": choose another port (drmas launch --master-port P)", e);
            }
            throw new DistributedException("rank " + env.rank() + ": cannot reach the store of rank 0 at " + env.masterAddr()
                    + ":" + env.masterPort() + " within " + timeoutMs / 1000.0 + " s: " + m, e);
        }
    }

    private static Backend gloo(DistEnv env, TCPStore store, long timeoutMs) {
        ProcessGroupGloo.Options o = ProcessGroupGloo.Options.create(new Milliseconds(timeoutMs));
        // Gloo needs the address peers reach this process at: loopback for a one-machine run, else the
        // interface GLOO_SOCKET_IFNAME names (as torch.distributed), else what the hostname resolves to
        String ifname = System.getenv("GLOO_SOCKET_IFNAME");
        var dev = loopback(env.masterAddr()) ? ProcessGroupGloo.createDeviceForHostname("127.0.0.1")
                : ifname != null && !ifname.isBlank() ? ProcessGroupGloo.createDeviceForInterface(ifname.trim())
                : ProcessGroupGloo.createDefaultDevice();
        o.devices(new GlooDeviceVector(dev));
        return new ProcessGroupGloo(store, env.rank(), env.worldSize(), o);
    }

    private static boolean loopback(String host) {
        try {
            return InetAddress.getByName(host).isLoopbackAddress();
        } catch (IOException e) {
            return false;
        }
    }

    @Override
    public int rank() {
        return env.rank();
    }

    @Override
    public int worldSize() {
        return env.worldSize();
    }

    public String backendName() {
        return backendName;
    }

    @Override
    public double collectiveSeconds() {
        return busyNanos / 1e9;
    }

    /**
     * Collective operations this rank has entered: each is one arrival, one round trip to the
     * store on rank 0, however many buckets it moves.
     */
    public long operations() {
        return calls;
    }

    @Override
    public void sum(double[] x, String what) {
        if (x.length == 0) return;
        try (PointerScope scope = new PointerScope()) {
            Tensor t = Tensors.doubles(x).to(device, ScalarType.Double);
            allReduce(what, t);
            Tensor back = t.cpu().contiguous();
            back.data_ptr_double().get(x);
        }
    }

    /**
     * Each bucket flattened (a copy, unless it is one contiguous tensor) when its turn comes and
     * copied back once summed, then freed: a few flat buckets exist at once, not a copy of every
     * tensor (the fp32 gradients of an unsharded model: 4 bytes a parameter more on the device).
     */
    @Override
    public void sumTensors(List<Tensor> tensors, String what) {
        if (tensors.isEmpty()) return;
        List<List<Tensor>> buckets = buckets(tensors, bucketBytes);
        int[] first = new int[buckets.size()];
        for (int i = 1; i < buckets.size(); i++) first[i] = first[i - 1] + buckets.get(i - 1).size();
        sumEach(what, new Buckets() {
            @Override
            public int count() {
                return buckets.size();
            }

            @Override
            public String name(int i) {
                return "tensors " + first[i] + ".." + (first[i] + buckets.get(i).size() - 1) + " of " + tensors.size();
            }

            @Override
            public Tensor make(int i) {
                return torch.flatten_dense_tensors(new TensorVector(buckets.get(i).toArray(Tensor[]::new)));
            }

            @Override
            public void done(int i, Tensor flat) {
                List<Tensor> b = buckets.get(i);
                TensorVector parts = torch.unflatten_dense_tensors(flat, new TensorVector(b.toArray(Tensor[]::new)));
                for (int j = 0; j < b.size(); j++) b.get(j).copy_(parts.get(j));
            }
        });
    }

    /**
     * One arrival for the whole sequence, then a window of {@link #WINDOW} buckets: bucket i + WINDOW
     * is made and started once bucket i is summed and handed back. A failure names the operation
     * and the bucket it was at (made or awaited), and the ranks that did not arrive.
     */
    @Override
    public void sumEach(String what, Buckets buckets) {
        int n = buckets.count();
        if (n == 0) return;
        long t0 = System.nanoTime();
        arrive(what);
        ArrayDeque<InFlight> flight = new ArrayDeque<>(WINDOW);
        int at = 0;  // the bucket being made or awaited, for the error
        try (PointerScope scope = new PointerScope()) {
            AllreduceOptions o = new AllreduceOptions();
            o.timeout(new Milliseconds(timeoutMs));
            for (int i = 0; i < n; i++) {
                if (flight.size() == WINDOW) {
                    at = flight.peek().bucket();
                    land(flight.poll(), buckets, what, n);
                }
                at = i;
                flight.add(launch(i, buckets, o));
            }
            while (!flight.isEmpty()) {
                at = flight.peek().bucket();
                land(flight.poll(), buckets, what, n);
            }
        } catch (OwnFailure e) {
            // this rank's own making or handing back of a bucket failed (out of memory, say): its own error, as it
            // is, not a failed collective that would blame a peer (and keep this rank from announcing it)
            throw e.cause;
        } catch (RuntimeException e) {
            throw failure(bucketName(what, buckets, at, n), e);
        } finally {
            for (InFlight f : flight) f.release();  // after a failure: the backend holds its own references to what it still uses
            busyNanos += System.nanoTime() - t0;
        }
    }

    /** A started bucket: its tensor and its work, each one reference of ours, released once it has landed. */
    private record InFlight(int bucket, Tensor tensor, Work work) {
        void release() {
            tensor.releaseReference();
            work.releaseReference();
        }
    }

    /** A failure of this rank's own part of {@link #sumEach} (a bucket's making or handing back), carried to its catch. */
    private static final class OwnFailure extends RuntimeException {
        final RuntimeException cause;

        OwnFailure(RuntimeException cause) {
            super(cause.getMessage(), cause, false, false);
            this.cause = cause;
        }
    }

    /** Makes bucket i (its temporaries freed here) and starts its all-reduce. */
    private InFlight launch(int i, Buckets buckets, AllreduceOptions o) {
        try (PointerScope making = new PointerScope()) {
            // a handle of our own, whatever scope (if any) owns the one make returned
            Tensor t;
            try {
                t = Scopes.retain(new Tensor(buckets.make(i)));
            } catch (RuntimeException e) {
                throw new OwnFailure(e);
            }
            try {
                return new InFlight(i, t, Scopes.retain(backend.allreduce(new TensorVector(t), o)));
            } catch (RuntimeException e) {
                t.releaseReference();
                throw e;
            }
        }
    }

    /** Awaits the oldest bucket and hands it back; then frees it. */
    private void land(InFlight f, Buckets buckets, String what, int n) {
        try (PointerScope scope = new PointerScope()) {
            await(f.work(), bucketName(what, buckets, f.bucket(), n));
            try {
                buckets.done(f.bucket(), f.tensor());
            } catch (RuntimeException e) {
                throw new OwnFailure(e);
            }
        } finally {
            f.release();
        }
    }

    private static String bucketName(String what, Buckets buckets, int i, int n) {
        return n == 1 ? what : what + ", bucket " + (i + 1) + " of " + n + " (" + buckets.name(i) + ")";
    }

    /** All-reduces (sum) one tensor in place: a sequence of one bucket. */
    private void allReduce(String what, Tensor t) {
        sumEach(what, new Buckets() {
            @Override
            public int count() {
                return 1;
            }

            @Override
            public String name(int i) {
                return what;
            }

            @Override
            public Tensor make(int i) {
                return t;
            }

            @Override
            public void done(int i, Tensor summed) {
            }
        });
    }

    /**
     * NCCL: its flat all-gather. Gloo: every rank writes its chunk into a zeroed buffer and the
     * buffer is all-reduced: x + 0 is x, so the gathered values are exact.
     */
    @Override
    public void allGather(Tensor chunk, Tensor full, String what) {
        checkChunks(full, chunk, what);
        if (backendName.equals("nccl")) {
            collective(what, () -> {
                AllgatherOptions o = new AllgatherOptions();
                o.timeout(new Milliseconds(timeoutMs));
                return List.of(backend._allgather_base(full, chunk, o));
            });
            return;
        }
        try (PointerScope scope = new PointerScope()) {
            full.zero_();
            full.narrow(0, rank() * chunk.numel(), chunk.numel()).copy_(chunk);
        }
        allReduce(what, full);
    }

    private void checkChunks(Tensor full, Tensor chunk, String what) {
        if (full.dim() != 1 || chunk.dim() != 1 || full.numel() != chunk.numel() * worldSize()) {
            throw new IllegalArgumentException(what + ": a flat buffer of " + worldSize() + " chunks of " + chunk.numel()
                    + " elements is needed, got " + full.numel() + " elements (dims " + full.dim() + ", " + chunk.dim() + ")");
        }
    }

    /** Starts the works of one collective and awaits them, each wait bounded, with this class's error reporting. */
    private void collective(String what, java.util.function.Supplier<List<Work>> start) {
        long t0 = System.nanoTime();
        arrive(what);
        try (PointerScope scope = new PointerScope()) {
            for (Work w : start.get()) await(w, what);
        } catch (RuntimeException e) {
            throw failure(what, e);
        } finally {
            busyNanos += System.nanoTime() - t0;
        }
    }

    /**
     * Consecutive tensors of one dtype, about {@code bucketBytes} each (a tensor larger than that
     * alone): few large messages instead of one per tensor.
     */
    static List<List<Tensor>> buckets(List<Tensor> tensors, long bucketBytes) {
        List<List<Tensor>> buckets = new ArrayList<>();
        List<Tensor> cur = new ArrayList<>();
        long bytes = 0;
        for (Tensor t : tensors) {
            long b = t.numel() * t.element_size();
            // intern(): scalar_type() returns a fresh enum object each call, so == never holds without it
            if (!cur.isEmpty() && (bytes + b > bucketBytes || cur.get(0).scalar_type().intern() != t.scalar_type().intern())) {
                buckets.add(cur);
                cur = new ArrayList<>();
                bytes = 0;
            }
            cur.add(t);
            bytes += b;
        }
        if (!cur.isEmpty()) buckets.add(cur);
        return buckets;
    }

    @Override
    public void barrier(String what) {
        long t0 = System.nanoTime();
        arrive(what);
        try (PointerScope scope = new PointerScope()) {
            await(backend.barrier(barrierOptions(timeoutMs, device)), what);
        } catch (RuntimeException e) {
            throw failure(what, e);
        } finally {
            busyNanos += System.nanoTime() - t0;
        }
    }

    /**
     * Each rank sets its key of this point, then looks at the store, at first every millisecond, then
     * every {@link #POLL_MS}, until every rank's key is there or a rank has failed: the store alone,
     * not the backend, so that it works alike on Gloo and NCCL, and sees a failure the backend cannot.
     */
    @Override
    public void awaitReady(String what) {
        if (closed) throw new IllegalStateException("the process group is closed (" + what + ")");
        long t0 = System.nanoTime();
        long n = ++readyPoints;
        String where = what + " (ready point " + n + ")";
        String[] keys = new String[worldSize()];
        for (int r = 0; r < keys.length; r++) keys[r] = READY + n + "/" + r;
        try (PointerScope scope = new PointerScope()) {
            store.set(keys[rank()], new ByteVector(new byte[] {1}));
            StringVector all = new StringVector(keys);
            long[] beats = new long[keys.length], movedAt = new long[keys.length];  // each rank's heartbeat, when it last moved
            java.util.Arrays.fill(beats, -1);
            long lookedAt = t0;
            for (long pause = 1; ; pause = Math.min(2 * pause, POLL_MS)) {
                if (store.add(FAILED, 0) > 0) throw othersFailed(where);
                if (store.check(all)) return;
                long now = System.nanoTime();
                if (now - t0 > timeoutMs * 1_000_000L) {
                    failureKnown = true;
                    throw notReady(where, keys);
                }
                if (now - lookedAt > HEARTBEAT_MS * 1_000_000L) {  // once a heartbeat: ranks not there yet that stopped beating
                    long before = lookedAt;
                    lookedAt = now;
                    List<Integer> deadRanks = new ArrayList<>();
                    String dead = deadRanks(keys, beats, movedAt, now, before, deadRanks);
                    if (dead != null) {
                        declareDead(deadRanks, "before " + where);
                        throw new DistributedException("rank " + rank() + ": " + where + ": " + dead + " stopped without a word "
                                + "(its heartbeat in the store has not moved for " + heartbeatStaleMs / 1000.0 + " s): it died (killed, "
                                + "out of memory, a crash); its own output or the system log may say why");
                    }
                }
                Thread.sleep(pause);
            }
        } catch (DistributedException e) {
            throw e;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new DistributedException("rank " + rank() + ": interrupted while waiting at " + where, e);
        } catch (RuntimeException e) {
            failureKnown = true;
            throw new DistributedException("rank " + rank() + ": " + where + " failed: " + storeGone(e), e);
        } finally {
            busyNanos += System.nanoTime() - t0;
        }
    }

    /** The error of a ready point at which a rank announced a failure: every failed rank and its reason. */
    private DistributedException othersFailed(String where) {
        StringBuilder why = new StringBuilder();
        boolean rank0Failed = false;
        for (int r = 0; r < worldSize(); r++) {
            if (r == rank()) continue;
            try (PointerScope scope = new PointerScope()) {
                if (!store.check(new StringVector(new String[] {FAILURE + r}))) continue;
                String m = new String(store.get(FAILURE + r).get(), StandardCharsets.UTF_8);
                why.append(why.isEmpty() ? "" : "; ").append("rank ").append(r).append(" failed ").append(m);
                rank0Failed |= r == 0;
            }
        }
        if (!failureKnown) {
            failureKnown = true;
            if (rank() != 0) store.add(SEEN, 1);
        }
        if (rank() == 0) lingerForOthers();
        else if (rank0Failed) awaitRank0sEnd();
        if (why.isEmpty()) why.append("a rank failed (its reason is not in the store)");
        return new DistributedException("rank " + rank() + ": stopped at " + where + ": " + why
                + " (its own output has the details); every rank stops");
    }

    /**
     * Whether this rank went {@link #PAUSED_MS} or more without a look at the heartbeats ({@code before}: its last
     * look): then it was paused itself (the whole job stopped, SIGSTOP or a scheduler's suspend, the machine asleep;
     * or this process starved), and the others' heartbeats, frozen in the same pause, are no evidence against them.
     * Their silence is counted from now ({@code movedAt}), so that a rank is judged on what this one saw awake.
     */
    private static boolean pausedSince(long before, long now, long[] movedAt) {
        if (now - before < PAUSED_MS * 1_000_000L) return false;
        java.util.Arrays.fill(movedAt, now);
        return true;
    }

    /** A gap between two looks at the heartbeats (about HEARTBEAT_MS apart) that means this rank itself was paused. */
    static final long PAUSED_MS = 3 * HEARTBEAT_MS;

    /** The ranks not yet at this ready point whose heartbeat has not moved for heartbeatStaleMs ("rank 1, rank 3"), or null. */
    private String deadRanks(String[] keys, long[] beats, long[] movedAt, long now, long before, List<Integer> ranks) {
        if (pausedSince(before, now, movedAt)) return null;
        StringBuilder dead = new StringBuilder();
        try (PointerScope scope = new PointerScope()) {
            for (int r = 0; r < keys.length; r++) {
                if (r == rank() || store.check(new StringVector(new String[] {keys[r]}))) continue;
                long b = store.add(ALIVE + r, 0);
                if (b != beats[r]) {
                    beats[r] = b;
                    movedAt[r] = now;
                } else if (now - movedAt[r] > heartbeatStaleMs * 1_000_000L) {
                    dead.append(dead.isEmpty() ? "rank " : ", rank ").append(r);
                    ranks.add(r);
                }
            }
        }
        return dead.isEmpty() ? null : dead.toString();
    }

    private DistributedException notReady(String where, String[] keys) {
        StringBuilder missing = new StringBuilder();
        try (PointerScope scope = new PointerScope()) {
            for (int r = 0; r < keys.length; r++) {
                if (!store.check(new StringVector(new String[] {keys[r]}))) missing.append(missing.isEmpty() ? "rank " : ", rank ").append(r);
            }
        }
        return new DistributedException("rank " + rank() + ": " + where + " was not reached by " + missing + " within " + seconds()
                + " (distributed.timeout_s): it died or stalls");
    }

    /**
     * Sets this rank's reason in the store and counts it in; rank 0 then waits until the other ranks
     * know (each counts itself in {@link #SEEN} when it reads it, or announces its own failure), at most
     * {@link #LINGER_MS} or distributed.timeout_s: its store ends with its process.
     */
    @Override
    public void announceFailure(String what, Throwable cause) {
        if (closed || failureKnown) return;
        failureKnown = true;
        try (PointerScope scope = new PointerScope()) {
            byte[] m = (what + ": " + reason(cause)).getBytes(StandardCharsets.UTF_8);
            store.set(FAILURE + rank(), new ByteVector(m));
            store.add(FAILED, 1);
            if (rank() != 0) store.add(SEEN, 1);
            else lingerForOthers();
        } catch (RuntimeException e) {
            // the store is gone (rank 0 died) or broken: the others learn of this rank from the backend, or their timeout
        }
    }

    /**
     * This rank found {@code dead} silent (their heartbeats stale) {@code where}: it records that in the store as their
     * failure (the first rank to see one does), so that every rank still waiting stops naming them at its next look. Rank
     * 0 then keeps its store up until they have read it: with three ranks or more, a rank that looked after rank 0 had
     * ended found the store gone with rank 0's process, and named rank 0 as the one that died.
     */
    private void declareDead(List<Integer> dead, String where) {
        failureKnown = true;
        try (PointerScope scope = new PointerScope()) {
            for (int d : dead) {
                if (store.add(DEAD + d, 1) != 1) continue;  // another rank saw it first
                String m = where + ": it stopped without a word (its heartbeat in the store had not moved for " + heartbeatStaleMs / 1000.0
                        + " s when rank " + rank() + " looked): it died (killed, out of memory, a crash, its node lost)";
                store.set(FAILURE + d, new ByteVector(m.getBytes(StandardCharsets.UTF_8)));
                store.add(DEAD_COUNT, 1);
                store.add(FAILED, 1);
            }
            if (rank() != 0) store.add(SEEN, 1);
            else lingerForOthers();
        } catch (RuntimeException e) {
            // the store is gone (rank 0 died as well) or broken: the others name what they see themselves
        }
    }

    /** Rank 0 after a failure: waits (bounded) until every other rank but the dead ones has read it from its store. */
    private void lingerForOthers() {
        long end = System.nanoTime() + Math.min(LINGER_MS, timeoutMs) * 1_000_000L;
        try {
            for (long pause = 1; store.add(SEEN, 0) < worldSize() - 1 - store.add(DEAD_COUNT, 0) && System.nanoTime() < end;
                 pause = Math.min(2 * pause, POLL_MS)) {
                Thread.sleep(pause);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (RuntimeException e) {
            // the store is broken: nobody can read it anyway
        }
    }

    /**
     * After reading rank 0's failure: waits (at most {@link #RANK0_END_MS}) until rank 0's process has
     * ended, its store with it, so that this rank does not end first: `drmas launch` reports the first
     * rank to end, and its status, as the run's failure (rank 0 kept its store up for this rank, so
     * this rank alone would otherwise end first). Where rank 0 lives on (ranks as threads) it waits
     * the whole bound.
     */
    private void awaitRank0sEnd() {
        long end = System.nanoTime() + Math.min(RANK0_END_MS, timeoutMs) * 1_000_000L;
        try {
            while (System.nanoTime() < end) {
                store.add(SEEN, 0);
                Thread.sleep(POLL_MS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (RuntimeException gone) {
            // rank 0 has ended
        }
    }

    /**
     * What a failed rank says: the messages of the exception and its causes, each once, the first
     * line of each (as the CLI prints an error: a file system error as "path: reason").
     */
    static String reason(Throwable t) {
        List<String> parts = new ArrayList<>();
        String text = "";
        int depth = 0;
        for (Throwable x = t; x != null && depth < 10; x = x.getCause(), depth++) {
            String m;
            if (x instanceof java.nio.file.FileSystemException f) {
                String why = f.getReason() != null ? f.getReason() : switch (f) {
                    case java.nio.file.NoSuchFileException e -> "no such file or folder";
                    case java.nio.file.AccessDeniedException e -> "permission denied";
                    case java.nio.file.FileAlreadyExistsException e -> "already exists";
                    case java.nio.file.NotDirectoryException e -> "not a folder";
                    default -> f.getClass().getSimpleName();
                };
                m = f.getFile() != null ? f.getFile() + ": " + why : why;
            } else {
                // a wrapper made from its cause alone (new UncheckedIOException(e)) adds nothing
                m = x.getMessage() == null || x.getCause() != null && x.getMessage().equals(x.getCause().toString()) ? null
                        : firstLine(x);
            }
            if (m == null || m.isBlank() || text.contains(m)) continue;
            parts.add(m);
            text = String.join(": ", parts);
        }
        return parts.isEmpty() ? t.getClass().getSimpleName() : text;
    }

    /**
     * A barrier bounded by {@code timeoutMs}, on {@code device} when it is a GPU. ProcessGroupNCCL's
     * barrier is an all-reduce of one number on a device it must choose: device_ids[0] when given,
     * else one a collective has used, else a guess, rank % (devices it sees), which is wrong when ranks
     * are not placed in order on their nodes, and it is the first collective of a run (Trainer's
     * start). The Backend reads device_ids; BarrierOptions.device is for c10d's ProcessGroup wrapper,
     * which this class does not use. Gloo's barrier needs no device.
     */
    static BarrierOptions barrierOptions(long timeoutMs, Device device) {
        BarrierOptions o = new BarrierOptions();
        o.timeout(new Milliseconds(timeoutMs));
        // an array: LongVector(long) is the vector of that many zeros
        if (device.is_cuda()) o.device_ids(new LongVector(new long[] {device.index()}));
        return o;
    }

    /**
     * Waits for {@code w}, bounded by distributed.timeout_s; a wait that ends incomplete is a failure
     * like c10d's own timeouts (the caller's {@link #failure} then names the ranks that did not arrive).
     * It polls instead of blocking in the backend, so that it sees what the backend cannot: a rank that
     * announced a failure ({@link #announceFailure}: it threw mid-step and lives on, so its peers'
     * backend sees nothing) and a rank behind this one whose heartbeat stopped (a dead NCCL peer on
     * another node, which NCCL does not detect). Work that is done at once costs one isCompleted()
     * and no store traffic; else isCompleted() (non-blocking on Gloo and NCCL) between sleeps growing
     * to {@link #SPIN_CAP_NS}, and the store about once every {@link #HEARTBEAT_MS}. A bounded
     * _wait(timeout) is not polled: c10d's throws when it expires (NCCL's aborts). Once complete,
     * _wait() surfaces the backend's own error, as before.
     */
    private void await(Work w, String what) {
        if (!w.isCompleted()) poll(w, what);
        if (!w._wait(new Milliseconds(timeoutMs))) {  // complete: returns at once (or throws the backend's error)
            throw new IllegalStateException(what + " did not complete within " + seconds());
        }
    }

    /** The longest sleep between two isCompleted() of a collective being awaited: the most it can add to one wait. */
    static final long SPIN_CAP_NS = 1_000_000;

    private void poll(Work w, String what) {
        long t0 = System.nanoTime(), end = t0 + timeoutMs * 1_000_000L, look = t0 + HEARTBEAT_MS * 1_000_000L, lookedAt = t0;
        long[] beats = null, movedAt = null;
        for (long pause = 10_000; !w.isCompleted(); pause = Math.min(pause + pause / 2, SPIN_CAP_NS)) {
            long now = System.nanoTime();
            if (now - end > 0) throw new IllegalStateException(what + " did not complete within " + seconds());
            if (now - look > 0) {  // about once a heartbeat: a rank that announced a failure, or one behind that died
                look = now + HEARTBEAT_MS * 1_000_000L;
                if (store.add(FAILED, 0) > 0) throw othersFailed(what + " (collective " + calls + ")");
                if (beats == null) {
                    beats = new long[worldSize()];
                    movedAt = new long[worldSize()];
                    java.util.Arrays.fill(beats, -1);
                }
                List<Integer> deadRanks = new ArrayList<>();
                String dead = deadBehind(beats, movedAt, now, lookedAt, deadRanks);
                lookedAt = now;
                if (dead != null) {
                    declareDead(deadRanks, "before " + what + " (collective " + calls + ")");
                    throw new DistributedException("rank " + rank() + ": " + what + " (collective " + calls + "): " + dead
                            + " did not arrive and stopped without a word (its heartbeat in the store has not moved for "
                            + heartbeatStaleMs / 1000.0 + " s): it died (killed, out of memory, a crash, its node lost); its own "
                            + "output or the system log may say why");
                }
            }
            java.util.concurrent.locks.LockSupport.parkNanos(pause);
            if (Thread.interrupted()) {
                Thread.currentThread().interrupt();
                throw new DistributedException("rank " + rank() + ": interrupted while waiting for " + what);
            }
        }
    }

    /**
     * The ranks behind this one (their arrival counters lower than this rank's) whose heartbeat has
     * not moved for heartbeatStaleMs ("rank 1 (at collective 4), rank 3 (...)"), or null.
     */
    private String deadBehind(long[] beats, long[] movedAt, long now, long before, List<Integer> ranks) {
        if (pausedSince(before, now, movedAt)) return null;
        StringBuilder dead = new StringBuilder();
        for (int r = 0; r < worldSize(); r++) {
            if (r == rank()) continue;
            long at = store.add(ARRIVED + r, 0);
            if (at >= calls) continue;
            long b = store.add(ALIVE + r, 0);
            if (b != beats[r]) {
                beats[r] = b;
                movedAt[r] = now;
            } else if (now - movedAt[r] > heartbeatStaleMs * 1_000_000L) {
                dead.append(dead.isEmpty() ? "" : ", ").append("rank ").append(r).append(" (at collective ").append(at).append(")");
                ranks.add(r);
            }
        }
        return dead.isEmpty() ? null : dead.toString();
    }

    private void arrive(String what) {
        if (closed) throw new IllegalStateException("the process group is closed (" + what + ")");
        calls++;
        try {
            store.add(ARRIVED + rank(), 1);
        } catch (RuntimeException e) {
            throw failure(what, e);
        }
    }

    /**
     * The error of a failed collective, naming the ranks that did not arrive at it (their counters
     * in the store are behind this rank's) or, when the store itself is gone, rank 0 that hosted it.
     */
    private DistributedException failure(String what, RuntimeException cause) {
        if (cause instanceof DistributedException d) {
            failureKnown = true;
            return d;
        }
        // a rank that announced its failure and then closed its group (its process ending) makes the backend fail here
        // before this rank's next look at the store: the announced reason is the one to give, not "did not arrive"
        try {
            if (!failureKnown && store.add(FAILED, 0) > 0) return othersFailed(what + " (collective " + calls + ")");
        } catch (RuntimeException e) {
            // the store is gone: named below
        }
        // every rank in the collective sees it fail (a rank that announced this would keep rank 0 waiting for a dead one)
        failureKnown = true;
        StringBuilder behind = new StringBuilder(), others = new StringBuilder();
        String culprit;
        try {
            for (int r = 0; r < worldSize(); r++) {
                if (r == rank()) continue;
                others.append(others.isEmpty() ? "" : ", ").append(r);
                long theirs = store.add(ARRIVED + r, 0);
                if (theirs < calls) behind.append(behind.isEmpty() ? "" : ", ").append("rank ").append(r)
                        .append(" (at collective ").append(theirs).append(")");
            }
            culprit = !behind.isEmpty() ? behind + " did not arrive: it died or stalls"
                    : "a peer dropped out during it (every other rank had arrived: rank " + others + ")";
        } catch (RuntimeException e) {
            culprit = storeGone(e);
        }
        return new DistributedException("rank " + rank() + ": " + what + " (collective " + calls + ") failed after at most "
                + seconds() + " (distributed.timeout_s): " + culprit + "; c10d said: " + firstLine(cause), cause);
    }

    /** What a store operation that failed means: rank 0, which hosts the store, is gone. */
    private String storeGone(RuntimeException e) {
        return "rank 0 died (its store at " + env.masterAddr() + ":" + env.masterPort() + " is unreachable: " + firstLine(e) + ")";
    }

    private String seconds() {
        return timeoutMs / 1000.0 + " s";
    }

    static String firstLine(Throwable e) {
        String m = String.valueOf(e.getMessage());
        // c10d messages carry a C++ stack trace after the first line
        int nl = m.indexOf('\n');
        return (nl > 0 ? m.substring(0, nl) : m).trim();
    }

    /**
     * Tests only: releases the backend as this rank's process ending would (Gloo closes its connections, which
     * its peers' pending collectives see as "Connection closed by peer"). Ranks in tests are threads of one
     * JVM, whose backends otherwise live until the collector frees them.
     */
    void releaseBackendForTest() {
        close();
        backend.close();
    }

    @Override
    public void close() {
        if (closed) return;
        closed = true;
        heartbeat.interrupt();
        // Gloo has no shutdown; NCCL's releases its communicators (the presets free the rest)
        if (backendName.equals("nccl")) Nccl.shutdown(backend);
    }
}
