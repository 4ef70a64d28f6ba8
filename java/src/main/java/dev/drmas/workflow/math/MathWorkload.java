// MathWorkload.java — the math solver–verifier workload: synthetic arithmetic or JSONL problems, the
// solver's last \boxed{} answer checked for exact rational equivalence with any of the task's accepted
// answers (or graded by orchestra.options.grader's command), and demonstrations in which the solver is
// right with some probability and the verifier judges it correctly. The team comes from the config's agents (roles solver and verifier, the
// verifier optional with max_loops 1).
package dev.drmas.workflow.math;

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
import dev.drmas.workflow.ReplyFormat;
import dev.drmas.workflow.Roles;
import dev.drmas.workflow.TaskFiles;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.Predicate;

final class MathWorkload extends BaseWorkload<MathOrchestra> {
    private final AnswerGrader grader;  // the built-in check, or orchestra.options.grader's command
    static final Roles ROLES = new Roles(MathWorkflow.NAME, List.of(
            Roles.Role.one(MathAgents.SOLVER, MathAgents::solver),
            new Roles.Role(MathAgents.VERIFIER, 0, 1, MathAgents::verifier)));

    MathWorkload(RunConfig cfg) {
        MathOptions o = cfg.orchestra().options(MathOptions.class);
        // the reference checks its verifier's reply for Chinese, not its solver's (math_projection)
        Predicate<String> plain = ReplyFormat.check(false, o.rejectCjk());
        List<String> verifiers = Roles.idsOf(cfg, MathAgents.VERIFIER);
        Team team = ReplyFormat.narrowed(ROLES.team(cfg), a -> verifiers.contains(a.id()) ? plain : null);
        String verifier = verifiers.stream().findFirst().orElse(MathAgents.VERIFIER);
        super(team, new MathOrchestra(team, new MathOrchestra.Options(o.maxLoops(), o.malformedVerdict().taken(),
                Roles.idsOf(cfg, MathAgents.SOLVER).getFirst(), verifier), MathReward::parseVerdict),
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
    public Map<String, Double> episodeSums(List<Task> tasks, List<Episode> episodes) {
        return Map.of();  // the verifier's rates are logged from the episodes' verdict counters
    }

    @Override
    public int maxTurnsPerEpisode() {
        return (int) Math.min(Integer.MAX_VALUE, 2L * orchestra.options().maxLoops() - 1);  // (saturated: checked against a bound)
    }

    @Override
    public AgentPolicy demonstrator(List<Task> tasks, double pCorrect, SplittableRandom rng) {
        Map<Integer, String> lastAnswer = new HashMap<>();
        String solver = orchestra.options().solver();
        return (agent, reqs) -> {
            List<Turn> out = new ArrayList<>();
            for (TurnRequest r : reqs) {
                Task t = tasks.get(r.episode());
                String text;
                if (agent.id().equals(solver) || !lastAnswer.containsKey(r.episode())) {
                    text = Demonstrations.solverResponse(t, rng.nextDouble() < pCorrect, rng);
                    lastAnswer.put(r.episode(), text);
                } else {
                    text = Demonstrations.verifierResponse(Demonstrations.verifierLabel(t, lastAnswer.get(r.episode())));
                }
                out.add(Turn.of(text));
            }
            return out;
        };
    }
}
