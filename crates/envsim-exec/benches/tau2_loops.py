# The two baselines of `envsim env replay` on a τ²-bench package (docs/benchmarks.md): the
# package's trajectories run by plain Python loops in one process, with the installed tau2.
#
#   python3 crates/envsim-exec/benches/tau2_loops.py PACKAGE_DIR
#
# - tau2's own loop: per task a fresh environment (`get_environment()`, which loads the
#   database file), then `get_response` per action, the database kept in memory;
# - the JSON loop: per action the state is decoded from JSON text, validated into the domain's
#   database, the tool runs, and the database is dumped and encoded again — what any executor
#   that keeps the state as JSON between calls pays at least.
# Prints milliseconds per action for each, and the actions run.

import importlib
import json
import sys
import time


def main(package_dir):
    manifest = json.load(open(package_dir + "/manifest.json", encoding="utf-8"))
    domain = manifest["domain"]
    runs = [json.loads(line) for line in open(package_dir + "/trajectories.jsonl", encoding="utf-8")]
    from loguru import logger

    logger.remove()
    from tau2.data_model.message import ToolCall

    env_module = importlib.import_module("tau2.domains.%s.environment" % domain)
    actions = sum(len(r["steps"]) for r in runs)

    started = time.perf_counter()
    for run in runs:
        env = env_module.get_environment()
        for k, step in enumerate(run["steps"]):
            action = step["action"]
            env.get_response(ToolCall(id=str(k), name=action["name"], arguments=action["arguments"],
                                      requestor=action.get("requestor", "assistant")))
    own = time.perf_counter() - started

    env = env_module.get_environment()
    db_class, tools_class = type(env.tools.db), type(env.tools)
    state = json.load(open(package_dir + "/states/" + runs[0]["state"], encoding="utf-8"))
    initial_text = json.dumps(state)
    started = time.perf_counter()
    for run in runs:
        text = initial_text
        for step in run["steps"]:
            action = step["action"]
            db = db_class.model_validate(json.loads(text))
            tools = tools_class(db)
            try:
                getattr(tools, action["name"])(**action["arguments"])
            except Exception:
                pass
            text = json.dumps(tools.db.model_dump(mode="json"))
    round_trip = time.perf_counter() - started
    print(json.dumps({
        "domain": domain,
        "actions": actions,
        "tau2_loop_ms_per_action": round(own * 1000 / actions, 1),
        "json_loop_ms_per_action": round(round_trip * 1000 / actions, 1),
    }))


if __name__ == "__main__":
    main(sys.argv[1])
