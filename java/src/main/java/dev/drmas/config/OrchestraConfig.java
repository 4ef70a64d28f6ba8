// OrchestraConfig.java — `orchestra:`: which multi-agent workflow runs (registered by name) and
// the settings of the math solver–verifier loop of the paper's reference code.
package dev.drmas.config;

import dev.drmas.algo.ConfigEnum;

/**
 * @param name             the workflow, as registered; default {@code math}
 * @param maxLoops         rounds of solver then verifier, &gt;= 1 (the verifier is skipped in
 *                         the last); default 2
 * @param malformedVerdict how a verifier output without a verify tag counts: {@code approve}
 *                         (default, as the reference code) or {@code reject}
 * @param invalidPenalty   subtracted from a row's score when its agent's output is malformed
 *                         (solver without \boxed{}, verifier without a verify tag), &gt;= 0;
 *                         default 0.1
 */
public record OrchestraConfig(String name, int maxLoops, MalformedVerdict malformedVerdict, double invalidPenalty) {

    public enum MalformedVerdict implements ConfigEnum {
        APPROVE("approve"), REJECT("reject");

        private final String configName;

        MalformedVerdict(String configName) {
            this.configName = configName;
        }

        @Override
        public String configName() {
            return configName;
        }
    }

    public OrchestraConfig {
        Check.notBlank(name, "name");
        Check.positive(maxLoops, "max_loops");
        Check.given(malformedVerdict, "malformed_verdict");
        Check.nonNegative(invalidPenalty, "invalid_penalty");
    }

    public static OrchestraConfig defaults() {
        return new OrchestraConfig("math", 2, MalformedVerdict.APPROVE, 0.1);
    }
}
