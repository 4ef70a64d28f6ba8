// EnginePolicy.java — the generation adapter: the agents' policy as the rollout engine runs it. Each
// batched call renders the agents' chats with the model's template, tokenises them (a prompt that is
// too long cut as rollout.truncation says), generates with the model's
// Generator on one random stream per (trajectory, turn) — one call per model for a round of agents
// that do not wait for each other — and hands back the text with the exact token ids and sampled
// log-probs that PPO trains on.
package dev.drmas.train;

import dev.drmas.agent.Agent;
import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Message;
import dev.drmas.agent.Turn;
import dev.drmas.agent.TurnRequest;
import dev.drmas.config.RolloutConfig.Truncation;
import dev.drmas.rollout.Completion;
import dev.drmas.rollout.GenerationConfig;
import dev.drmas.rollout.Request;
import dev.drmas.rollout.SamplingParams;
import dev.drmas.rollout.Generator;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.LongUnaryOperator;

final class EnginePolicy implements AgentPolicy {
    private final Policies policies;
    private final SamplingParams sampling;
    private final int maxPromptTokens, maxNewTokens;
    private final Truncation truncation;
    private final SamplingStreams streams;
    private final long seed;
    private final LongUnaryOperator globalTraj;  // a request's trajectory → its global index, which its draws follow
    private int truncated;
    private long promptTokens, prefilledTokens, reusedTokens;  // the engine's account over the calls
    private int calls;

    EnginePolicy(Policies policies, SamplingParams sampling, int maxPromptTokens, Truncation truncation, int maxNewTokens,
                 SamplingStreams streams, long seed, LongUnaryOperator globalTraj) {
        this.policies = policies;
        this.sampling = sampling;
        this.maxPromptTokens = maxPromptTokens;
        this.truncation = truncation;
        this.maxNewTokens = maxNewTokens;
        this.streams = streams;
        this.seed = seed;
        this.globalTraj = globalTraj;
    }

    /**
     * The rollout engine's prefill over the calls so far: {prompt tokens, tokens prefilled, tokens
     * copied from the prefix cache} (Generator.Stats).
     */
    long[] prefill() {
        return new long[] {promptTokens, prefilledTokens, reusedTokens};
    }

    /** Prompts cut to max_prompt_tokens so far. */
    int truncated() {
        return truncated;
    }

    @Override
    public List<Turn> act(Agent agent, List<TurnRequest> requests) {
        return actTogether(List.of(agent), List.of(requests)).get(0);
    }

    /** The requests of agents that share a model go into one generate call: the engine batches them together. */
    @Override
    public List<List<Turn>> actTogether(List<Agent> agents, List<List<TurnRequest>> requests) {
        if (agents.size() != requests.size()) {
            throw new IllegalArgumentException(agents.size() + " agents but " + requests.size() + " request lists");
        }
        Map<String, List<Integer>> byModel = new LinkedHashMap<>();
        for (int i = 0; i < agents.size(); i++) byModel.computeIfAbsent(agents.get(i).modelId(), m -> new ArrayList<>()).add(i);
        List<List<Turn>> out = new ArrayList<>(Collections.nCopies(agents.size(), (List<Turn>) null));
        for (Map.Entry<String, List<Integer>> e : byModel.entrySet()) {
            Policies.Policy p = policies.get(e.getKey());
            List<Request> reqs = new ArrayList<>();
            List<Boolean> cut = new ArrayList<>();
            // the round's prompts rendered, then encoded together (on the tokenizer's threads: one at a time, long
            // prompts held the GPU up for seconds a round)
            List<String> texts = new ArrayList<>();
            for (int i : e.getValue()) for (TurnRequest r : requests.get(i)) texts.add(p.chat().render(Message.toMaps(r.messages()), true));
            List<int[]> encoded = p.tokenizer().encodeAll(texts);
            int at = 0;
            for (int i : e.getValue()) {
                for (TurnRequest r : requests.get(i)) {
                    int[] ids = encoded.get(at++);
                    boolean c = ids.length > maxPromptTokens;
                    if (c) {
                        if (truncation == Truncation.ERROR) {
                            throw new IllegalStateException("agent '" + agents.get(i).id() + "' (trajectory " + globalTraj.applyAsLong(r.traj())
                                    + ", turn " + r.turn() + "): its prompt is " + ids.length + " tokens, over rollout.max_prompt_tokens "
                                    + maxPromptTokens + ", and rollout.truncation is error (left, middle or right cut it instead)");
                        }
                        ids = truncation.cut(ids, maxPromptTokens);
                        truncated++;
                    }
                    cut.add(c);
                    reqs.add(new Request(ids, streams.key(globalTraj.applyAsLong(r.traj()), r.turn())));
                }
            }
            GenerationConfig gc = new GenerationConfig(sampling, maxNewTokens, new HashSet<>(p.tokenizer().stopTokenIds()), List.of(),
                    null, seed, true, p.vocabLimit());
            List<Completion> done = p.generator().generate(reqs, gc);
            calls++;
            Generator.Stats st = p.generator().lastStats();
            promptTokens += st.promptTokens();
            prefilledTokens += st.prefilledTokens();
            reusedTokens += st.reusedTokens();
            int k = 0;
            for (int i : e.getValue()) {
                List<Turn> turns = new ArrayList<>(requests.get(i).size());
                for (int j = 0; j < requests.get(i).size(); j++, k++) {
                    Completion c = done.get(k);
                    turns.add(new Turn(p.tokenizer().decode(c.tokens(), true),
                            new TurnData(reqs.get(k).promptIds(), c.tokens(), c.logprobs(), c.finishReason(), cut.get(k))));
                }
                out.set(i, turns);
            }
        }
        return out;
    }

    /** Generate calls made so far (one per model and round of agents). */
    int calls() {
        return calls;
    }
}
