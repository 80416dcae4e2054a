"""MCC's Python runner: stdlib only, runs under any Python 3.8+ interpreter.

    python -c <this> introspect <fn> [<fn> ...]   -> JSON list, one report per callable
    python -c <this> exec <fn>                    -> params JSON on stdin; prints
                                                     JSON [result, context_or_null]

A callable is `module:attr[.attr]` or `module.attr`. Anything the tool's code prints (on
import or while running, through print() or straight to fd 1) goes to stderr: fd 1 is
pointed at fd 2 and the result is written to a private duplicate of the original stdout,
so it can never corrupt the JSON.
"""
import asyncio
import importlib
import inspect
import json
import os
import sys
import traceback
import types
import typing

TYPES = {str: "str", int: "int", float: "float", bool: "bool", list: "list", dict: "dict"}
TYPE_NAMES = {"str": "str", "int": "int", "float": "float", "bool": "bool",
              "list": "list", "dict": "dict", "List": "list", "Dict": "dict"}
UNION_TYPES = tuple(t for t in (typing.Union, getattr(types, "UnionType", None)) if t)
USAGE = "usage: pyrunner.py <introspect|exec> <fn_path> [fn_path ...]\n"


def protect_stdout():
    sys.stdout.flush()
    result_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(result_fd, "w", encoding="utf-8")


def resolve(path):
    if ":" in path:
        module_name, attrs = path.split(":", 1)
    else:
        module_name, _, attrs = path.rpartition(".")
    if not module_name or not attrs:
        raise ImportError("Invalid fn path '%s': use 'module:attr.attr' or 'module.attr'" % path)
    obj = importlib.import_module(module_name)
    for attr in attrs.split("."):
        obj = getattr(obj, attr)
    if not callable(obj):
        raise TypeError("'%s' is not callable" % path)
    return obj


def unwrap_optional(annotation):
    """`Optional[X]` and `X | None` are X: the None only says the param may be left out."""
    if typing.get_origin(annotation) in UNION_TYPES:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def type_name(annotation):
    """One of the six param types; anything else (or no annotation) is `str`, as in MCC."""
    if annotation is inspect.Parameter.empty:
        return "str"
    annotation = unwrap_optional(annotation)
    if isinstance(annotation, str):
        text = annotation.strip()
        if text.startswith("Optional[") and text.endswith("]"):
            text = text[len("Optional["):-1]
        text = text.replace("typing.", "").split("|")[0].strip()
        return TYPE_NAMES.get(text.split("[", 1)[0].strip(), "str")
    origin = typing.get_origin(annotation) or annotation
    return TYPES.get(origin, "str")


def return_name(annotation):
    if annotation is inspect.Signature.empty:
        return None
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def jsonable(value):
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)


def type_hints(fn):
    """Annotations with string forms (`from __future__ import annotations`) resolved."""
    try:
        return typing.get_type_hints(fn)
    except Exception:
        return {}


def describe(path):
    fn = resolve(path)
    sig = inspect.signature(fn)
    hints = type_hints(fn)
    params = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        annotation = hints.get(p.name, p.annotation)
        entry = {"name": p.name, "type": type_name(annotation), "required": p.default is p.empty}
        if p.default is not p.empty:
            entry["default"] = jsonable(p.default)
        params.append(entry)
    return {
        "fn": path,
        "ok": True,
        "name": getattr(fn, "__name__", None) or path.replace(":", ".").rsplit(".", 1)[-1],
        "doc": inspect.getdoc(fn) or "",
        "params": params,
        "return_type": return_name(hints.get("return", sig.return_annotation)),
    }


def introspect(paths, out):
    reports = []
    for path in paths:
        try:
            reports.append(describe(path))
        except BaseException as exc:  # report every failure, keep going
            reports.append({
                "fn": path,
                "ok": False,
                "error": "".join(traceback.format_exception_only(type(exc), exc)).strip(),
                "traceback": traceback.format_exc(),
            })
    json.dump(reports, out)


def session_context():
    try:
        context = json.loads(os.environ.get("MCC_CTX") or "{}")
    except ValueError:
        return {}
    return context if isinstance(context, dict) else {}


def execute(path, out):
    kwargs = json.loads(sys.stdin.read() or "{}")
    fn = resolve(path)
    context = None
    if "context" in inspect.signature(fn).parameters:
        context = session_context()
        kwargs["context"] = context
    result = fn(**kwargs)
    if inspect.isawaitable(result):
        result = asyncio.run(_await(result))
    json.dump([result, context], out, default=str)


async def _await(awaitable):
    return await awaitable


def main():
    if len(sys.argv) < 3:
        sys.stderr.write(USAGE)
        sys.exit(1)
    mode, paths = sys.argv[1], sys.argv[2:]
    if mode not in ("introspect", "exec"):
        sys.stderr.write("unknown mode: %r\n" % mode)
        sys.exit(1)
    out = protect_stdout()
    if mode == "introspect":
        introspect(paths, out)
    else:
        execute(paths[0], out)
    out.flush()


if __name__ == "__main__":
    main()
