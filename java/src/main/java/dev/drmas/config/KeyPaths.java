// KeyPaths.java — key paths as errors print them (models.policy.optim.lr, agents[1].model), as
// overrides spell them (agents.1.model and agents[1].model alike), and the nearest valid path
// for a mistyped one (edit distance over full paths, so that a key in the wrong section
// is found too).
package dev.drmas.config;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

final class KeyPaths {
    private KeyPaths() {
    }

    /** {@code parent.key}, or {@code key} at the top. */
    static String child(String parent, String key) {
        return parent.isEmpty() ? key : parent + "." + key;
    }

    /** {@code parent[index]}. */
    static String element(String parent, int index) {
        return parent + "[" + index + "]";
    }

    /**
     * The segments of an override key: {@code a.b[1].c} and {@code a.b.1.c} both give
     * [a, b, 1, c]; whether "1" is a list index or a map key is for the schema to say.
     */
    static List<String> split(String path) {
        List<String> out = new ArrayList<>();
        StringBuilder cur = new StringBuilder();
        int i = 0;
        boolean afterBracket = false;
        while (i < path.length()) {
            char c = path.charAt(i);
            if (c == '.') {
                if (!afterBracket) out.add(segment(cur, path));
                afterBracket = false;
                i++;
            } else if (c == '[') {
                if (!afterBracket) out.add(segment(cur, path));
                int close = path.indexOf(']', i);
                if (close < 0) throw new IllegalArgumentException("'" + path + "': '[' without ']'");
                cur.append(path, i + 1, close);
                out.add(segment(cur, path));
                afterBracket = true;
                i = close + 1;
            } else {
                if (afterBracket) throw new IllegalArgumentException("'" + path + "': expected '.' or '[' after ']'");
                cur.append(c);
                i++;
            }
        }
        if (!afterBracket) out.add(segment(cur, path));
        return out;
    }

    private static String segment(StringBuilder cur, String path) {
        String s = cur.toString().trim();
        cur.setLength(0);
        if (s.isEmpty()) throw new IllegalArgumentException("'" + path + "' has an empty key");
        return s;
    }

    /**
     * The candidate nearest to {@code wanted} when it is close enough to be a likely typo (at most
     * one edit per three characters, and at least one), else a candidate with the same last key in
     * another section, else null.
     */
    static String nearest(String wanted, Collection<String> candidates) {
        String best = null;
        int bestD = Integer.MAX_VALUE;
        for (String c : candidates) {
            int d = distance(wanted, c);
            if (d < bestD) {
                bestD = d;
                best = c;
            }
        }
        if (best == null) return null;
        int allowed = Math.max(1, Math.max(wanted.length(), best.length()) / 3);
        if (bestD <= allowed) return best;
        // a right key in the wrong section: ppo.max_loops -> orchestra.options.max_loops
        String leaf = leaf(wanted);
        String sameLeaf = null;
        for (String c : candidates) {
            if (leaf(c).equals(leaf) && (sameLeaf == null || distance(wanted, c) < distance(wanted, sameLeaf))) sameLeaf = c;
        }
        return sameLeaf;
    }

    private static String leaf(String path) {
        return path.substring(Math.max(path.lastIndexOf('.'), path.lastIndexOf(']')) + 1);
    }

    /** " (did you mean X?)" or "". */
    static String didYouMean(String wanted, Collection<String> candidates) {
        String n = nearest(wanted, candidates);
        return n == null ? "" : " (did you mean " + n + "?)";
    }

    /**
     * Edit distance with insertions, deletions, substitutions and swaps of two adjacent characters
     * each costing 1 (optimal string alignment): "modle" is one edit from "model", not two.
     */
    static int distance(String a, String b) {
        int[][] d = new int[a.length() + 1][b.length() + 1];
        for (int i = 0; i <= a.length(); i++) d[i][0] = i;
        for (int j = 0; j <= b.length(); j++) d[0][j] = j;
        for (int i = 1; i <= a.length(); i++) {
            for (int j = 1; j <= b.length(); j++) {
                int cost = a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1;
                d[i][j] = Math.min(d[i - 1][j - 1] + cost, Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1));
                if (i > 1 && j > 1 && a.charAt(i - 1) == b.charAt(j - 2) && a.charAt(i - 2) == b.charAt(j - 1)) {
                    d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
                }
            }
        }
        return d[a.length()][b.length()];
    }
}
