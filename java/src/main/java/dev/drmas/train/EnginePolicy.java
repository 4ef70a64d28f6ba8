// EnginePolicy.java — the generation adapter: the agents' policy as the rollout engine runs it. Each
// batched call renders the agents' chats with the model's template, tokenises them (keeping the end
// of a prompt that is too long: the question and the latest context), generates with the model's
// Generator on one random stream per (trajectory, turn), and hands back the text with the exact
// token ids and sampled log-probs that PPO trains on.
package dev.drmas.train;

import dev.drmas.agent.Agent;
import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Message;
import dev.drmas.agent.Turn;
import dev.drmas.agent.TurnRequest;
import dev.drmas.rollout.Completion;
import dev.drmas.rollout.GenerationConfig;
import dev.drmas.rollout.Request;
import dev.drmas.rollout.SamplingParams;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;

final class EnginePolicy implements AgentPolicy {
    private final Policies policies;
    private final SamplingParams sampling;
    private final int maxPromptTokens, maxNewTokens;
    private final SamplingStreams streams;
    private final long seed;
    private final long trajOffset;  // this rank's first trajectory: draws follow the global index
    private int truncated;

    EnginePolicy(Policies policies, SamplingParams sampling, int maxPromptTokens, int maxNewTokens, SamplingStreams streams,
                 long seed, long trajOffset) {
        this.policies = policies;
        this.sampling = sampling;
        this.maxPromptTokens = maxPromptTokens;
        this.maxNewTokens = maxNewTokens;
        this.streams = streams;
        this.seed = seed;
        this.trajOffset = trajOffset;
    }

    /** Prompts cut to max_prompt_tokens so far. */
    int truncated() {
        return truncated;
    }

    @Override
    public List<Turn> act(Agent agent, List<TurnRequest> requests) {
        Policies.Policy p = policies.get(agent.modelId());
        List<Request> reqs = new ArrayList<>(requests.size());
        boolean[] cut = new boolean[requests.size()];
        for (int i = 0; i < requests.size(); i++) {
            TurnRequest r = requests.get(i);
            int[] ids = p.tokenizer().encode(p.chat().render(Message.toMaps(r.messages()), true));
            if (ids.length > maxPromptTokens) {  // keep the end: the question and the latest context
                ids = Arrays.copyOfRange(ids, ids.length - maxPromptTokens, ids.length);
                cut[i] = true;
                truncated++;
            }
            reqs.add(new Request(ids, streams.key(trajOffset + r.traj(), r.turn())));
        }
        GenerationConfig gc = new GenerationConfig(sampling, maxNewTokens, new HashSet<>(p.tokenizer().stopTokenIds()), List.of(),
                null, seed, true, Math.min(p.tokenizer().vocabSize(), p.model().config().vocabSize()));
        List<Completion> out = p.generator().generate(reqs, gc);
        List<Turn> turns = new ArrayList<>(out.size());
        for (int i = 0; i < out.size(); i++) {
            Completion c = out.get(i);
            turns.add(new Turn(p.tokenizer().decode(c.tokens(), true),
                    new TurnData(reqs.get(i).promptIds(), c.tokens(), c.logprobs(), c.finishReason(), cut[i])));
        }
        return turns;
    }
}
