"""MCC's Python runner: stdlib only, runs under any Python 3.8+ interpreter.

    python -c <this> introspect <fn> [<fn> ...]   -> JSON list, one report per callable
    python -c <this> exec <fn>                    -> params JSON on stdin; prints
                                                     JSON [result, context_or_null]

A callable is `module:attr[.attr]` or `module.attr`. Anything the tool's code prints (on
import or while running) goes to stderr: fd 1 is pointed at fd 2 and the result is written
to a private duplicate of the original stdout, so it can never corrupt the JSON.
"""
import asyncio
import importlib
import inspect
import json
import os
import sys
import traceback
import typing

TYPES = {str: "str", int: "int", float: "float", bool: "bool", list: "list", dict: "dict"}


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
        if not module_name:
            raise ImportError("'%s' is not a 'module:attr' or 'module.attr' path" % path)
    obj = importlib.import_module(module_name)
    for attr in attrs.split("."):
        obj = getattr(obj, attr)
    if not callable(obj):
        raise TypeError("'%s' is not callable" % path)
    return obj


def type_name(annotation):
    if annotation is inspect.Parameter.empty:
        return "str"
    if isinstance(annotation, str):
        base = annotation.split("[", 1)[0].strip()
        return {"List": "list", "Dict": "dict"}.get(base, base if base in TYPES.values() else "str")
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


def describe(path):
    fn = resolve(path)
    sig = inspect.signature(fn)
    params = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        entry = {"name": p.name, "type": type_name(p.annotation), "required": p.default is p.empty}
        if p.default is not p.empty:
            entry["default"] = jsonable(p.default)
        params.append(entry)
    return {
        "fn": path,
        "ok": True,
        "name": getattr(fn, "__name__", path.replace(":", ".").rsplit(".", 1)[-1]),
        "doc": inspect.getdoc(fn) or "",
        "params": params,
        "return_type": return_name(sig.return_annotation),
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


def execute(path, out):
    kwargs = json.loads(sys.stdin.read() or "{}")
    fn = resolve(path)
    context = None
    if "context" in inspect.signature(fn).parameters:
        context = json.loads(os.environ.get("MCC_CTX") or "{}")
        kwargs["context"] = context
    result = fn(**kwargs)
    if inspect.isawaitable(result):
        result = asyncio.run(_await(result))
    json.dump([result, context], out, default=str)


async def _await(awaitable):
    return await awaitable


def main():
    out = protect_stdout()
    mode, paths = sys.argv[1], sys.argv[2:]
    if mode == "introspect":
        introspect(paths, out)
    elif mode == "exec":
        execute(paths[0], out)
    else:
        sys.stderr.write("unknown mode %r\n" % mode)
        sys.exit(2)
    out.flush()


if __name__ == "__main__":
    main()
