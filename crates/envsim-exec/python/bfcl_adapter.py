# envsim's JSON state adapter for BFCL multi-turn API classes (Python 3 standard library only).
#
# `envsim env import-bfcl` appends this text to every generated env.py, after the BFCL class
# source, and the import helper (bfcl_import.py) runs the same text to record the ground truth,
# so the live BFCL object and the rebuilt one are exported by one implementation.
#
# The JSON state of a BFCL object is its attributes:
# - a public attribute `name` is the state key `name`; a private one `_name` (BFCL keeps state
#   such as the random generator and the current directory there) is `private_name`; attributes
#   equal to a freshly constructed object's (the constant `_api_description`) are left out;
# - values that JSON cannot hold are written as JSON and tagged in the state key `json_types`
#   (JSON Pointer -> tag): "set"/"frozenset"/"tuple" (a sorted list / a list), "int_keys" (a dict
#   whose keys are all integers, written as strings) or {"int_keys": [...]} (a dict with some
#   integer keys: those listed), "random" (a random.Random as {"seed", "words_drawn"}: the seed
#   it was created with and how many 32-bit words it has produced since, or {"mt_state": ...}
#   when that position cannot be found), "fs_tree" (a Directory/File tree as nested
#   {"type": "directory", "contents": {...}} / {"type": "file", "content": ...}, names kept
#   where they differ from their key) and "ref" (an object already written elsewhere in the
#   state, as the JSON Pointer of that place, e.g. the current directory);
# - File._last_modified is written by BFCL but never read by any tool; it is not exported (a
#   rebuilt file carries the time it was rebuilt).
# Rebuilding an object from its JSON state and exporting it again gives the same JSON.

import copy as _envsim_copy
import inspect as _envsim_inspect
import json as _envsim_json
import math as _envsim_math
import random as _envsim_random

ENVSIM_TYPES_KEY = "json_types"
ENVSIM_PRIVATE_PREFIX = "private"
# How far the exporter looks for a generator's position before writing its whole state.
ENVSIM_MAX_WORDS = 200000
ENVSIM_WRITE_ONLY = {("File", "_last_modified")}


class EnvsimStateError(ValueError):
    """A value the JSON state cannot hold, or a JSON state that does not describe an object."""


def _envsim_escape(key):
    return key.replace("~", "~0").replace("/", "~1")


def _envsim_unescape(token):
    return token.replace("~1", "/").replace("~0", "~")


def envsim_state_key(attribute):
    if attribute.startswith("_"):
        return ENVSIM_PRIVATE_PREFIX + attribute
    return attribute


def envsim_attribute(key):
    if key.startswith(ENVSIM_PRIVATE_PREFIX + "_"):
        return key[len(ENVSIM_PRIVATE_PREFIX):]
    return key


def _envsim_fs_classes(value):
    """(Directory, File) when `value` is a node of BFCL's file-system tree, else None."""
    names = [c.__name__ for c in type(value).__mro__]
    if "Directory" in names and hasattr(value, "contents") and hasattr(value, "parent"):
        return "directory"
    if "File" in names and hasattr(value, "content") and hasattr(value, "name"):
        return "file"
    return None


def _envsim_random_position(generator):
    """{"seed", "words_drawn"} when the generator is a seeded one advanced by whole words."""
    origin = getattr(generator, "_envsim_origin", None)
    state = generator.getstate()
    if origin is not None and state[2] is None:
        seed, start = origin
        probe = _envsim_random.Random(seed)
        for _ in range(start):
            probe.getrandbits(32)
        for words in range(start, start + ENVSIM_MAX_WORDS + 1):
            if probe.getstate() == state:
                generator._envsim_origin = (seed, words)
                return {"seed": seed, "words_drawn": words}
            probe.getrandbits(32)
    version, internal, gauss = state
    return {"mt_state": [version, list(internal), gauss]}


def _envsim_random_from(value, at):
    if not isinstance(value, dict):
        raise EnvsimStateError("%s: a random generator must be an object" % at)
    if "mt_state" in value:
        try:
            version, internal, gauss = value["mt_state"]
            generator = _envsim_random.Random()
            generator.setstate((version, tuple(internal), gauss))
        except (TypeError, ValueError) as exc:
            raise EnvsimStateError("%s: bad mt_state: %s" % (at, exc))
        return generator
    seed, words = value.get("seed"), value.get("words_drawn")
    if not isinstance(words, int) or isinstance(words, bool) or words < 0:
        raise EnvsimStateError("%s: `words_drawn` must be a non-negative integer" % at)
    if seed is not None and (not isinstance(seed, (int, str)) or isinstance(seed, bool)):
        raise EnvsimStateError("%s: `seed` must be an integer, a string or null" % at)
    generator = _envsim_random.Random(seed)
    for _ in range(words):
        generator.getrandbits(32)
    generator._envsim_origin = (seed, words)
    return generator


class _EnvsimEncoder:
    def __init__(self):
        self.types = {}
        self.seen = {}  # id(object) -> pointer, for objects written once and referenced after

    def encode(self, value, at):
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float):
            if not _envsim_math.isfinite(value):
                raise EnvsimStateError("%s: %r is not a JSON number" % (at or "/", value))
            return value
        if isinstance(value, dict):
            return self.encode_dict(value, at)
        if isinstance(value, list):
            return [self.encode(v, "%s/%d" % (at, i)) for i, v in enumerate(value)]
        if isinstance(value, tuple):
            self.types[at] = "tuple"
            return [self.encode(v, "%s/%d" % (at, i)) for i, v in enumerate(value)]
        if isinstance(value, (set, frozenset)):
            self.types[at] = "frozenset" if isinstance(value, frozenset) else "set"
            try:
                items = sorted(value)
            except TypeError:
                items = sorted(value, key=lambda v: (type(v).__name__, repr(v)))
            return [self.encode(v, "%s/%d" % (at, i)) for i, v in enumerate(items)]
        if isinstance(value, _envsim_random.Random):
            self.types[at] = "random"
            return _envsim_random_position(value)
        if id(value) in self.seen:
            self.types[at] = "ref"
            return self.seen[id(value)]
        kind = _envsim_fs_classes(value)
        if kind is not None:
            self.types[at] = "fs_tree"
            return self.encode_node(value, None, at)
        raise EnvsimStateError(
            "%s: a %s.%s cannot be written as JSON state"
            % (at or "/", type(value).__module__, type(value).__name__)
        )

    def encode_dict(self, value, at):
        out = {}
        int_keys = []
        for key, item in value.items():
            if isinstance(key, str):
                text = key
            elif isinstance(key, int) and not isinstance(key, bool):
                text = str(key)
                int_keys.append(text)
            else:
                raise EnvsimStateError("%s: the dict key %r is neither a string nor an integer" % (at or "/", key))
            if text in out:
                raise EnvsimStateError("%s: the keys %r and %r collide as JSON" % (at or "/", text, key))
            out[text] = self.encode(item, "%s/%s" % (at, _envsim_escape(text)))
        if int_keys:
            self.types[at] = "int_keys" if len(int_keys) == len(value) else {"int_keys": int_keys}
        return out

    def encode_node(self, node, key, at):
        self.seen[id(node)] = at
        kind = _envsim_fs_classes(node)
        out = {"type": kind}
        if key is None or node.name != key:
            out["name"] = node.name
        if kind == "file":
            out["content"] = self.encode(node.content, at + "/content")
            extra = [a for a in vars(node) if a not in ("name", "content") and ("File", a) not in ENVSIM_WRITE_ONLY]
        else:
            contents = {}
            for child_key, child in node.contents.items():
                if not isinstance(child_key, str):
                    raise EnvsimStateError("%s/contents: the entry name %r is not a string" % (at, child_key))
                if _envsim_fs_classes(child) is None:
                    raise EnvsimStateError("%s/contents/%s: not a Directory or File" % (at, _envsim_escape(child_key)))
                if getattr(child, "parent", node) is not node:
                    raise EnvsimStateError("%s/contents/%s: its parent is another directory" % (at, _envsim_escape(child_key)))
                contents[child_key] = self.encode_node(child, child_key, "%s/contents/%s" % (at, _envsim_escape(child_key)))
            out["contents"] = contents
            extra = [a for a in vars(node) if a not in ("name", "contents", "parent")]
        if extra:
            raise EnvsimStateError("%s: attributes %s of a %s are not part of the JSON state" % (at, sorted(extra), kind))
        return out


def envsim_export(obj, constants):
    """The JSON state of a BFCL object. `constants`: attribute -> value of a fresh object."""
    encoder = _EnvsimEncoder()
    state = {}
    for attribute, value in vars(obj).items():
        if attribute.startswith("_envsim"):
            continue
        if attribute in constants and constants[attribute] == value:
            continue
        key = envsim_state_key(attribute)
        if key == ENVSIM_TYPES_KEY or (not attribute.startswith("_") and key.startswith(ENVSIM_PRIVATE_PREFIX + "_")):
            raise EnvsimStateError("the attribute %r collides with envsim's state keys" % attribute)
        state[key] = encoder.encode(value, "/" + _envsim_escape(key))
    if encoder.types:
        state[ENVSIM_TYPES_KEY] = dict(sorted(encoder.types.items()))
    return state


class _EnvsimDecoder:
    def __init__(self, types, namespace):
        self.types = types
        self.namespace = namespace
        self.refs = []  # (container, key, pointer)
        self.nodes = {}  # pointer -> rebuilt node

    def decode(self, value, at):
        tag = self.types.get(at)
        if tag is None:
            if isinstance(value, dict):
                return {k: self.decode(v, "%s/%s" % (at, _envsim_escape(k))) for k, v in value.items()}
            if isinstance(value, list):
                return [self.decode(v, "%s/%d" % (at, i)) for i, v in enumerate(value)]
            return value
        if tag in ("set", "frozenset", "tuple"):
            if not isinstance(value, list):
                raise EnvsimStateError("%s: tagged %s but not a list" % (at, tag))
            items = [self.decode(v, "%s/%d" % (at, i)) for i, v in enumerate(value)]
            return {"set": set, "frozenset": frozenset, "tuple": tuple}[tag](items)
        if tag == "int_keys" or (isinstance(tag, dict) and "int_keys" in tag):
            if not isinstance(value, dict):
                raise EnvsimStateError("%s: tagged int_keys but not an object" % at)
            numeric = set(value) if tag == "int_keys" else set(tag["int_keys"])
            out = {}
            for k, v in value.items():
                item = self.decode(v, "%s/%s" % (at, _envsim_escape(k)))
                if k in numeric:
                    try:
                        out[int(k)] = item
                    except ValueError:
                        raise EnvsimStateError("%s: the key %r is tagged integer" % (at, k))
                else:
                    out[k] = item
            return out
        if tag == "random":
            return _envsim_random_from(value, at)
        if tag == "fs_tree":
            return self.decode_node(value, None, None, at)
        if tag == "ref":
            if not isinstance(value, str):
                raise EnvsimStateError("%s: a reference must be a JSON Pointer string" % at)
            return _EnvsimRef(value, at)
        raise EnvsimStateError("%s: unknown json_types tag %r" % (at, tag))

    def decode_node(self, value, key, parent, at):
        if not isinstance(value, dict) or value.get("type") not in ("directory", "file"):
            raise EnvsimStateError("%s: expected {\"type\": \"directory\"|\"file\", ...}" % at)
        name = value.get("name", key)
        if not isinstance(name, str):
            raise EnvsimStateError("%s: the name must be a string" % at)
        if value["type"] == "file":
            content = value.get("content", "")
            if not isinstance(content, str):
                raise EnvsimStateError("%s/content: must be a string" % at)
            node = self.namespace["File"](name, content)
        else:
            node = self.namespace["Directory"](name, parent)
            contents = value.get("contents", {})
            if not isinstance(contents, dict):
                raise EnvsimStateError("%s/contents: must be an object" % at)
            for child_key, child in contents.items():
                node.contents[child_key] = self.decode_node(
                    child, child_key, node, "%s/contents/%s" % (at, _envsim_escape(child_key))
                )
        self.nodes[at] = node
        return node


class _EnvsimRef:
    def __init__(self, pointer, at):
        self.pointer = pointer
        self.at = at


def envsim_rebuild(cls, state, namespace):
    """A BFCL object whose JSON state is `state` (constructed with no arguments, then each
    attribute set from the state)."""
    if not isinstance(state, dict):
        raise EnvsimStateError("the state must be an object")
    types = state.get(ENVSIM_TYPES_KEY, {})
    if not isinstance(types, dict):
        raise EnvsimStateError("/%s must be an object" % ENVSIM_TYPES_KEY)
    obj = cls()
    decoder = _EnvsimDecoder(types, namespace)
    refs = []
    for key, value in state.items():
        if key == ENVSIM_TYPES_KEY:
            continue
        decoded = decoder.decode(value, "/" + _envsim_escape(key))
        if isinstance(decoded, _EnvsimRef):
            refs.append((key, decoded))
            continue
        setattr(obj, envsim_attribute(key), decoded)
    for key, ref in refs:
        target = decoder.nodes.get(ref.pointer)
        if target is None:
            raise EnvsimStateError("%s: the reference %r names no object of the state" % (ref.at, ref.pointer))
        setattr(obj, envsim_attribute(key), target)
    return obj


def envsim_constants(cls):
    """The attributes a fresh object holds (BFCL constructors set constants only)."""
    try:
        fresh = cls()
    except Exception:
        return {}
    return dict(vars(fresh))


def envsim_public_methods(cls):
    return [
        name
        for name, member in _envsim_inspect.getmembers(cls, _envsim_inspect.isfunction)
        if not name.startswith("_")
    ]


def envsim_adapter(bfcl_class, adapter_name, default_state, namespace):
    """The envsim class for `bfcl_class`: constructed from a JSON state, its public attributes
    are the JSON state, and each tool rebuilds the BFCL object from them, calls it and exports
    the state again (also when the tool raises: the changes made before stay)."""
    constants = envsim_constants(bfcl_class)

    def __init__(self, init_config=None):
        for key, value in _envsim_copy.deepcopy(default_state).items():
            setattr(self, key, value)

    def _envsim_run(self, tool, kwargs):
        state = {k: v for k, v in vars(self).items() if not k.startswith("_")}
        obj = envsim_rebuild(bfcl_class, state, namespace)
        try:
            return getattr(obj, tool)(**kwargs)
        finally:
            after = envsim_export(obj, constants)
            for key in list(state):
                if key not in after:
                    delattr(self, key)
            for key, value in after.items():
                setattr(self, key, value)

    members = {"__init__": __init__, "_envsim_run": _envsim_run, "__doc__": bfcl_class.__doc__}
    for name in envsim_public_methods(bfcl_class):
        target = getattr(bfcl_class, name)

        def tool(self, _envsim_name=name, **kwargs):
            return self._envsim_run(_envsim_name, kwargs)

        tool.__name__ = tool.__qualname__ = name
        tool.__doc__ = target.__doc__
        tool.__signature__ = _envsim_inspect.signature(target)
        members[name] = tool
    return type(adapter_name, (), members)
