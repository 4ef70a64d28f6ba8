// LmHeadBench.java — one update of the LM head (forward, clipped loss with entropy bonus, backward
// into the hidden states and the head's weight) at a real vocabulary, fused (FusedLmHead: chunks of
// logits, the drmas kernel, two more products) against the materialised path (TeacherForcing's
// formula: [N, V] logits, log_softmax, gather, entropy, ClippedLoss, autograd), and against the
// three matrix products alone (the CPU's limit), in one process: time and peak resident memory
// over the phase's start (metrics/PeakMemory). The weight's .grad exists before each phase (as in
// training, where it lives across micro-batches), so the peak is what the loss's pass adds. The
// phases take turns (products, fused, materialised, then again) --reps times, the fastest of each
// counted (a phase longer than a minute runs once), so that a slow spell of a shared machine does
// not land on one of them; the fused phase runs before the materialised one at each N, so memory
// that the materialised phase frees cannot flatter the fused figure. The materialised path runs
// only up to --materialised-upto tokens (beyond, its [N, V] tensors do not fit).
package dev.drmas.bench;

import dev.drmas.algo.ClippedLoss;
import dev.drmas.algo.FusedLmHead;
import dev.drmas.algo.LossConfig;
import dev.drmas.metrics.PeakMemory;
import dev.drmas.model.Tensors;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;

public final class LmHeadBench {
    private LmHeadBench() {
    }

    record Figures(double seconds, long peakBytes, double loss, double gradNorm) {
    }

    public static void main(String[] argv) throws Exception {
        int vocab = 151_936, hidden = 1024, threads = 2, chunk = 0, rowTokens = 512, reps = 2;
        List<Integer> tokens = new ArrayList<>(List.of(512, 1024, 2048));
        boolean materialised = true;
        int materialisedUpto = Integer.MAX_VALUE;
        Path out = null;
        for (int i = 0; i < argv.length; i++) {
            switch (argv[i]) {
                case "--vocab" -> vocab = Integer.parseInt(argv[++i]);
                case "--hidden" -> hidden = Integer.parseInt(argv[++i]);
                case "--tokens" -> {
                    tokens.clear();
                    for (String t : argv[++i].split(",")) tokens.add(Integer.parseInt(t.trim()));
                }
                case "--chunk" -> chunk = Integer.parseInt(argv[++i]);
                case "--row-tokens" -> rowTokens = Integer.parseInt(argv[++i]);
                case "--threads" -> threads = Integer.parseInt(argv[++i]);
                case "--reps" -> reps = Integer.parseInt(argv[++i]);
                case "--no-materialised" -> materialised = false;
                case "--materialised-upto" -> materialisedUpto = Integer.parseInt(argv[++i]);
                case "--out" -> out = Path.of(argv[++i]);
                case "--help", "-h" -> {
                    System.out.println("""
                            usage: LmHeadBench [--vocab 151936] [--hidden 1024] [--tokens 512,1024,2048] [--chunk C]
                                   [--row-tokens 512] [--threads 2] [--reps 2] [--no-materialised]
                                   [--materialised-upto N] [--out FILE.md]
                            One LM-head update (fp32) per N: the three products alone, the fused head, the materialised path.""");
                    return;
                }
                default -> throw new IllegalArgumentException("unknown option " + argv[i] + " (see --help)");
            }
        }
        torch.set_num_threads(threads);
        if (chunk == 0) chunk = FusedLmHead.defaultChunkTokens(vocab);
        StringBuilder md = new StringBuilder();
        md.append(String.format(Locale.ROOT, "LM head update, fp32, V = %d, H = %d, chunk %d tokens, %d threads, fastest of %d%n%n", vocab,
                hidden, chunk, threads, reps));
        md.append("| N | products alone s | fused s | materialised s | fused / materialised time | products / fused | fused GFLOP/s "
                + "| fused peak | materialised peak | fused / materialised peak |\n|---|---|---|---|---|---|---|---|---|---|\n");
        try (PointerScope all = new PointerScope()) {
            torch.manual_seed(1);
            Tensor w = torch.randn(new long[] {vocab, hidden}).mul_(new Scalar(0.02)).requires_grad_(true);
            run(w, 64, chunk, rowTokens, "fused");  // warm-up: thread pools, BLAS buffers
            for (int n : tokens) {
                List<String> phases = new ArrayList<>(List.of("products", "fused"));
                if (materialised && n <= materialisedUpto) phases.add("materialised");
                java.util.Map<String, Figures> b = best(w, n, chunk, rowTokens, phases, reps);
                Figures p = b.get("products"), f = b.get("fused"), m = b.get("materialised");
                if (m != null && (Math.abs(f.loss() - m.loss()) > 1e-4 * Math.max(1, Math.abs(m.loss()))
                        || Math.abs(f.gradNorm() - m.gradNorm()) > 1e-3 * m.gradNorm())) {
                    throw new IllegalStateException("fused and materialised disagree at N = " + n + ": loss " + f.loss() + " vs " + m.loss()
                            + ", |dL/dW| " + f.gradNorm() + " vs " + m.gradNorm());
                }
                double flops = 3 * 2.0 * n * (double) vocab * hidden;  // the three products
                String line = String.format(Locale.ROOT, "| %d | %.2f | %.2f | %s | %s | %.2f | %.1f | %s | %s | %s |%n", n, p.seconds(),
                        f.seconds(), m == null ? "-" : String.format(Locale.ROOT, "%.2f", m.seconds()),
                        m == null ? "-" : String.format(Locale.ROOT, "%.2f×", f.seconds() / m.seconds()), p.seconds() / f.seconds(),
                        flops / f.seconds() / 1e9,
                        mib(f.peakBytes()), m == null ? "-" : mib(m.peakBytes()),
                        m == null ? "-" : peakRatio(f.peakBytes(), m.peakBytes()));
                System.err.print(line);
                md.append(line);
            }
        }
        System.out.println(md);
        if (out != null) Files.writeString(out, md.toString());
    }

    /** Half a MiB: below it a peak prints as 0 MiB, so it is shown as a bound instead. */
    static final long HALF_MIB = 512 * 1024;

    /** Whole MiB; "<0.5 MiB" for what would print as 0, "unmeasured" where PeakMemory could not read it (-1). */
    static String mib(long b) {
        if (b < 0) return "unmeasured";
        if (b < HALF_MIB) return "<0.5 MiB";
        return String.format(Locale.ROOT, "%.0f MiB", b / (1024.0 * 1024.0));
    }

    /**
     * The fused peak as a fraction of the materialised one, "1/x". A fused peak under half a MiB (the
     * resident measure often reads 0 for it) is a bound, "<1/x" with x = materialised / 0.5 MiB, not a
     * division by it (which printed "1/Infinity"); "-" where either is unmeasured or both are that small.
     */
    static String peakRatio(long fused, long materialised) {
        if (fused < 0 || materialised < 0 || materialised < HALF_MIB) return "-";
        if (fused < HALF_MIB) return "<1/" + materialised / HALF_MIB;  // rounded down: the bound a rounded-up x would overstate
        return String.format(Locale.ROOT, "1/%.1f", (double) materialised / fused);
    }

    /**
     * The phases in turn, {@code reps} times (a phase that took over a minute is not repeated): the
     * fastest run of each, with the highest peak of its runs.
     */
    private static java.util.Map<String, Figures> best(Tensor w, int n, int chunk, int rowTokens, List<String> phases, int reps) {
        java.util.Map<String, Figures> best = new java.util.LinkedHashMap<>();
        java.util.Map<String, Long> peak = new java.util.HashMap<>();
        for (int r = 0; r < reps; r++) {
            for (String what : phases) {
                Figures b = best.get(what);
                if (b != null && b.seconds() > 60) continue;
                Figures f = run(w, n, chunk, rowTokens, what);
                System.err.printf(Locale.ROOT, "  N %d %s: %.2f s%n", n, what, f.seconds());
                peak.merge(what, f.peakBytes(), Math::max);
                if (b == null || f.seconds() < b.seconds()) best.put(what, f);
            }
        }
        best.replaceAll((what, b) -> new Figures(b.seconds(), peak.get(what), b.loss(), b.gradNorm()));
        return best;
    }

    /** One phase at N tokens in rows of rowTokens: its time, peak, loss and |dL/dW|. */
    private static Figures run(Tensor w, int n, int chunk, int rowTokens, String what) {
        try (PointerScope scope = new PointerScope()) {
            torch.manual_seed(n);
            long vocab = w.size(0), hidden = w.size(1);
            Tensor h = torch.randn(new long[] {n, hidden}).requires_grad_(true);
            SplittableRandom rng = new SplittableRandom(n);
            long[] y = new long[n];
            for (int t = 0; t < n; t++) y[t] = rng.nextInt((int) vocab);
            int rows = (n + rowTokens - 1) / rowTokens;
            long[] off = new long[rows + 1];
            float[] adv = new float[rows], advTok = new float[n];
            for (int r = 0; r < rows; r++) {
                off[r + 1] = Math.min(n, off[r] + rowTokens);
                adv[r] = (float) (rng.nextDouble() * 2 - 1);
                for (long t = off[r]; t < off[r + 1]; t++) advTok[(int) t] = adv[r];
            }
            Tensor targets = Tensors.longs(y);
            Tensor old;
            try (NoGradGuard ng = new NoGradGuard()) {
                float[] lp = Tensors.toFloats(FusedLmHead.logProbs(h, w, targets, 1.0, false, chunk).logprobs());
                for (int t = 0; t < n; t++) lp[t] += (float) (rng.nextDouble() * 0.4 - 0.2);
                old = Tensors.floats(lp);
            }
            LossConfig loss = LossConfig.defaults();
            double entCoef = 0.01 / n;
            w.mutable_grad().put(torch.zeros_like(w.detach()));  // training's .grad, alive across micro-batches
            System.gc();
            PeakMemory pm = PeakMemory.start();
            long t0 = System.nanoTime();
            double l;
            switch (what) {
                case "products" -> {
                    try (NoGradGuard ng = new NoGradGuard()) {
                        Tensor hd = h.detach(), wd = w.detach();
                        Tensor dw = w.grad(), dh = torch.empty_like(hd);
                        for (long c0 = 0; c0 < n; c0 += chunk) {
                            try (PointerScope s = new PointerScope()) {
                                long c = Math.min(chunk, n - c0);
                                Tensor hc = hd.narrow(0, c0, c);
                                Tensor z = torch.linear(hc, wd);
                                dh.narrow(0, c0, c).copy_(torch.mm(z, wd));
                                dw.addmm_(z.t(), hc);
                            }
                        }
                    }
                    l = Double.NaN;
                }
                case "fused" -> l = FusedLmHead.lossAndBackward(h, w, targets, 1.0, loss, n, entCoef, off, old, adv, null, null, chunk).loss();
                case "materialised" -> {
                    Tensor logp = torch.linear(h, w).log_softmax(1);
                    Tensor lp = logp.gather(1, targets.unsqueeze(1)).squeeze(1);
                    Tensor ent = logp.exp().mul(logp).sum(new long[] {1}, false, new ScalarTypeOptional()).neg();
                    ClippedLoss.TensorResult r = ClippedLoss.compute(loss, n, Tensors.longs(off), lp.detach().contiguous(), old,
                            Tensors.floats(advTok), null, null);
                    lp.mul(r.grad()).sum().sub(ent.sum().mul(new Scalar(entCoef))).backward();
                    l = r.loss();
                }
                default -> throw new IllegalArgumentException(what);
            }
            double seconds = (System.nanoTime() - t0) / 1e9;
            long peak = pm.addedBytes();
            double norm = w.grad().norm().item_double();
            w.mutable_grad().reset();
            return new Figures(seconds, peak, l, norm);
        }
    }
}
