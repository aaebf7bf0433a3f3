# The two baselines of `envsim env replay` on an AppWorld package (docs/benchmarks.md): the
# package's trajectories run by plain Python loops in one process, with the installed appworld
# (run with the interpreter that has it).
#
#   python crates/envsim-exec/benches/appworld_loops.py PACKAGE_DIR
#
# - AppWorld's own loop: per session the state's tables are loaded into AppWorld's in-memory
#   databases once, then each action is one request through AppWorld's test client, the
#   databases kept;
# - the JSON loop: per action the state is decoded from JSON text, loaded into the databases,
#   the request runs, and the state apps' tables are dumped and encoded again — what any
#   executor that keeps the state as JSON between calls pays at least.
# Both use the package's own env.py (its loading, dumping and request code), so they differ from
# `envsim env replay` only by the executor. Prints milliseconds per action for each.

import json
import sys
import time
import warnings


def main(package_dir):
    warnings.simplefilter("ignore")
    namespace = {"__name__": "appworld_loops"}
    code = open(package_dir + "/env.py", encoding="utf-8").read()
    exec(compile(code, package_dir + "/env.py", "exec"), namespace)
    app = namespace["_ENVSIM_APP"]
    state_apps = namespace["_ENVSIM_STATE_APPS"]
    world = namespace["_envsim_world"]()
    runs = [json.loads(line) for line in open(package_dir + "/trajectories.jsonl", encoding="utf-8")]
    states = {}
    for run in runs:
        if run["state"] not in states:
            states[run["state"]] = open(package_dir + "/states/" + run["state"], encoding="utf-8").read()
    actions = sum(len(r["steps"]) for r in runs)

    started = time.perf_counter()
    for run in runs:
        state = json.loads(states[run["state"]])
        for other in state_apps:
            world.load_app(other, state.get(other))
        for step in run["steps"]:
            action = step["action"]
            try:
                world.request(app, action["name"], action["arguments"])
            except Exception:
                pass
    own = time.perf_counter() - started

    started = time.perf_counter()
    for run in runs:
        text = states[run["state"]]
        for step in run["steps"]:
            action = step["action"]
            state = json.loads(text)
            for other in state_apps:
                world.load_app(other, state.get(other))
            try:
                world.request(app, action["name"], action["arguments"])
            except Exception:
                pass
            text = json.dumps({other: world.dump_app(other) for other in state_apps})
    round_trip = time.perf_counter() - started
    print(json.dumps({
        "app": app,
        "actions": actions,
        "appworld_loop_ms_per_action": round(own * 1000 / actions, 2),
        "json_loop_ms_per_action": round(round_trip * 1000 / actions, 2),
    }))


if __name__ == "__main__":
    main(sys.argv[1])
