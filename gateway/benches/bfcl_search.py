#!/usr/bin/env python3
"""Search quality on a public benchmark: the Berkeley Function Calling Leaderboard.

    cargo build --release -p mcc-gateway && python3 gateway/benches/bfcl_search.py

The PyPI package `bfcl-eval` (pinned below) ships the leaderboard's data. Its sets
simple_python, multiple, live_simple and live_multiple hold 1,911 user questions, each
offered one or more function definitions (name, description, JSON-schema parameters),
with the function it must call as ground truth. Every distinct definition is pooled
into one catalog of MCC tool files (never executed), a release gateway serves it (file
mode, dev-admin auth), and every question goes through MCP `search` with the official
Python SDK (`mcp`). A question is a hit at rank r when the result at rank r has the
expected function's name (near-duplicate definitions share a name).

Reported per set and overall, for keyword-only search (no model; what a gateway serves
in its first seconds) and hybrid search (MCC_TEST_MODEL_DIR or
~/.cache/mcc/models/all-MiniLM-L6-v2, see scripts/fetch-model.sh): recall@1, recall@5,
MRR@10; search latency p50/p99 single-stream and with 4 requests in flight; the time
and peak RSS until the semantic index is built.

THE SPLIT (fixed before any tuning; never change it): a question whose id's SHA-256,
read as a big-endian integer, is 0 modulo 5 belongs to the tuning split (about 20 %);
every other question is held out. Only held-out figures count.

Options: --export DIR (the converted data for the in-process tuning aid
`cargo test -p mcc-gateway --test relevance -- --ignored --nocapture bfcl_`), --gateway PATH (default $CARGO_TARGET_DIR/release/mcc-gateway), --model DIR,
--modes keyword,hybrid, --out FILE.json, --self-test (the converter and the metrics on
inline data: no download, no gateway).
Needs: pip (to download the wheel once into ~/.cache/mcc/bfcl), `pip install "mcp>=2.3"`.
"""
import argparse
import asyncio
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gateway_proc  # noqa: E402

BFCL_VERSION = "2026.3.23"
SETS = ["simple_python", "multiple", "live_simple", "live_multiple"]
CACHE = os.path.expanduser("~/.cache/mcc/bfcl")
# Longest question: 4,739 bytes (a persona prompt); the gateway's default limit is 2,048.
MAX_QUERY_BYTES = 8192
MAX_RESULTS = 10

# JSON-schema (and BFCL's Python-flavoured) types → MCC param types.
TYPES = {
    "string": "str", "str": "str", "any": "str", "integer": "int", "int": "int",
    "number": "float", "float": "float", "boolean": "bool", "bool": "bool",
    "array": "list", "list": "list", "tuple": "list", "dict": "dict", "object": "dict",
}


def is_tune(qid):
    """The split rule (see the module doc)."""
    return int.from_bytes(hashlib.sha256(qid.encode()).digest(), "big") % 5 == 0


# ---------------------------------------------------------------- data and conversion

def wheel_path():
    name = f"bfcl_eval-{BFCL_VERSION}-py3-none-any.whl"
    path = os.path.join(CACHE, name)
    if not os.path.exists(path):
        os.makedirs(CACHE, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        f"bfcl-eval=={BFCL_VERSION}", "-d", CACHE], check=True)
    return path


def read_sets(wheel):
    """{set: (questions, answers)} from the wheel, each a list of JSON lines."""
    out = {}
    with zipfile.ZipFile(wheel) as z:
        for s in SETS:
            def lines(p):
                return [json.loads(line) for line in z.read(p).decode().splitlines() if line.strip()]
            out[s] = (lines(f"bfcl_eval/data/BFCL_v4_{s}.json"),
                      lines(f"bfcl_eval/data/possible_answer/BFCL_v4_{s}.json"))
    return out


def query_text(question):
    """The question as a search query: its user messages (a system prompt is the
    application's, not the user's request)."""
    turns = [m for turn in question["question"] for m in turn]
    return "\n".join(m["content"] for m in turns if m["role"] == "user").strip()


def tool_key_parts(name):
    """(groups, name) whose MCC key is `name` itself: `math.factorial` becomes group
    `math` and name `factorial` (an MCC name holds no dot). Falls back to `_` for dots
    when the segments would not survive as groups (repeated, or `public`/`admin`, which
    keys put first)."""
    parts = name.split(".")
    groups = parts[:-1]
    if len(set(groups)) == len(groups) and not {"public", "admin"} & set(groups) and all(parts):
        return groups, parts[-1]
    return [], name.replace(".", "_")


def key_of(groups, name):
    return ".".join(groups + [name])


def definition_id(fn):
    """Definitions equal in name, description and parameter names are one tool."""
    props = (fn.get("parameters") or {}).get("properties") or {}
    return (fn["name"], (fn.get("description") or "").strip(), tuple(sorted(props)))


def param_entry(pname, spec, required):
    spec = spec if isinstance(spec, dict) else {}
    desc = (spec.get("description") or "").strip()
    if spec.get("enum"):
        desc = (desc + " " if desc else "") + "One of: " + ", ".join(map(str, spec["enum"])) + "."
    entry = {"name": pname, "type": TYPES.get(str(spec.get("type", "string")).lower(), "str"),
             "required": pname in required}
    if desc:
        entry["description"] = desc
    return entry


def convert(sets):
    """(tools, questions): MCC tool entries (one per distinct definition) and the
    questions with their set, query, split and expected names."""
    tools, seen, used = [], {}, set()
    # Keys of every function name as given, so a variant's key never takes one.
    reserved = {key_of(*tool_key_parts(fn["name"])) for s in SETS for q in sets[s][0]
                for fn in q["function"]}
    questions = []
    for s in SETS:
        qs, answers = sets[s]
        truth = {a["id"]: a["ground_truth"] for a in answers}
        for q in qs:
            for fn in q["function"]:
                did = definition_id(fn)
                if did in seen:
                    continue
                groups, name = tool_key_parts(fn["name"])
                base, n = name, 1
                # Another definition under a name already used: `<name>__2`, … (never a
                # key some function's own name has).
                while key_of(groups, name) in used or (n > 1 and key_of(groups, name) in reserved):
                    n += 1
                    name = f"{base}__{n}"
                used.add(key_of(groups, name))
                params = fn.get("parameters") or {}
                required = set(params.get("required") or [])
                entry = {"name": name, "description": (fn.get("description") or "").strip(),
                         "params": [param_entry(p, spec, required)
                                    for p, spec in (params.get("properties") or {}).items()],
                         "exec": "exit 1"}
                if groups:
                    entry["groups"] = groups
                seen[did] = (key_of(groups, name), fn["name"])
                tools.append(entry)
            expected = {next(iter(call)) for call in truth[q["id"]]}
            questions.append({"id": q["id"], "set": s, "query": query_text(q),
                              "tune": is_tune(q["id"]), "expected": sorted(expected)})
    key_to_name = {key: name for key, name in seen.values()}
    return tools, questions, key_to_name


# ---------------------------------------------------------------- metrics

def rank_of(keys, expected, key_to_name):
    """1-based rank of the first result whose function name is expected, or None."""
    for i, key in enumerate(keys, 1):
        if key_to_name.get(key) in expected:
            return i
    return None


def metrics(ranks):
    n = len(ranks)
    if n == 0:
        return {"n": 0, "r1": 0.0, "r5": 0.0, "mrr": 0.0}
    return {"n": n,
            "r1": sum(1 for r in ranks if r == 1) / n,
            "r5": sum(1 for r in ranks if r and r <= 5) / n,
            "mrr": sum(1 / r for r in ranks if r and r <= 10) / n}


def table(questions, ranks):
    """{split: {set|overall: metrics}}."""
    out = {}
    for split, want in (("held-out", False), ("tune", True)):
        rows = {}
        for s in SETS + ["overall"]:
            rows[s] = metrics([ranks[q["id"]] for q in questions
                               if q["tune"] == want and (s == "overall" or q["set"] == s)])
        out[split] = rows
    return out


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


# ---------------------------------------------------------------- the gateway

KEY_LINE = re.compile(r"^## (\S+)", re.M)


def start_gateway(binary, work, tools_file, model):
    port = gateway_proc.free_port()
    users = os.path.join(work, "users.yaml")
    with open(users, "w") as f:
        f.write("users:\n  - username: bench\n    groups: [admin]\n")
    settings = os.path.join(work, "settings.yaml")
    search = f"  max_results: {MAX_RESULTS}\n  max_query_bytes: {MAX_QUERY_BYTES}\n"
    if model:
        search += f"  model_dir: {model}\n"
    with open(settings, "w") as f:
        f.write(f"server:\n  port: {port}\n  json_response: true\nauth: dev-admin\n"
                f"tools: [{tools_file}]\nusers_file: {users}\nsearch:\n{search}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCC_")}
    env["MCC_LOG"] = "warn"
    t0 = time.monotonic()
    proc = subprocess.Popen([binary, "serve", "--config", settings], env=env,
                            stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(work, "log"), "w"))
    import http.client
    ready_s = semantic_s = None
    deadline = t0 + 900
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the gateway exited; log: {work}/log")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/readyz")
            r = c.getresponse()
            body = json.loads(r.read() or b"{}")
            if r.status == 200:
                ready_s = ready_s or time.monotonic() - t0
                if not model or body.get("search", {}).get("semantic"):
                    semantic_s = time.monotonic() - t0 if model else None
                    break
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    else:
        proc.kill()
        sys.exit(f"the gateway did not become ready; log: {work}/log")
    peak_kb = None
    with open(f"/proc/{proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                peak_kb = int(line.split()[1])
    return proc, f"http://127.0.0.1:{port}/mcp", ready_s, semantic_s, peak_kb


async def run_queries(url, questions, in_flight):
    """{id: rank}, [latency ms]: every question through MCP `search`, `in_flight`
    clients each sending one request at a time."""
    from mcp.client.client import Client
    todo = list(questions)
    results, latencies = {}, []

    async def worker():
        async with Client(url, mode="legacy") as client:
            while todo:
                q = todo.pop()
                t = time.perf_counter()
                res = await client.call_tool("search", {"query": q["query"]})
                latencies.append((time.perf_counter() - t) * 1000)
                text = "".join(c.text for c in res.content if getattr(c, "type", "") == "text")
                if res.isError if hasattr(res, "isError") else getattr(res, "is_error", False):
                    raise SystemExit(f"search failed for {q['id']}: {text[:300]}")
                results[q["id"]] = KEY_LINE.findall(text)

    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return results, latencies


def run_mode(binary, work, tools_file, questions, key_to_name, model):
    proc, url, ready_s, semantic_s, peak_kb = start_gateway(binary, work, tools_file, model)
    try:
        keys, single = asyncio.run(run_queries(url, questions, 1))
        _, four = asyncio.run(run_queries(url, questions, 4))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    ranks = {q["id"]: rank_of(keys[q["id"]], set(q["expected"]), key_to_name) for q in questions}
    return {"quality": table(questions, ranks), "ranks": ranks,
            "latency_ms": {"single_p50": percentile(single, 50), "single_p99": percentile(single, 99),
                           "four_p50": percentile(four, 50), "four_p99": percentile(four, 99)},
            "ready_s": ready_s, "semantic_index_s": semantic_s,
            "peak_rss_mb_at_ready": peak_kb / 1024 if peak_kb else None}


def report(mode, r):
    print(f"\n### {mode}\n")
    for split in ("held-out", "tune"):
        rows = r["quality"][split]
        print(f"{split} (n={rows['overall']['n']}) | r@1 | r@5 | MRR@10\n---|---|---|---")
        for s in SETS + ["overall"]:
            m = rows[s]
            print(f"{s} ({m['n']}) | {m['r1']:.3f} | {m['r5']:.3f} | {m['mrr']:.3f}")
        print()
    lat = r["latency_ms"]
    print(f"latency ms: single-stream p50 {lat['single_p50']:.1f} p99 {lat['single_p99']:.1f}; "
          f"4 in flight p50 {lat['four_p50']:.1f} p99 {lat['four_p99']:.1f}")
    print(f"ready after {r['ready_s']:.1f} s"
          + (f", semantic index after {r['semantic_index_s']:.1f} s" if r["semantic_index_s"] else "")
          + (f", peak RSS {r['peak_rss_mb_at_ready']:.0f} MB" if r["peak_rss_mb_at_ready"] else ""))


# ---------------------------------------------------------------- self-test

def self_test():
    fn = {"name": "math.factorial", "description": "Factorial of n.",
          "parameters": {"type": "dict", "required": ["n"],
                         "properties": {"n": {"type": "integer", "description": "The number."},
                                        "mode": {"type": "string", "enum": ["a", "b"]}}}}
    dup = dict(fn, description="Another factorial.")
    sets = {s: ([], []) for s in SETS}
    sets["simple_python"] = (
        [{"id": "q1", "question": [[{"role": "system", "content": "Be nice."},
                                    {"role": "user", "content": "5!"}]], "function": [fn]},
         {"id": "q2", "question": [[{"role": "user", "content": "fact"}]], "function": [fn, dup]}],
        [{"id": "q1", "ground_truth": [{"math.factorial": {"n": [5]}}]},
         {"id": "q2", "ground_truth": [{"math.factorial": {"n": [5]}}]}])
    tools, questions, key_to_name = convert(sets)
    assert [t["name"] for t in tools] == ["factorial", "factorial__2"], tools
    assert tools[0]["groups"] == ["math"] and tools[0]["exec"] == "exit 1"
    assert tools[0]["params"] == [
        {"name": "n", "type": "int", "required": True, "description": "The number."},
        {"name": "mode", "type": "str", "required": False, "description": "One of: a, b."}]
    assert key_to_name == {"math.factorial": "math.factorial", "math.factorial__2": "math.factorial"}
    assert questions[0]["query"] == "5!" and questions[0]["expected"] == ["math.factorial"]
    assert tool_key_parts("a.a.b") == ([], "a_a_b") and tool_key_parts("x") == ([], "x")
    assert rank_of(["z", "math.factorial__2"], {"math.factorial"}, key_to_name) == 2
    m = metrics([1, 2, None, 11])
    assert (m["r1"], m["r5"], round(m["mrr"], 3)) == (0.25, 0.5, 0.375), m
    assert sum(is_tune(f"id{i}") for i in range(10000)) in range(1900, 2100)
    print("self-test ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gateway")
    ap.add_argument("--model", default=os.environ.get("MCC_TEST_MODEL_DIR")
                    or os.path.expanduser("~/.cache/mcc/models/all-MiniLM-L6-v2"))
    ap.add_argument("--modes", default="keyword,hybrid")
    ap.add_argument("--out")
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--export", metavar="DIR",
                    help="write the tool file and questions.json to DIR and stop (for "
                         "tests/relevance/bfcl.rs, the in-process tuning aid)")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    tools, questions, key_to_name = convert(read_sets(wheel_path()))
    if args.export:
        os.makedirs(args.export, exist_ok=True)
        with open(os.path.join(args.export, "bfcl-tools.yaml"), "w") as f:
            json.dump({"tools": tools}, f, indent=1)
        with open(os.path.join(args.export, "questions.json"), "w") as f:
            json.dump({"questions": questions, "key_to_name": key_to_name}, f)
        return print(f"wrote {args.export}/bfcl-tools.yaml and questions.json")
    binary = gateway_proc.binary(args.gateway)
    tune = sum(q["tune"] for q in questions)
    print(f"bfcl-eval {BFCL_VERSION}: {len(questions)} questions ({tune} tune, "
          f"{len(questions) - tune} held out), {len(tools)} tools")
    out = {"bfcl_eval": BFCL_VERSION, "tools": len(tools), "questions": len(questions),
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "load_average_before": os.getloadavg()}
    with tempfile.TemporaryDirectory(prefix="mcc-bfcl-") as work:
        tools_file = os.path.join(work, "bfcl-tools.yaml")
        with open(tools_file, "w") as f:  # JSON is YAML
            json.dump({"tools": tools}, f, indent=1)
        for mode in args.modes.split(","):
            model = args.model if mode == "hybrid" else None
            if model and not os.path.exists(os.path.join(model, "model.safetensors")):
                sys.exit(f"{model}: no model (scripts/fetch-model.sh)")
            r = run_mode(binary, work, tools_file, questions, key_to_name, model)
            report(mode, r)
            out[mode] = r
    out["load_average_after"] = os.getloadavg()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
