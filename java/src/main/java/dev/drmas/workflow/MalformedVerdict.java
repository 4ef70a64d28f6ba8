// MalformedVerdict.java — `orchestra.options.malformed_verdict`: what a verifier reply without a
// verdict tag counts as in the workflows that have a verifier (approve, as the reference code; or
// reject). It is counted and penalised as an invalid action either way.
package dev.drmas.workflow;

import dev.drmas.agent.Verdict;
import dev.drmas.algo.ConfigEnum;

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

    /** The verdict a malformed reply is taken as. */
    public Verdict taken() {
        return this == APPROVE ? Verdict.APPROVE : Verdict.REJECT;
    }
}
