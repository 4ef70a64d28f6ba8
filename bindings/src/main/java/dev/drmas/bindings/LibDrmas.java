// LibDrmas.java — one FFM downcall handle per C function of native/include/drmas.h, the
// layouts of its config structs (checked once against the loaded library's own, through
// drmas_abi_value), and the status check that turns a failed call into a DrmasException
// carrying the library's message.
// Kernel calls exist in two flavours: "critical" handles (Linker.Option.critical(true)) let
// CPU calls read Java arrays in place, with no copy; CUDA calls, which synchronise a stream,
// use ordinary handles so that they never hold off the garbage collector.
package dev.drmas.bindings;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_DOUBLE;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.PaddingLayout;
import java.lang.foreign.StructLayout;
import java.lang.invoke.MethodHandle;
import java.util.ArrayList;
import java.util.List;

/** Raw bindings; most code wants {@link Kernels}. */
public final class LibDrmas {
    private LibDrmas() {}

    /** struct drmas_norm_config, field for field (40 bytes); checked against the library by {@link #requireAbi}. */
    public static final StructLayout NORM_CONFIG = MemoryLayout.structLayout(
            JAVA_INT.withName("mean_from"), JAVA_INT.withName("std_from"), JAVA_INT.withName("numerator"),
            JAVA_INT.withName("global_pooling"), JAVA_INT.withName("singleton"), JAVA_INT.withName("ddof"),
            JAVA_INT.withName("scale_by_std"), JAVA_INT.withName("reserved"),
            JAVA_DOUBLE.withName("eps")).withName("drmas_norm_config");
    /** struct drmas_loss_config, field for field (48 bytes); checked against the library by {@link #requireAbi}. */
    public static final StructLayout LOSS_CONFIG = MemoryLayout.structLayout(
            JAVA_DOUBLE.withName("clip_low"), JAVA_DOUBLE.withName("clip_high"), JAVA_DOUBLE.withName("dual_clip"),
            JAVA_DOUBLE.withName("kl_coef"), JAVA_DOUBLE.withName("normalizer"),
            JAVA_INT.withName("kl_type"), JAVA_INT.withName("per_row_mean")).withName("drmas_loss_config");
    /** struct drmas_lmhead_config, field for field (56 bytes); checked against the library by {@link #requireAbi}. */
    public static final StructLayout LMHEAD_CONFIG = MemoryLayout.structLayout(
            JAVA_DOUBLE.withName("clip_low"), JAVA_DOUBLE.withName("clip_high"), JAVA_DOUBLE.withName("dual_clip"),
            JAVA_DOUBLE.withName("kl_coef"), JAVA_DOUBLE.withName("normalizer"), JAVA_DOUBLE.withName("entropy_coef"),
            JAVA_INT.withName("kl_type"), JAVA_INT.withName("per_row_mean")).withName("drmas_lmhead_config");

    private static final Linker LINKER = Linker.nativeLinker();

    private static MethodHandle handle(String name, FunctionDescriptor desc, boolean critical) {
        MemorySegment symbol = NativeLibrary.get().lookup().find(name).orElseThrow(
                () -> new IllegalStateException("libdrmas at " + NativeLibrary.get().path() + " has no symbol " + name
                        + " (a stale build? rebuild with `mvn package`)"));
        return critical ? LINKER.downcallHandle(symbol, desc, Linker.Option.critical(true))
                : LINKER.downcallHandle(symbol, desc);
    }

    // The handles, one holder class per family of functions: a class is initialised (its handles
    // made) on its first use, so that a command pays only for the families it calls: making a
    // downcall handle costs a cold JVM milliseconds, and all forty at the first call were a
    // tenth of a second of `drmas normalize`'s start-up (bench/README.md).
    private static final class Core {
        static final MethodHandle LAST_ERROR = handle("drmas_last_error", FunctionDescriptor.of(ADDRESS), false);
        static final MethodHandle VERSION = handle("drmas_version", FunctionDescriptor.of(ADDRESS), false);
        static final MethodHandle CUDA_COMPILED = handle("drmas_cuda_compiled", FunctionDescriptor.of(JAVA_INT), false);
        static final MethodHandle CUDA_AVAILABLE = handle("drmas_cuda_available", FunctionDescriptor.of(JAVA_INT), false);
        static final MethodHandle SET_THREADS = handle("drmas_set_num_threads", FunctionDescriptor.of(JAVA_INT, JAVA_INT), false);
        static final MethodHandle GET_THREADS = handle("drmas_get_num_threads", FunctionDescriptor.of(JAVA_INT), false);
        static final MethodHandle ABI_VALUE = handle("drmas_abi_value", FunctionDescriptor.of(JAVA_LONG, ADDRESS), false);
    }

    private static final class Stats {
        static final FunctionDescriptor STATS = FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, ADDRESS, ADDRESS,
                JAVA_LONG, JAVA_INT, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS);
        static final MethodHandle STATS_CRIT = handle("drmas_segment_stats_f32", STATS, true);
        static final MethodHandle STATS_PLAIN = handle("drmas_segment_stats_f32", STATS, false);
    }

    private static final class Adv {
        static final FunctionDescriptor ADV = FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS,
                ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_LONG, ADDRESS, ADDRESS, ADDRESS);
        static final MethodHandle ADV_CRIT = handle("drmas_advantage_f32", ADV, true);
        static final MethodHandle ADV_PLAIN = handle("drmas_advantage_f32", ADV, false);
        static final MethodHandle ADV_TRUSTED_CRIT = handle("drmas_advantage_trusted_f32", ADV, true);
        static final MethodHandle ADV_TRUSTED_PLAIN = handle("drmas_advantage_trusted_f32", ADV, false);
    }

    private static final class Bcast {
        static final FunctionDescriptor BCAST = FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, ADDRESS, ADDRESS,
                JAVA_LONG, ADDRESS, ADDRESS);
        static final MethodHandle BCAST_CRIT = handle("drmas_broadcast_rows_f32", BCAST, true);
        static final MethodHandle BCAST_PLAIN = handle("drmas_broadcast_rows_f32", BCAST, false);
    }

    private static final class Loss {
        static final FunctionDescriptor LOSS = FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS,
                JAVA_LONG, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS);
        static final MethodHandle LOSS_CRIT = handle("drmas_clipped_loss_f32", LOSS, true);
        static final MethodHandle LOSS_PLAIN = handle("drmas_clipped_loss_f32", LOSS, false);
        // drmas_clipped_loss_async_f32: LOSS with the host copy of the offsets before the device one
        static final FunctionDescriptor LOSS_ASYNC = FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS,
                ADDRESS, JAVA_LONG, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS);
        static final MethodHandle LOSS_ASYNC_CRIT = handle("drmas_clipped_loss_async_f32", LOSS_ASYNC, true);
        static final MethodHandle LOSS_ASYNC_PLAIN = handle("drmas_clipped_loss_async_f32", LOSS_ASYNC, false);
        // drmas_clipped_loss_rows_f32: LOSS_ASYNC's signature, one advantage per row
        static final MethodHandle LOSS_ROWS_CRIT = handle("drmas_clipped_loss_rows_f32", LOSS_ASYNC, true);
        static final MethodHandle LOSS_ROWS_PLAIN = handle("drmas_clipped_loss_rows_f32", LOSS_ASYNC, false);
    }

    private static final class Decode {
        // drmas_decode_attention_f32: CPU only, so critical (heap arrays read in place) only
        static final MethodHandle DECODE_ATTN = handle("drmas_decode_attention_f32", FunctionDescriptor.of(JAVA_INT, JAVA_INT,
                JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, ADDRESS, JAVA_LONG, ADDRESS, ADDRESS, JAVA_DOUBLE, ADDRESS, ADDRESS,
                ADDRESS, ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, ADDRESS, JAVA_DOUBLE, ADDRESS), true);

        // the decoding step's other ops (drmas_rms_norm_f32, drmas_swiglu_f32, drmas_sample_f32): CPU only, so critical only
        static final MethodHandle RMS_NORM = handle("drmas_rms_norm_f32", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG,
                JAVA_LONG, ADDRESS, JAVA_LONG, ADDRESS, JAVA_LONG, ADDRESS, JAVA_DOUBLE, ADDRESS, JAVA_LONG), true);
        static final MethodHandle SWIGLU = handle("drmas_swiglu_f32", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG,
                JAVA_LONG, ADDRESS, JAVA_LONG, ADDRESS, JAVA_LONG, ADDRESS, JAVA_LONG), true);
        static final MethodHandle SAMPLE = handle("drmas_sample_f32", FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG,
                JAVA_LONG, ADDRESS, JAVA_LONG, JAVA_DOUBLE, JAVA_LONG, JAVA_DOUBLE, ADDRESS, ADDRESS, ADDRESS), true);
    }

    private static final class Lmhead {
        static final FunctionDescriptor LMHEAD_LOGPROBS = FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_LONG,
                ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS);
        static final MethodHandle LMHEAD_LOGPROBS_CRIT = handle("drmas_lmhead_logprobs_f32", LMHEAD_LOGPROBS, true);
        static final MethodHandle LMHEAD_LOGPROBS_PLAIN = handle("drmas_lmhead_logprobs_f32", LMHEAD_LOGPROBS, false);
        static final MethodHandle LMHEAD_LOGPROBS_BF16_CRIT = handle("drmas_lmhead_logprobs_bf16", LMHEAD_LOGPROBS, true);
        static final MethodHandle LMHEAD_LOGPROBS_BF16_PLAIN = handle("drmas_lmhead_logprobs_bf16", LMHEAD_LOGPROBS, false);
        static final FunctionDescriptor LMHEAD_CHUNK = FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS,
                JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS,
                ADDRESS, ADDRESS, ADDRESS);
        static final MethodHandle LMHEAD_CHUNK_CRIT = handle("drmas_lmhead_chunk_f32", LMHEAD_CHUNK, true);
        static final MethodHandle LMHEAD_CHUNK_PLAIN = handle("drmas_lmhead_chunk_f32", LMHEAD_CHUNK, false);
        static final MethodHandle LMHEAD_CHUNK_BF16_CRIT = handle("drmas_lmhead_chunk_bf16", LMHEAD_CHUNK, true);
        static final MethodHandle LMHEAD_CHUNK_BF16_PLAIN = handle("drmas_lmhead_chunk_bf16", LMHEAD_CHUNK, false);
    }

    // drmas_lmhead_chunk_async_*: LMHEAD_CHUNK with the host copy of the offsets before the device
    // one and the errors array before the stream (a class of its own: looked up on first use only)
    private static final class LmheadAsync {
        static final FunctionDescriptor LMHEAD_CHUNK_ASYNC = FunctionDescriptor.of(JAVA_INT, JAVA_INT, ADDRESS, JAVA_LONG, ADDRESS,
                ADDRESS, JAVA_LONG, JAVA_LONG, JAVA_LONG, JAVA_LONG, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS,
                ADDRESS, ADDRESS, ADDRESS, ADDRESS);
        static final MethodHandle CRIT = handle("drmas_lmhead_chunk_async_f32", LMHEAD_CHUNK_ASYNC, true);
        static final MethodHandle PLAIN = handle("drmas_lmhead_chunk_async_f32", LMHEAD_CHUNK_ASYNC, false);
        static final MethodHandle BF16_CRIT = handle("drmas_lmhead_chunk_async_bf16", LMHEAD_CHUNK_ASYNC, true);
        static final MethodHandle BF16_PLAIN = handle("drmas_lmhead_chunk_async_bf16", LMHEAD_CHUNK_ASYNC, false);
        // drmas_lmhead_logprobs_async_*: LMHEAD_LOGPROBS with the errors array before the stream
        static final FunctionDescriptor LOGPROBS_ASYNC = FunctionDescriptor.of(JAVA_INT, JAVA_INT, JAVA_LONG, JAVA_LONG,
                ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS, ADDRESS);
        static final MethodHandle LOGPROBS_CRIT = handle("drmas_lmhead_logprobs_async_f32", LOGPROBS_ASYNC, true);
        static final MethodHandle LOGPROBS_PLAIN = handle("drmas_lmhead_logprobs_async_f32", LOGPROBS_ASYNC, false);
        static final MethodHandle LOGPROBS_BF16_CRIT = handle("drmas_lmhead_logprobs_async_bf16", LOGPROBS_ASYNC, true);
        static final MethodHandle LOGPROBS_BF16_PLAIN = handle("drmas_lmhead_logprobs_async_bf16", LOGPROBS_ASYNC, false);
    }

    private static final class Cuda {
        static final MethodHandle CUDA_MALLOC = handle("drmas_cuda_malloc", FunctionDescriptor.of(JAVA_INT, JAVA_LONG, ADDRESS), false);
        static final MethodHandle CUDA_FREE = handle("drmas_cuda_free", FunctionDescriptor.of(JAVA_INT, ADDRESS), false);
        static final MethodHandle CUDA_MEMCPY = handle("drmas_cuda_memcpy", FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT), false);
        static final MethodHandle CUDA_SYNC = handle("drmas_cuda_synchronize", FunctionDescriptor.of(JAVA_INT, ADDRESS), false);
        static final MethodHandle CUDA_DEVICE_COUNT = handle("drmas_cuda_device_count", FunctionDescriptor.of(JAVA_INT), false);
        static final MethodHandle CUDA_SET_DEVICE = handle("drmas_cuda_set_device", FunctionDescriptor.of(JAVA_INT, JAVA_INT), false);
        static final MethodHandle CUDA_GET_DEVICE = handle("drmas_cuda_get_device", FunctionDescriptor.of(JAVA_INT, ADDRESS), false);
    }

    // Apart from Cuda: a library older than this function still serves the others.
    private static final class CudaCheck {
        static final MethodHandle CUDA_CHECK_DEVICE = handle("drmas_cuda_check_device", FunctionDescriptor.of(JAVA_INT, JAVA_INT), false);
    }

    private static String cString(MemorySegment p) {
        return p.equals(MemorySegment.NULL) ? "" : p.reinterpret(Long.MAX_VALUE).getString(0);
    }

    private static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) return r;
        if (t instanceof Error e) throw e;
        return new IllegalStateException(t);
    }

    // ---- a full GPU: someone else's cached device memory given back, once, and the call made again
    @FunctionalInterface
    private interface Call {
        int run() throws Throwable;
    }

    private static volatile Runnable cudaReclaimer;

    /**
     * What gives back device memory that another allocator holds unused, for a CUDA call whose
     * scratch (cudaMallocAsync, a few bytes a segment or row) did not fit: on a GPU that LibTorch's
     * caching allocator has filled with cached free blocks, that call would fail although the
     * memory is there. The trainer passes LibTorch's emptyCache. A CUDA call that fails with
     * DRMAS_ERR_ALLOC runs it once and is made again; a failed call leaves its outputs untouched
     * (drmas.h), so the second call starts from where the first did. null: none (the default).
     */
    public static void setCudaReclaimer(Runnable reclaimer) {
        cudaReclaimer = reclaimer;
    }

    private static int reclaiming(int device, Call call) throws Throwable {
        int status = call.run();
        Runnable reclaim = cudaReclaimer;
        if (status != DrmasException.ERR_ALLOC || device != Backend.CUDA.device() || reclaim == null) return status;
        try {
            reclaim.run();
        } catch (RuntimeException | LinkageError e) {
            return status;  // nothing given back: the call's own error stands
        }
        return call.run();
    }

    /** Throws a DrmasException with the library's message unless status is 0. */
    static void check(int status) {
        if (status != 0) throw new DrmasException(status, lastError());
    }

    public static String lastError() {
        try {
            return cString((MemorySegment) Core.LAST_ERROR.invokeExact());
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static String version() {
        try {
            return cString((MemorySegment) Core.VERSION.invokeExact());
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static boolean cudaCompiled() {
        try {
            return (int) Core.CUDA_COMPILED.invokeExact() != 0;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static boolean cudaAvailable() {
        try {
            return (int) Core.CUDA_AVAILABLE.invokeExact() != 0;
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Threads of the CPU backend; n &lt;= 0 restores the default. Returns the count in force. */
    public static int setNumThreads(int n) {
        try {
            return (int) Core.SET_THREADS.invokeExact(n);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    public static int numThreads() {
        try {
            return (int) Core.GET_THREADS.invokeExact();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * What the loaded library says a name of drmas.h is: a struct's size ("drmas_norm_config"), a
     * field's offset ("drmas_norm_config.eps") or a constant's value ("DRMAS_LOSS_KL"); -1 when it
     * does not know the name.
     */
    public static long abiValue(String name) {
        try (Arena arena = Arena.ofConfined()) {
            return (long) Core.ABI_VALUE.invokeExact(arena.allocateFrom(name));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * How {@code layout} (named as the C struct, its members as the C fields) differs from the struct
     * the library was compiled with: one line per difference, empty when they agree.
     */
    public static List<String> layoutMismatches(StructLayout layout) {
        String struct = layout.name().orElseThrow(() -> new IllegalArgumentException("the layout needs the C struct's name"));
        List<String> out = new ArrayList<>();
        long size = abiValue(struct);
        if (size != layout.byteSize()) {
            out.add(size < 0 ? "the library has no struct " + struct
                    : "sizeof(" + struct + ") is " + size + " in the library, " + layout.byteSize() + " in Java");
        }
        for (MemoryLayout m : layout.memberLayouts()) {
            if (m instanceof PaddingLayout) continue;
            String field = m.name().orElseThrow(() -> new IllegalArgumentException(struct + " has an unnamed member"));
            long c = abiValue(struct + "." + field);
            long java = layout.byteOffset(MemoryLayout.PathElement.groupElement(field));
            if (c != java) {
                out.add(c < 0 ? "the library's " + struct + " has no field " + field
                        : "offsetof(" + struct + ", " + field + ") is " + c + " in the library, " + java + " in Java");
            }
        }
        return out;
    }

    private static volatile boolean abiChecked;

    /**
     * Fails unless the config structs of this class match the loaded library's (a library built from
     * another drmas.h would otherwise read the config at the wrong offsets). Checked once per process.
     */
    static void requireAbi() {
        if (abiChecked) return;
        List<String> problems = new ArrayList<>(layoutMismatches(NORM_CONFIG));
        problems.addAll(layoutMismatches(LOSS_CONFIG));
        problems.addAll(layoutMismatches(LMHEAD_CONFIG));
        // the array sizes the Java side checks outputs against (a library that writes more sums or
        // diagnostics than these would write past arrays sized by them)
        for (var c : new Object[][] {{"DRMAS_LOSS_SUMS", AbiIndices.LOSS_SUMS}, {"DRMAS_LMHEAD_SUMS", AbiIndices.LMHEAD_SUMS},
                {"DRMAS_DIAG_FIELDS", AbiIndices.DIAG_FIELDS}}) {
            long v = abiValue((String) c[0]);
            if (v != (int) c[1]) problems.add(c[0] + " is " + v + " in the library, " + c[1] + " in Java");
        }
        if (!problems.isEmpty()) {
            throw new IllegalStateException("libdrmas at " + NativeLibrary.get().path() + " was built from another drmas.h than"
                    + " these bindings (a stale build? rebuild with `mvn package`): " + String.join("; ", problems));
        }
        abiChecked = true;
    }

    static int segmentStats(boolean critical, int device, long n, MemorySegment values, MemorySegment ids,
                            long numSegments, int ddof, MemorySegment count, MemorySegment mean, MemorySegment m2,
                            MemorySegment std, MemorySegment stream) {
        try {
            MethodHandle h = critical ? Stats.STATS_CRIT : Stats.STATS_PLAIN;
            return reclaiming(device, () -> (int) h.invokeExact(device, n, values, ids, numSegments, ddof, count, mean, m2, std, stream));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int advantage(boolean critical, boolean trusted, int device, MemorySegment cfg, long n, MemorySegment scores,
                         MemorySegment uid, MemorySegment traj, MemorySegment agent, long numUids, long numTrajs,
                         long numAgents, MemorySegment adv, MemorySegment diag, MemorySegment stream) {
        try {
            MethodHandle h = trusted ? (critical ? Adv.ADV_TRUSTED_CRIT : Adv.ADV_TRUSTED_PLAIN) : critical ? Adv.ADV_CRIT : Adv.ADV_PLAIN;
            return reclaiming(device, () -> (int) h.invokeExact(device, cfg, n, scores, uid, traj, agent, numUids, numTrajs, numAgents, adv, diag, stream));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int broadcastRows(boolean critical, int device, long numRows, MemorySegment rowValues,
                             MemorySegment offsets, long numTokens, MemorySegment out, MemorySegment stream) {
        try {
            MethodHandle h = critical ? Bcast.BCAST_CRIT : Bcast.BCAST_PLAIN;
            return reclaiming(device, () -> (int) h.invokeExact(device, numRows, rowValues, offsets, numTokens, out, stream));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int clippedLoss(boolean critical, int device, MemorySegment cfg, long numRows, MemorySegment offsets,
                           long numTokens, MemorySegment logp, MemorySegment oldLogp, MemorySegment adv,
                           MemorySegment ref, MemorySegment mask, MemorySegment grad, MemorySegment sums,
                           MemorySegment stream) {
        try {
            MethodHandle h = critical ? Loss.LOSS_CRIT : Loss.LOSS_PLAIN;
            return reclaiming(device, () -> (int) h.invokeExact(device, cfg, numRows, offsets, numTokens, logp, oldLogp, adv, ref, mask, grad, sums, stream));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int clippedLossAsync(boolean critical, boolean perRow, int device, MemorySegment cfg, long numRows,
                                MemorySegment hostOffsets, MemorySegment offsets, long numTokens, MemorySegment logp,
                                MemorySegment oldLogp, MemorySegment adv, MemorySegment ref, MemorySegment mask,
                                MemorySegment grad, MemorySegment sums, MemorySegment stream) {
        try {
            MethodHandle h = perRow ? (critical ? Loss.LOSS_ROWS_CRIT : Loss.LOSS_ROWS_PLAIN)
                    : critical ? Loss.LOSS_ASYNC_CRIT : Loss.LOSS_ASYNC_PLAIN;
            return reclaiming(device, () -> (int) h.invokeExact(device, cfg, numRows, hostOffsets, offsets, numTokens, logp, oldLogp, adv, ref, mask,
                    grad, sums, stream));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int decodeAttention(long rows, long heads, long kvHeads, long headDim, MemorySegment qkv, long qkvStride,
                               MemorySegment qNorm, MemorySegment kNorm, double normEps, MemorySegment cos, MemorySegment sin,
                               MemorySegment kCache, MemorySegment vCache, long cacheRowStride, long capacity, long writeSlot,
                               long slots, MemorySegment mask, double scale, MemorySegment out) {
        try {
            return (int) Decode.DECODE_ATTN.invokeExact(0, rows, heads, kvHeads, headDim, qkv, qkvStride, qNorm, kNorm, normEps, cos,
                    sin, kCache, vCache, cacheRowStride, capacity, writeSlot, slots, mask, scale, out);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int rmsNorm(long rows, long hidden, MemorySegment x, long xStride, MemorySegment residual, long residualStride,
                       MemorySegment weight, double eps, MemorySegment out, long outStride) {
        try {
            return (int) Decode.RMS_NORM.invokeExact(0, rows, hidden, x, xStride, residual, residualStride, weight, eps, out, outStride);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int swiglu(long rows, long width, MemorySegment gate, long gateStride, MemorySegment up, long upStride,
                      MemorySegment out, long outStride) {
        try {
            return (int) Decode.SWIGLU.invokeExact(0, rows, width, gate, gateStride, up, upStride, out, outStride);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int sample(long rows, long vocab, MemorySegment logits, long logitsStride, double temperature, long topK, double topP,
                      MemorySegment uniforms, MemorySegment tokens, MemorySegment logprobs) {
        try {
            return (int) Decode.SAMPLE.invokeExact(0, rows, vocab, logits, logitsStride, temperature, topK, topP, uniforms, tokens,
                    logprobs);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    // The LM head ops, fp32 or bf16 logits (the same signature but for the logits' element type).
    static int lmheadLogprobs(boolean critical, boolean bf16, int device, long numTokens, long vocab, MemorySegment logits,
                              MemorySegment targets, MemorySegment logp, MemorySegment entropy, MemorySegment stream) {
        try {
            MethodHandle h = bf16 ? (critical ? Lmhead.LMHEAD_LOGPROBS_BF16_CRIT : Lmhead.LMHEAD_LOGPROBS_BF16_PLAIN)
                    : (critical ? Lmhead.LMHEAD_LOGPROBS_CRIT : Lmhead.LMHEAD_LOGPROBS_PLAIN);
            return reclaiming(device, () -> (int) h.invokeExact(device, numTokens, vocab, logits, targets, logp, entropy, stream));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int lmheadChunk(boolean critical, boolean bf16, int device, MemorySegment cfg, long numRows, MemorySegment offsets,
                           long numTokens, long chunkBegin, long chunkTokens, long vocab, MemorySegment logits,
                           MemorySegment targets, MemorySegment oldLogp, MemorySegment adv, MemorySegment ref, MemorySegment mask,
                           MemorySegment logp, MemorySegment entropy, MemorySegment sums, MemorySegment stream) {
        try {
            MethodHandle h = bf16 ? (critical ? Lmhead.LMHEAD_CHUNK_BF16_CRIT : Lmhead.LMHEAD_CHUNK_BF16_PLAIN)
                    : (critical ? Lmhead.LMHEAD_CHUNK_CRIT : Lmhead.LMHEAD_CHUNK_PLAIN);
            return reclaiming(device, () -> (int) h.invokeExact(device, cfg, numRows, offsets, numTokens, chunkBegin, chunkTokens, vocab,
                    logits, targets, oldLogp, adv, ref, mask, logp, entropy, sums, stream));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int lmheadChunkAsync(boolean critical, boolean bf16, int device, MemorySegment cfg, long numRows,
                                MemorySegment hostOffsets, MemorySegment offsets, long numTokens, long chunkBegin, long chunkTokens,
                                long vocab, MemorySegment logits, MemorySegment targets, MemorySegment oldLogp, MemorySegment adv,
                                MemorySegment ref, MemorySegment mask, MemorySegment logp, MemorySegment entropy,
                                MemorySegment sums, MemorySegment errors, MemorySegment stream) {
        try {
            MethodHandle h = bf16 ? (critical ? LmheadAsync.BF16_CRIT : LmheadAsync.BF16_PLAIN)
                    : (critical ? LmheadAsync.CRIT : LmheadAsync.PLAIN);
            return reclaiming(device, () -> (int) h.invokeExact(device, cfg, numRows, hostOffsets, offsets, numTokens, chunkBegin, chunkTokens, vocab,
                    logits, targets, oldLogp, adv, ref, mask, logp, entropy, sums, errors, stream));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int lmheadLogprobsAsync(boolean critical, boolean bf16, int device, long numTokens, long vocab, MemorySegment logits,
                                   MemorySegment targets, MemorySegment logp, MemorySegment entropy, MemorySegment errors,
                                   MemorySegment stream) {
        try {
            MethodHandle h = bf16 ? (critical ? LmheadAsync.LOGPROBS_BF16_CRIT : LmheadAsync.LOGPROBS_BF16_PLAIN)
                    : (critical ? LmheadAsync.LOGPROBS_CRIT : LmheadAsync.LOGPROBS_PLAIN);
            return reclaiming(device, () -> (int) h.invokeExact(device, numTokens, vocab, logits, targets, logp, entropy, errors, stream));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** CUDA devices visible to libdrmas (0 without CUDA, a driver or a GPU). */
    public static int cudaDeviceCount() {
        try {
            return (int) Cuda.CUDA_DEVICE_COUNT.invokeExact();
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Makes {@code device} the calling thread's current CUDA device (where DeviceBuffer allocates). */
    public static void cudaSetDevice(int device) {
        try {
            check((int) Cuda.CUDA_SET_DEVICE.invokeExact(device));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * Throws a DrmasException saying why libdrmas's CUDA kernels cannot run on {@code device}: built
     * without CUDA, no usable device, or no kernel image for its compute capability (the message
     * names it and the architectures compiled in); returns when they can.
     */
    public static void cudaCheckDevice(int device) {
        try {
            check((int) CudaCheck.CUDA_CHECK_DEVICE.invokeExact(device));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** The calling thread's current CUDA device. */
    public static int cudaGetDevice() {
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            MemorySegment out = arena.allocate(JAVA_INT);
            check((int) Cuda.CUDA_GET_DEVICE.invokeExact(out));
            return out.get(JAVA_INT, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int cudaMalloc(long bytes, MemorySegment ptrOut) {
        try {
            return (int) Cuda.CUDA_MALLOC.invokeExact(bytes, ptrOut);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int cudaFree(MemorySegment ptr) {
        try {
            return (int) Cuda.CUDA_FREE.invokeExact(ptr);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int cudaMemcpy(MemorySegment dst, MemorySegment src, long bytes, int kind) {
        try {
            return (int) Cuda.CUDA_MEMCPY.invokeExact(dst, src, bytes, kind);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static int cudaSynchronize(MemorySegment stream) {
        try {
            return (int) Cuda.CUDA_SYNC.invokeExact(stream);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }
}
