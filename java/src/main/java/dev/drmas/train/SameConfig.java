// SameConfig.java — the ranks of a data-parallel run must train with the same settings: each rank loads
// its config itself (on several nodes, from each node's copy), and a rank with another batch size, model
// shape or learning rate would make other collective calls (a size error or a timeout blamed on a peer)
// or train apart until the weight checksum notices. So before anything else the ranks compare their
// resolved configs key by key, and every rank stops naming the keys that differ, each with its own value.
// Keys a rank may set apart are left out: local paths and addresses (a model staged to node-local disk,
// each node's own retrieval server) and the rank's threads.
package dev.drmas.train;

import dev.drmas.config.RunConfig;
import dev.drmas.dist.Collective;
import dev.drmas.dist.DistributedException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Pattern;

final class SameConfig {
    private SameConfig() {
    }

    /**
     * Keys whose values may differ between ranks: where a rank finds its files and services (the same content is the
     * user's to provide), its thread count, its resume setting (the checkpoint each finds is compared separately), and
     * what only rank 0 does (its console).
     */
    static final Pattern PER_RANK = Pattern.compile("models\\.[^.]+\\.path|data\\.(train|test)_file|run\\.(threads|resume|warm_start|output_dir)"
            + "|orchestra\\.options\\.retriever\\.(url|index|corpus)|orchestra\\.options\\.grader\\.command(\\[\\d+])?|metrics\\..*");

    /** The settings compared: every key of {@code cfg} but the PER_RANK ones, sorted, with its value as config.yaml writes it. */
    static Map<String, String> compared(RunConfig cfg) {
        Map<String, String> out = new TreeMap<>();
        cfg.flat().forEach((k, v) -> {
            if (!PER_RANK.matcher(k).matches()) out.put(k, String.valueOf(v));
        });
        return out;
    }

    /** Throws (on every rank alike) when the ranks' settings differ; one process: nothing to compare. */
    static void require(RunConfig cfg, Collective dist) {
        if (dist.worldSize() == 1) return;
        Map<String, String> mine = compared(cfg);
        List<String> keys = new ArrayList<>(mine.keySet());
        // first the keys themselves (a fixed-length exchange: the second one's length is the key count)
        double[][] shape = dist.gather(new double[] {keys.size(), hash(String.join("\n", keys))}, "the ranks' config keys");
        List<Integer> otherKeys = new ArrayList<>();
        for (int r = 1; r < shape.length; r++) {
            if (shape[r][0] != shape[0][0] || shape[r][1] != shape[0][1]) otherKeys.add(r);
        }
        if (!otherKeys.isEmpty()) {
            throw new DistributedException("rank " + dist.rank() + ": the ranks' configs have different keys (rank 0 and rank(s) "
                    + otherKeys + "): another workflow, other model ids or other agents; every rank must start with the same config "
                    + "(this rank has " + keys.size() + " keys)");
        }
        double[] values = new double[keys.size()];
        for (int i = 0; i < values.length; i++) values[i] = hash(mine.get(keys.get(i)));
        double[][] all = dist.gather(values, "the ranks' config values");
        StringBuilder differ = new StringBuilder();
        for (int i = 0; i < values.length; i++) {
            List<Integer> apart = new ArrayList<>();
            for (int r = 1; r < all.length; r++) if (all[r][i] != all[0][i]) apart.add(r);
            if (apart.isEmpty()) continue;
            differ.append(differ.isEmpty() ? "" : "; ").append(keys.get(i)).append(" (rank 0 and rank(s) ").append(apart)
                    .append(" differ; here: ").append(shown(mine.get(keys.get(i)))).append(')');
        }
        if (!differ.isEmpty()) {
            throw new DistributedException("rank " + dist.rank() + ": the ranks' configs differ: " + differ + ". Every rank must "
                    + "train with the same settings (only paths, addresses, threads and metrics may differ): give every node the "
                    + "same config file and overrides");
        }
    }

    /** A value for the message: a long one (a prompt) by its start and length. */
    private static String shown(String v) {
        String line = v.lines().findFirst().orElse("");
        return line.length() <= 60 && line.length() == v.length() ? v : line.substring(0, Math.min(60, line.length())) + "... ("
                + v.length() + " characters)";
    }

    /** FNV-1a of the UTF-8 bytes, cut to 52 bits: exact as a double, so that a sum of zeros and it carries it unchanged. */
    static double hash(String s) {
        long h = 0xcbf29ce484222325L;
        for (byte b : s.getBytes(StandardCharsets.UTF_8)) {
            h ^= b & 0xff;
            h *= 0x100000001b3L;
        }
        return (double) (h & ((1L << 52) - 1));
    }
}
