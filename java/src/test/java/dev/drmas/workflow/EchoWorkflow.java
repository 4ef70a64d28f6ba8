// EchoWorkflow.java — a workflow that drmas does not ship, registered only through this test class
// path's META-INF/services/dev.drmas.workflow.Workflow, exactly as a user's jar would add one: one
// "echo" agent repeats the question `repeats` times; the reward is 1 when its last reply equals the
// task's answer. Its options and its (absent) generator go through the config layer like the
// built-in ones.
package dev.drmas.workflow;

import dev.drmas.agent.Agent;
import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Episode;
import dev.drmas.agent.EpisodeInit;
import dev.drmas.agent.Orchestra;
import dev.drmas.agent.PromptTemplate;
import dev.drmas.agent.RunningEpisode;
import dev.drmas.agent.Step;
import dev.drmas.agent.Team;
import dev.drmas.agent.Turn;
import dev.drmas.config.Check;
import dev.drmas.config.RunConfig;
import dev.drmas.env.Task;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

public final class EchoWorkflow implements Workflow {
    public static final String NAME = "test-echo";

    /** {@code orchestra.options} of test-echo. */
    public record EchoOptions(int repeats, double invalidPenalty) {
        public EchoOptions {
            Check.positive(repeats, "repeats");
            Check.nonNegative(invalidPenalty, "invalid_penalty");
        }

        public static EchoOptions defaults() {
            return new EchoOptions(1, 0.1);
        }
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public Class<EchoOptions> optionsType() {
        return EchoOptions.class;
    }

    @Override
    public List<String> defaultRoles() {
        return List.of("echo");
    }

    @Override
    public Workload open(RunConfig cfg, PrintStream log) {
        EchoOptions o = cfg.orchestra().options(EchoOptions.class);
        Roles roles = new Roles(NAME, List.of(Roles.Role.one("echo", (i, model) ->
                new Agent("echo", i, model, "", PromptTemplate.of("Say: {question}"), null, text -> !text.isBlank()))));
        Team team = roles.team(cfg);
        TaskFiles.Split data = TaskFiles.read(cfg.data());
        Orchestra orchestra = new Orchestra() {
            @Override
            public Team team() {
                return team;
            }

            @Override
            public List<Episode> run(List<EpisodeInit> episodes, AgentPolicy policy) {
                List<RunningEpisode> states = new ArrayList<>();
                for (EpisodeInit e : episodes) states.add(new RunningEpisode(e));
                for (int r = 0; r < o.repeats(); r++) {
                    List<Turn> turns = RunningEpisode.call(team.agent(0), states, RunningEpisode.active(states), r, policy,
                            st -> team.agent(0).conversation(false, Map.of("question", st.init().question())));
                    for (int i = 0; i < turns.size(); i++) states.get(i).action = turns.get(i).text();
                }
                return states.stream().map(RunningEpisode::finish).toList();
            }
        };
        return new BaseWorkload<>(team, orchestra, data, new InvalidActionPenalty(o.invalidPenalty())) {
            @Override
            public double reward(Task task, Episode e) {
                return e.action().strip().equals(task.answer()) ? 1 : 0;
            }

            @Override
            public Map<String, Double> episodeSums(List<Task> tasks, List<Episode> episodes) {
                double chars = 0;
                for (Episode e : episodes) chars += e.action().length();
                return Map.of("echo/reply_chars", chars);
            }

            @Override
            public int maxTurnsPerEpisode() {
                return o.repeats();
            }

            @Override
            public AgentPolicy demonstrator(List<Task> tasks, double pCorrect, SplittableRandom rng) {
                return (agent, reqs) -> reqs.stream().map(r -> Turn.of(tasks.get(r.episode()).answer())).toList();
            }
        };
    }
}
