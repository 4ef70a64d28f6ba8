// EncodeBench.java — a rollout round's prompts encoded one at a time (as the rollout did) against
// all together (Tokenizer.encodeAll: the tokenizers library's batch, on its own threads), in the
// same process, alternating, on the same texts, whose ids must agree. The texts are chat prompts of
// a given length (long math or search contexts) rendered by the tokenizer's own chat template: a
// real Hugging Face folder (--tokenizer, e.g. the Qwen3 fixture) or the built-in tokenizer.
package dev.drmas.bench;

import dev.drmas.tokenizer.BuiltinTokenizer;
import dev.drmas.tokenizer.ChatRenderer;
import dev.drmas.tokenizer.ChatRenderers;
import dev.drmas.tokenizer.HfTokenizer;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Random;

public final class EncodeBench {
    private EncodeBench() {
    }

    public static void main(String[] argv) throws IOException {
        Path tokenizer = null, out = null;
        int prompts = 80, chars = 16000, rounds = 10;
        for (int i = 0; i < argv.length; i++) {
            switch (argv[i]) {
                case "--tokenizer" -> tokenizer = Path.of(argv[++i]);
                case "--prompts" -> prompts = Integer.parseInt(argv[++i]);
                case "--chars" -> chars = Integer.parseInt(argv[++i]);
                case "--rounds" -> rounds = Integer.parseInt(argv[++i]);
                case "--out" -> out = Path.of(argv[++i]);
                case "--help", "-h" -> {
                    System.out.println("""
                            usage: drmas bench-encode [--tokenizer HF_FOLDER] [--prompts 80] [--chars 16000] [--rounds 10] [--out FILE.md]
                              a round's prompts (default: the search GPU config's 80 episodes a rank, contexts of ~16K characters)
                              encoded one at a time and together; the built-in tokenizer without --tokenizer""");
                    return;
                }
                default -> throw new IllegalArgumentException("unknown option " + argv[i] + " (see --help)");
            }
        }
        if (prompts < 2 || chars < 1 || rounds < 1) throw new IllegalArgumentException("--prompts >= 2, --chars >= 1, --rounds >= 1");
        try (HfTokenizer tok = tokenizer == null ? BuiltinTokenizer.load() : HfTokenizer.load(tokenizer)) {
            ChatRenderer chat = ChatRenderers.forTokenizer(tok);
            List<String> texts = texts(chat, prompts, chars);
            // the same ids both ways, or the timing compares different work
            List<int[]> together = tok.encodeAll(texts);
            long tokens = 0;
            for (int i = 0; i < texts.size(); i++) {
                if (!Arrays.equals(tok.encode(texts.get(i)), together.get(i))) throw new IllegalStateException("prompt " + i + ": ids differ");
                tokens += together.get(i).length;
            }
            double[] one = new double[rounds], all = new double[rounds];
            for (int r = -1; r < rounds; r++) {  // round -1 warms both up
                long t0 = System.nanoTime();
                for (String t : texts) tok.encode(t);
                long t1 = System.nanoTime();
                tok.encodeAll(texts);
                long t2 = System.nanoTime();
                if (r >= 0) {
                    one[r] = (t1 - t0) / 1e6;
                    all[r] = (t2 - t1) / 1e6;
                }
            }
            String report = report(tokenizer == null ? "built-in" : tokenizer.toString(), prompts, chars, tokens, rounds, one, all);
            System.out.println(report);
            if (out != null) {
                Files.writeString(out, report);
                System.out.println("written to " + out.toAbsolutePath());
            }
        }
    }

    /** {@code n} chat prompts (a system message and a user turn of ~chars characters of math-like text), each different. */
    static List<String> texts(ChatRenderer chat, int n, int chars) {
        String[] words = {"the", "solver", "answer", "is", "\\frac{1}{2}", "because", "we", "compute", "x^2+3x", "=", "12,", "Therefore",
                "\n", "Let", "us", "verify", "step", "by", "sum", "of", "digits", "equals", "42.", "Paris", "<information>", "(1)"};
        Random rnd = new Random(7);
        List<String> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            StringBuilder sb = new StringBuilder();
            while (sb.length() < chars) sb.append(words[rnd.nextInt(words.length)]).append(' ');
            out.add(chat.render(List.of(Map.<String, Object>of("role", "system", "content", "You are a helpful assistant."),
                    Map.<String, Object>of("role", "user", "content", sb.toString())), true));
        }
        return out;
    }

    static String report(String tokenizer, int prompts, int chars, long tokens, int rounds, double[] one, double[] all) {
        double oneMed = BenchSupport.median(one), allMed = BenchSupport.median(all);
        StringBuilder b = new StringBuilder();
        b.append("## Prompt encoding: one at a time vs together (Tokenizer.encodeAll)\n\n");
        b.append(String.format("tokenizer %s · %d prompts of ~%d characters (%d tokens in all) · %d rounds, alternating · %d cores%n%n",
                tokenizer, prompts, chars, tokens, rounds, Runtime.getRuntime().availableProcessors()));
        b.append("| | median ms | min ms | tokens/s (median) |\n|---|---:|---:|---:|\n");
        b.append(String.format("| one at a time | %.1f | %.1f | %.0f |%n", oneMed, Arrays.stream(one).min().orElse(0), tokens / oneMed * 1e3));
        b.append(String.format("| together | %.1f | %.1f | %.0f |%n", allMed, Arrays.stream(all).min().orElse(0), tokens / allMed * 1e3));
        b.append(String.format("%ntogether / one at a time (medians): %.2f×%n", allMed / oneMed));
        return b.toString();
    }
}
