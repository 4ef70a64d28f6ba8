// ProposerWorkload.java — the proposer-aggregator workload on math tasks (math's generator or
// JSONL, math's answer check or orchestra.options.grader's command): the reward is the aggregator's final answer; every row, proposals
// included, is penalised when it has no box. Demonstrations: proposers right with probability
// sft.correct_prob, the aggregator picking the answer most proposals agree on. Metrics: how often
// proposals are right and agree, and how often the aggregator follows the majority.
package dev.drmas.workflow.proposer;

import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Episode;
import dev.drmas.agent.Orchestra;
import dev.drmas.agent.Step;
import dev.drmas.agent.Team;
import dev.drmas.agent.Turn;
import dev.drmas.agent.TurnRequest;
import dev.drmas.config.RunConfig;
import dev.drmas.env.Task;
import dev.drmas.workflow.AnswerGrader;
import dev.drmas.workflow.BaseWorkload;
import dev.drmas.workflow.InvalidActionPenalty;
import dev.drmas.workflow.Roles;
import dev.drmas.workflow.TaskFiles;
import dev.drmas.workflow.math.Demonstrations;
import dev.drmas.workflow.math.MathAnswers;
import dev.drmas.workflow.math.MathReward;
import dev.drmas.workflow.math.MathTasks;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.SplittableRandom;

final class ProposerWorkload extends BaseWorkload<ProposerOrchestra> {
    private final AnswerGrader grader;  // the built-in check, or orchestra.options.grader's command
    /** The roles under options {@code o}: at most one proposer agent per proposal, so that each gets a call. */
    static Roles roles(ProposerOptions o) {
        return new Roles(ProposerWorkflow.NAME, List.of(
                new Roles.Role(ProposerAgents.PROPOSER, 1, Math.max(1, o.proposers()), ProposerAgents::proposer),
                Roles.Role.one(ProposerAgents.AGGREGATOR, ProposerAgents::aggregator)));
    }

    ProposerWorkload(RunConfig cfg) {
        ProposerOptions o = cfg.orchestra().options(ProposerOptions.class);
        Team team = roles(o).team(cfg);
        super(team, new ProposerOrchestra(team, Roles.idsOf(cfg, ProposerAgents.PROPOSER),
                Roles.idsOf(cfg, ProposerAgents.AGGREGATOR).getFirst(), o.proposers()),
                MathTasks.of(cfg.data()), new InvalidActionPenalty(o.invalidPenalty()));
        this.grader = AnswerGrader.of(o.grader(), MathReward::episodeReward, Task::answer);
    }

    @Override
    public double reward(Task task, Episode e) {
        return grader.score(e.action(), task);
    }

    @Override
    public void close() {
        grader.close();
    }

    @Override
    public int maxTurnsPerEpisode() {
        return (int) Math.min(Integer.MAX_VALUE, orchestra.calls() + 1L);  // (saturated: checked against a bound)
    }

    @Override
    public Map<String, Double> episodeSums(List<Task> tasks, List<Episode> episodes) {
        double correct = 0, agree = 0, follows = 0;
        int p = orchestra.calls();
        for (Episode e : episodes) {
            Task t = tasks.get(e.uid());
            List<String> proposals = e.steps().subList(0, p).stream().map(Step::text).toList();
            for (String s : proposals) correct += grader.score(s, t) / p;
            Optional<String> first = MathAnswers.lastBoxed(proposals.getFirst());
            if (first.isPresent() && proposals.stream().allMatch(s -> MathAnswers.lastBoxed(s).filter(b -> MathAnswers.equivalent(b, first.get())).isPresent())) {
                agree++;
            }
            Optional<String> majority = majority(proposals), last = MathAnswers.lastBoxed(e.action());
            if (majority.isPresent() && last.isPresent() && MathAnswers.equivalent(last.get(), majority.get())) follows++;
        }
        Map<String, Double> m = new LinkedHashMap<>();  // logged per episode
        m.put("proposer/correct_rate", correct);
        m.put("proposer/agreement", agree);
        m.put("aggregator/follows_majority", follows);
        return m;
    }

    /** The boxed answer most proposals agree on (the earliest among equals); empty when none has a box. */
    static Optional<String> majority(List<String> proposals) {
        List<String> boxes = proposals.stream().map(MathAnswers::lastBoxed).flatMap(Optional::stream).toList();
        String best = null;
        long bestVotes = 0;
        for (String b : boxes) {
            long votes = boxes.stream().filter(o -> MathAnswers.equivalent(o, b)).count();
            if (votes > bestVotes) {
                best = b;
                bestVotes = votes;
            }
        }
        return Optional.ofNullable(best);
    }

    @Override
    public AgentPolicy demonstrator(List<Task> tasks, double pCorrect, SplittableRandom rng) {
        Map<Integer, List<String>> proposals = new HashMap<>();
        return (agent, reqs) -> {
            List<Turn> out = new ArrayList<>(reqs.size());
            for (TurnRequest r : reqs) {
                Task t = tasks.get(r.episode());
                List<String> mine = proposals.computeIfAbsent(r.episode(), k -> new ArrayList<>());
                String text;
                if (!agent.id().equals(orchestra.aggregatorId())) {
                    text = Demonstrations.solverResponse(t, rng.nextDouble() < pCorrect, rng);
                    mine.add(text);
                } else {
                    text = majority(mine).map(b -> "Answer: \\boxed{" + b + "}")
                            .orElseGet(() -> Demonstrations.solverResponse(t, rng.nextDouble() < pCorrect, rng));
                }
                out.add(Turn.of(text));
            }
            return out;
        };
    }
}
