"""Plays one episode of an envsim OpenEnv environment with the OpenEnv client.

Usage: openenv_client.py BASE_URL — connects `openenv-core`'s `GenericEnvClient` (its
WebSocket), resets to the task `close`, closes ticket T1, answers, reads the state, and prints
one JSON object with what came back (and `/health` read the way `AutoEnv` reads it). Exits 3
when the openenv package is not installed.
"""

import json
import sys
import urllib.request

try:
    from openenv import GenericEnvClient
except ImportError as e:  # pragma: no cover - reported to the test
    print(f"the openenv package is not installed: {e}", file=sys.stderr)
    sys.exit(3)


def main(base_url):
    seen = {"steps": []}
    with GenericEnvClient(base_url=base_url).sync() as env:
        result = env.reset(task_id="close", seed=1)
        seen["reset"] = result.observation
        for action in (
            {"tool": "close_ticket", "arguments": {"ticket_id": "T1"}},
            {"answer": "T1 is closed."},
        ):
            result = env.step(action)
            seen["steps"].append([result.reward, result.done])
        seen["state"] = env.state()
    with urllib.request.urlopen(base_url + "/health") as response:
        seen["health"] = json.load(response)
    print(json.dumps(seen))


if __name__ == "__main__":
    main(sys.argv[1])
