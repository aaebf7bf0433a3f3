"""Oracle for envsim's reference-lane parity tests (standard library only).

Replays, with CPython's own json, ast, re, copy and ==, the per-sample procedure of the
reference EnvSimBench evaluator as documented in envsim's docs/formats.md ("reference lane"):
extraction of the output object, feedback normalisation, change application, config check.

Input: JSON lines {"before", "after", "observation", "output"} where "output" is the raw model
text, or {"parsed": <object>} for an output object read from a result file.
Output: one JSON line per case: {"outcome": "scored" | "failed_parse" | "crash", "fm": bool,
"cm": bool, "crash": str | null}.

Each case is scored in a worker thread whose Python call stack has the same depth as the
reference evaluator's at the same point, because json.loads's nesting limit is the interpreter's
recursion limit minus the frames already on the stack.
"""

import ast
import copy
import json
import re
import sys
from concurrent.futures import ThreadPoolExecutor

FENCED = re.compile(r"```(?:json)?\s*([\s\S]*?)```", re.IGNORECASE)
FIRST_BRACES = re.compile(r"\{[\s\S]*?\}")


def find_object(text):
    # json.loads is called from this frame directly on every path (no helper function), so
    # its nesting limit matches the reference's.
    if not isinstance(text, str):
        return None
    fence = FENCED.search(text)
    if fence:
        inner = fence.group(1).strip()
        try:
            return json.loads(inner)
        except Exception:
            try:
                return ast.literal_eval(inner)
            except Exception:
                pass
    try:
        return json.loads(text)
    except Exception:
        pass
    braces = FIRST_BRACES.search(text)
    if braces:
        try:
            return json.loads(braces.group(0))
        except Exception:
            try:
                return ast.literal_eval(braces.group(0))
            except Exception:
                return None
    return None


def normalise(value):
    if value is None or not isinstance(value, str):
        return value
    found = find_object(value)
    if found is not None:
        return found
    try:
        return ast.literal_eval(value)
    except Exception:
        pass
    stripped = value.strip()
    if stripped[:1] == stripped[-1:] and stripped[:1] in ("'", '"'):
        inner = stripped[1:-1]
        found = find_object(inner)
        if found is not None:
            return found
        try:
            return ast.literal_eval(inner)
        except Exception:
            pass
    return value


def write_change(state, path, value, kind):
    if not path:
        return
    if isinstance(path, list):
        parts = list(path)
    elif isinstance(path, str):
        parts = path.split(".")
    else:
        parts = [str(path)]
    node = state
    for part in parts[:-1]:
        if isinstance(node, dict):
            if part not in node:
                node[part] = {}
            node = node[part]
        elif isinstance(node, list):
            try:
                index = int(part)
            except Exception:
                return
            while index >= len(node):
                node.append({})
            node = node[index]
        else:
            return
    last = parts[-1]
    removing = kind in ("delete", "removed")
    if isinstance(node, dict):
        if removing:
            if last in node:
                del node[last]
        else:
            node[last] = value
    elif isinstance(node, list):
        try:
            index = int(last)
        except Exception:
            return
        if removing:
            if 0 <= index < len(node):
                node.pop(index)
        else:
            while index >= len(node):
                node.append(None)
            node[index] = value


def truth_changes(before, after, prefix=""):
    """(dotted path, value after) for every change, Python equality, lists atomic."""
    out = []
    for key in sorted(set(before) | set(after)):
        path = prefix + "." + key if prefix else key
        if key not in before:
            out.append((path, after[key]))
        elif key not in after:
            out.append((path, None))
        elif isinstance(before[key], dict) and isinstance(after[key], dict):
            out.extend(truth_changes(before[key], after[key], path))
        elif before[key] != after[key]:
            out.append((path, after[key]))
    return out


def config_holds(state, changes):
    for path, expected in changes:
        node = state
        for part in path.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            else:
                return False
        if node != expected:
            return False
    return True


def score(case):
    # Same stack depth as the reference's evaluation function.
    before = case["before"] or {}
    after = case["after"] or {}
    output = case["output"]
    parsed = output["parsed"] if isinstance(output, dict) else find_object(output)
    if parsed is None:
        return {"outcome": "failed_parse", "fm": False, "cm": False, "crash": None}
    predicted_feedback = normalise(parsed.get("feedback"))
    state = copy.deepcopy(before)
    for change in parsed.get("config_changes", []):
        kind = change.get("type")
        path = change.get("path")
        value = change.get("value") if "value" in change else change.get("after")
        write_change(state, path, value, kind)
    cm = config_holds(state, truth_changes(before, after))
    fm = predicted_feedback == normalise(case["observation"])
    return {"outcome": "scored", "fm": bool(fm), "cm": bool(cm), "crash": None}


def run_case(case):
    try:
        return score(case)
    except Exception as error:
        return {
            "outcome": "crash",
            "fm": False,
            "cm": False,
            "crash": "%s: %s" % (type(error).__name__, error),
        }


def main():
    cases = [json.loads(line) for line in sys.stdin if line.strip()]
    with ThreadPoolExecutor(max_workers=1) as pool:
        for result in pool.map(run_case, cases):
            sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
