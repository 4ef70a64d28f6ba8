// MathWorkload.java — the math solver–verifier workload: synthetic arithmetic or JSONL problems,
// the solver's last \boxed{} answer checked for exact rational equivalence, and demonstrations in
// which the solver is right with some probability and the verifier judges it correctly. The team
// and workflow come from the config's agents (roles solver and verifier); another registered
// workflow name is built through the Orchestras registry and scored the same way.
package dev.drmas.train;

import dev.drmas.agent.Agent;
import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Episode;
import dev.drmas.agent.MathOrchestra;
import dev.drmas.agent.Orchestra;
import dev.drmas.agent.OrchestraSettings;
import dev.drmas.agent.Orchestras;
import dev.drmas.agent.Step;
import dev.drmas.agent.Team;
import dev.drmas.agent.Turn;
import dev.drmas.agent.TurnRequest;
import dev.drmas.agent.Verdict;
import dev.drmas.config.AgentSpec;
import dev.drmas.config.RunConfig;
import dev.drmas.config.SyntheticData;
import dev.drmas.env.Demonstrations;
import dev.drmas.env.JsonlTasks;
import dev.drmas.env.MathReward;
import dev.drmas.env.SyntheticArithmetic;
import dev.drmas.env.Task;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

final class MathWorkload implements Workload {
    private final Team team;
    private final Orchestra orchestra;
    private final MathReward reward;
    private final List<Task> train, test;

    MathWorkload(RunConfig cfg) {
        this.reward = new MathReward(cfg.orchestra().effectiveInvalidPenalty());
        this.team = team(cfg);
        this.orchestra = orchestra(cfg, team);
        List<List<Task>> data = data(cfg);
        this.train = data.get(0);
        this.test = data.get(1);
    }

    static Team team(RunConfig cfg) {
        List<Agent> agents = new ArrayList<>();
        for (int i = 0; i < cfg.agents().size(); i++) {
            AgentSpec a = cfg.agents().get(i);
            Agent base = switch (a.role()) {
                case "solver" -> Agent.solver(i, a.model()).withValidity(MathReward::solverValid);
                case "verifier" -> Agent.verifier(i, a.model()).withValidity(MathReward::verifierValid);
                default -> throw new IllegalArgumentException("agents[" + i + "].role: '" + a.role()
                        + "' has no built-in prompts in the math workflow (solver, verifier)");
            };
            agents.add(base.withId(a.id()));
        }
        return new Team(agents);
    }

    static Orchestra orchestra(RunConfig cfg, Team team) {
        var oc = cfg.orchestra();
        if (!oc.name().equals(MathOrchestra.NAME)) {
            return Orchestras.create(oc.name(), new OrchestraSettings(team, Map.of("max_loops", oc.maxLoops())));
        }
        String solver = cfg.agents().stream().filter(a -> a.role().equals("solver")).map(AgentSpec::id).findFirst()
                .orElseThrow(() -> new IllegalArgumentException("agents: the math orchestra needs an agent with role solver"));
        String verifier = cfg.agents().stream().filter(a -> a.role().equals("verifier")).map(AgentSpec::id).findFirst()
                .orElse(null);
        Verdict malformed = oc.malformedVerdict().configName().equals("reject") ? Verdict.REJECT : Verdict.APPROVE;
        // the environment's verdict parser, so that validity and the workflow read replies alike
        return new MathOrchestra(team, new MathOrchestra.Options(oc.maxLoops(), malformed, solver, verifier),
                text -> switch (MathReward.parseVerdict(text)) {
                    case APPROVE -> Verdict.APPROVE;
                    case REJECT -> Verdict.REJECT;
                    case MALFORMED -> Verdict.MALFORMED;
                });
    }

    static List<List<Task>> data(RunConfig cfg) {
        var d = cfg.data();
        if (d.source() == dev.drmas.config.DataConfig.Source.JSONL) {
            List<Task> tr = JsonlTasks.read(d.trainFile(), d.questionField(), d.answerField());
            List<Task> te = d.testFile() == null ? List.of() : JsonlTasks.read(d.testFile(), d.questionField(), d.answerField());
            return List.of(tr, te);
        }
        SyntheticData s = d.synthetic();
        String ops = String.join("", s.operators());
        var gen = new SyntheticArithmetic(2, s.operands(), 1, s.digits(), ops, s.allowNegative());
        var split = gen.split(s.trainSize(), s.testSize(), s.seed());
        return List.of(split.train(), split.test());
    }

    @Override
    public Team team() {
        return team;
    }

    @Override
    public Orchestra orchestra() {
        return orchestra;
    }

    @Override
    public List<Task> train() {
        return train;
    }

    @Override
    public List<Task> test() {
        return test;
    }

    @Override
    public double reward(Task task, Episode e) {
        return MathReward.episodeReward(e.action(), task.answer());
    }

    @Override
    public double rowScore(double r, Step s) {
        return reward.rowScore(r, s.valid());
    }

    @Override
    public Map<String, Double> episodeSums(List<Task> tasks, List<Episode> episodes) {
        return Map.of();  // the trainer's verifier approve/reject rates are the math workload's own figures
    }

    @Override
    public AgentPolicy demonstrator(List<Task> tasks, double pCorrect, SplittableRandom rng) {
        Map<Integer, String> lastAnswer = new HashMap<>();
        return (agent, reqs) -> {
            List<Turn> out = new ArrayList<>();
            for (TurnRequest r : reqs) {
                Task t = tasks.get(r.episode());
                String text;
                if (agent.id().equals(team.agent(0).id()) || !lastAnswer.containsKey(r.episode())) {
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
