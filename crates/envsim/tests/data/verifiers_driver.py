"""Drives packages `envsim export verifiers` generated, with verifiers and without a model.

Usage: verifiers_driver.py DESK_DIR SHORT_DIR ODD_DIR BASE_URL TOKEN

- DESK_DIR: the package of the task set `desk`, generated with a server URL nothing listens at;
  BASE_URL is where the set really is, and TOKEN the server's bearer token. Its tasks are
  loaded through verifiers' loaders (the default URL first, which must fail; then BASE_URL and
  TOKEN as its CLI parser reads `--env.taskset.task.*`), `vf-eval --dry-run` resolves it as
  its CLI does, and the task `close` is played as a rollout plays it: setup, tool calls
  through an MCP server with the rollout's state channel, the final answer, finalize, scoring.
- SHORT_DIR: the package of `desk-short` (a terminal tool, partial rewards), generated with
  the right URL, the token in $ENVSIM_TOKEN (refused without it): a tool call ends the
  episode, so finalize sends no answer.
- ODD_DIR: a package of tools whose names and descriptions Python cannot take as they are:
  imported, and its tools listed as the model would see them.

Prints one JSON object with what it saw. Exits 3 when verifiers is not installed.
"""

import asyncio
import glob
import http.server
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading

DESK_DIR, SHORT_DIR, ODD_DIR, BASE_URL, TOKEN = sys.argv[1:6]
for folder in (DESK_DIR, SHORT_DIR, ODD_DIR):
    sys.path.insert(0, folder)

try:
    import verifiers.v1 as vf
    from mcp.server.mcpserver import MCPServer
    from verifiers.v1.state import state_cls
except ImportError as e:  # pragma: no cover - reported to the test
    print(f"verifiers is not installed: {e}", file=sys.stderr)
    sys.exit(3)


class StateChannel:
    """The rollout's state channel, as verifiers' interception server keeps it: tool servers
    pull `trace.state` before each call and push it back after (`VF_STATE_URL`)."""

    def __init__(self):
        self.trace = None
        self.secret = secrets.token_urlsafe(16)
        channel = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _allowed(self):
                if self.headers.get("Authorization") != f"Bearer {channel.secret}":
                    self.send_response(401)
                    self.end_headers()
                    return False
                return True

            def do_GET(self):
                if not self._allowed():
                    return
                body = channel.trace.state.model_dump_json().encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_PUT(self):
                if not self._allowed():
                    return
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                state_type = type(channel.trace.state)
                channel.trace.state = state_type.model_validate_json(raw)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        os.environ["VF_STATE_URL"] = f"http://127.0.0.1:{self.server.server_port}/state"
        os.environ["VF_STATE_SECRET"] = self.secret


def trace_of(task):
    """A fresh trace of `task`, as a rollout mints it."""
    return vf.Trace(
        task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        state=state_cls(type(task))(),
        agent=vf.AgentInfo(config=vf.AgentConfig()),
    )


def answer(trace, text):
    """The model's final message, as the rollout's message graph holds it."""
    trace.nodes.append(vf.MessageNode(message=vf.AssistantMessage(content=text), sampled=True))


async def mcp_server_of(task):
    """The task's tool server, registered on an MCP server as its process registers it."""
    toolset = type(task).toolsets(task.config)[0]
    server = MCPServer(toolset.server_name or type(toolset).__name__)
    toolset.register(server)
    listed = await server.list_tools()
    return server, listed


async def call(server, name, arguments):
    result = await server.call_tool(name, arguments)
    return {
        "error": bool(getattr(result, "is_error", False)),
        "text": [c.text for c in result.content],
    }


def tool_seen(tool):
    return {"name": tool.name, "description": tool.description, "input": tool.input_schema}


def load(plugin_id, base_url=None, token=None):
    """The plugin's environment as verifiers' CLI resolves it (its config narrowed by the
    taskset id, `--env.taskset.task.*` parsed by its CLI parser), and its tasks."""
    from pydantic_config import cli

    args = ["--id", plugin_id]
    if base_url is not None:
        args += ["--task.base-url", base_url]
    if token is not None:
        args += ["--task.token", token]
    taskset_config = cli(vf.taskset_config_type(plugin_id), args=args)
    env = vf.load_environment(vf.resolve_env_config({"taskset": taskset_config.model_dump()}))
    return env, list(env.taskset)


async def play_close(channel, seen):
    seen["default_url_error"] = error_of(lambda: load("envsim-desk"))
    env, tasks = load("envsim-desk", BASE_URL, TOKEN)
    seen["env"] = type(env).__name__
    seen["harness"] = type(env._harnesses["agent"]).__name__
    seen["tasks"] = [{"id": t.data.id, "prompt": t.data.prompt, "key": t.key} for t in tasks]
    task = next(t for t in tasks if t.data.id == "close")
    seen["base_url"] = task.config.base_url
    trace = trace_of(task)
    channel.trace = trace
    await task.setup(trace, None)
    seen["episode_id"] = trace.state.episode_id
    server, listed = await mcp_server_of(task)
    seen["tools"] = [tool_seen(t) for t in listed]
    seen["results"] = [
        await call(server, "close_ticket", {"ticket_id": "T1"}),
        await call(server, "get_ticket", {"ticket_id": "T1"}),
        await call(server, "get_ticket", {"ticket_id": "T9"}),
    ]
    seen["stop_before"] = await task.episode_over(channel.trace)
    trace = channel.trace
    answer(trace, "T1 is closed.")
    await task.finalize(trace, None)
    seen["stop_after"] = await task.episode_over(trace)
    await task.score(trace)
    seen["info"] = trace.info.get("envsim")
    seen["rewards"] = {k: r.score for k, r in trace.rewards.items() if r is not None}
    seen["metrics"] = trace.metrics
    seen["reward"] = trace.reward
    # The episode is over: another call is refused, and the model reads why.
    seen["after_end"] = await call(server, "get_ticket", {"ticket_id": "T1"})


def error_of(load_it):
    try:
        load_it()
    except Exception as e:  # noqa: BLE001 - the message is what the test reads
        return f"{type(e).__name__}: {e}"
    return None


async def play_short(channel, seen):
    seen["no_token_error"] = error_of(lambda: load("envsim-desk-short"))
    os.environ["ENVSIM_TOKEN"] = TOKEN
    _, tasks = load("envsim-desk-short")
    task = next(t for t in tasks if t.data.id == "new")
    trace = trace_of(task)
    channel.trace = trace
    await task.setup(trace, None)
    server, _ = await mcp_server_of(task)
    result = await call(server, "create_ticket", {"title": "c"})
    trace = channel.trace
    stop = await task.episode_over(trace)
    await task.finalize(trace, None)
    await task.score(trace)
    seen["short"] = {
        "episode_id": trace.state.episode_id,
        "result": result,
        "stop": stop,
        "info": trace.info.get("envsim"),
        "reward": trace.reward,
        "metrics": trace.metrics,
    }


async def list_odd(seen):
    from envsim_odd.tools import EnvsimToolset

    server = MCPServer("odd")
    EnvsimToolset(vf.ToolsetConfig()).register(server)
    seen["odd"] = {
        "taskset": vf.utils.loaders.taskset_class("envsim-odd").__name__,
        "tools": [tool_seen(t) for t in await server.list_tools()],
    }


def dry_run(seen):
    """`vf-eval --dry-run` of the desk package: its CLI resolves and validates the run and
    writes the resolved config (in a temporary folder), which is read back."""
    vf_eval = os.path.join(os.path.dirname(sys.executable), "vf-eval")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([DESK_DIR, os.environ.get("PYTHONPATH", "")]))
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run(
            [vf_eval, "envsim-desk", "--env.taskset.task.base-url", BASE_URL, "--dry-run",
             "--no-push", "--output-dir", out],
            capture_output=True,
            text=True,
            env=env,
            cwd=out,
            timeout=300,
        )
        resolved = glob.glob(os.path.join(out, "*", "configs", "resolved", "eval.json"))
        taskset = None
        if resolved:
            with open(resolved[0]) as f:
                taskset = json.load(f)["env"]["taskset"]
    seen["dry_run"] = {
        "code": done.returncode,
        "err": done.stderr[-2000:] if done.returncode else "",
        "taskset": taskset and {"id": taskset["id"], "base_url": taskset["task"]["base_url"]},
    }


async def main():
    seen = {}
    channel = StateChannel()
    await play_close(channel, seen)
    await play_short(channel, seen)
    await list_odd(seen)
    dry_run(seen)
    print(json.dumps(seen))


if __name__ == "__main__":
    asyncio.run(main())
