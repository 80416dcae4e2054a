#!/usr/bin/env python3
"""Image sizes, binary sizes before/after strip, and the cold start of the chart's gateway
pod to ready. Run through e2e/image-report.sh (it builds the release binaries and the
images first); prints a Markdown report.

Cold start is measured at four levels, each from the moment the command starts to the
first `/readyz` 200 (polled every 10 ms), `--rounds` times each:

- process: the stripped release `mcc-gateway serve` on the host, with the pod's gateway
  environment (same tool and users files, API-key auth, the same Redis) but the
  in-process runtime (no executor to wait for): the floor;
- process, unstripped: the same binary before strip (what strip changes at start);
- container: `podman run` of the gateway image alone, read-only as uid 65532, the same
  files mounted at the chart's paths, the in-process runtime;
- pod: `podman kube play` of the chart's gateway Deployment (gateway + executor
  containers, ConfigMap volumes, the executor runtime), rendered and adapted exactly as
  e2e/pod_e2e.py does; the chart's Redis is played once before and stays up. With and
  without the search model baked into the image (the chart's default is `baked`).

Each pod round is removed with its ConfigMap volumes before the next, so every round
creates the pod, its volumes and its containers anew; images and their layers stay in
local storage and the page cache (no pull: a node pulling the image adds that).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pod_e2e as pe  # noqa: E402 - render, adapt and podman of the pod e2e

import yaml  # noqa: E402

POLL = 0.01
REPORT_CTR = "mcc-image-report-gateway"


def get(url, timeout=1.0):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return None, b""


def wait(base, t0, timeout, semantic=False, alive=lambda: True):
    """Seconds from t0 to /readyz 200 (and, with `semantic`, to search.semantic true)."""
    ready = None
    deadline = t0 + timeout
    while time.monotonic() < deadline and alive():
        status, body = get(f"{base}/readyz")
        now = time.monotonic()
        if status == 200:
            if ready is None:
                ready = now - t0
                if not semantic:
                    return ready, None
            if json.loads(body).get("search", {}).get("semantic"):
                return ready, now - t0
        time.sleep(POLL)
    if ready is None:
        raise RuntimeError(f"{base}/readyz not 200 within {timeout} s (or the gateway exited): "
                           f"{get(base + '/readyz')}")
    return ready, None


def mib(n):
    return f"{n / 1048576:.1f} MiB"


def mb(n):
    return f"{n / 1e6:.1f} MB"


def summary(values):
    return (f"{statistics.median(values):.3f}", f"{min(values):.3f}", f"{max(values):.3f}",
            " ".join(f"{v:.2f}" for v in values))


# ---------------------------------------------------------------- sizes


def image_size(ref):
    out = pe.podman("image", "inspect", "--format", "{{.Size}}", ref, check_rc=False)
    return int(out.stdout.strip()) if out.returncode == 0 else None


def sizes(opts):
    lines = ["## Binaries", "",
             "| binary | profile | unstripped | stripped (in the image) | stripped / unstripped |",
             "| --- | --- | ---: | ---: | ---: |"]
    triple = f"{os.uname().machine}-unknown-linux-gnu"
    binaries = [
        ("mcc-gateway", "release", f"{opts.target_dir}/release/mcc-gateway", f"{opts.cache}/stage/gateway/bin/mcc-gateway"),
        ("mcc-executor", f"release, static ({triple})", f"{opts.target_dir}/{triple}/release/mcc-executor",
         f"{opts.cache}/stage/executor/bin/mcc-executor"),
        ("mcc-operator", "release", f"{opts.target_dir}/release/mcc-operator", f"{opts.cache}/stage/operator/bin/mcc-operator"),
    ]
    debug_gateway = f"{opts.target_dir}/debug/mcc-gateway"
    for name, profile, raw, stripped in binaries:
        if os.path.exists(raw) and os.path.exists(stripped):
            a, b = os.path.getsize(raw), os.path.getsize(stripped)
            lines.append(f"| `{name}` | {profile} | {mib(a)} | {mib(b)} | {b / a:.2f} |")
    if os.path.exists(debug_gateway):
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(["strip", "-o", f"{tmp}/mcc-gateway", debug_gateway], check=True)
            a, b = os.path.getsize(debug_gateway), os.path.getsize(f"{tmp}/mcc-gateway")
        lines.append(f"| `mcc-gateway` | debug (e2e/pod.sh's `dev` images) | {mib(a)} | {mib(b)} | {b / a:.2f} |")
    lines += ["", "## Images", "",
              "Uncompressed: `podman image inspect --format '{{.Size}}'` (all layers, the base included). "
              "Compressed: the gzip layers and config of `podman push --compress` into an OCI layout, "
              "what a registry stores and a node pulls (the base's layer once per node).", "",
              "| image | uncompressed | compressed | of which the base (uncompressed / compressed) |",
              "| --- | ---: | ---: | ---: |"]
    layout = tempfile.mkdtemp(prefix="mcc-image-report-oci-")
    try:
        base, base_gz = image_size(opts.base_image), pushed_size(opts.base_image, layout, "base")
        lines.append(f"| `{opts.base_image}` (the local bookworm minbase) | {mb(base)} | {mb(base_gz)} | |")
        for name in ("gateway", "gateway-model", "executor", "operator", "redis"):
            repo, _, suffix = name.partition("-")
            ref = f"localhost/mcc-{repo}:{opts.tag}{'-' + suffix if suffix else ''}"
            size = image_size(ref)
            if size is not None:
                gz = pushed_size(ref, layout, name)
                lines.append(f"| `{ref}` | {mb(size)} | {mb(gz)} | {mb(base)} / {mb(base_gz)} |")
    finally:
        shutil.rmtree(layout, ignore_errors=True)
    return lines


def pushed_size(ref, layout, name):
    """Bytes of the image's gzip layers and config, pushed into the OCI layout `layout`."""
    pe.podman("push", "--quiet", "--compress", "--compression-format", "gzip", ref, f"oci:{layout}:{name}")
    with open(os.path.join(layout, "index.json")) as f:
        index = json.load(f)
    desc = next(m for m in index["manifests"]
                if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == name)
    with open(os.path.join(layout, "blobs", *desc["digest"].split(":"))) as f:
        manifest = json.load(f)
    return manifest["config"]["size"] + sum(layer["size"] for layer in manifest["layers"])


# ---------------------------------------------------------------- the rendered pod


class Rendered:
    """The chart rendered for podman (as e2e/pod_e2e.py does), split into Redis and the
    gateway Deployment, and the gateway container's files and environment."""

    def __init__(self, opts, work, model, ports=None):
        self.gateway_port, self.redis_port = ports or (pe.free_port(), pe.free_port())
        # An explicit tag gets no `-model` suffix from the chart: give the baked one.
        gateway_tag = f"{opts.tag}-model" if model == "baked" else opts.tag
        extra = ["--set", f"gateway.image.tag={gateway_tag}", "--set", f"gateway.executor.image.tag={opts.tag}",
                 "--set", f"redis.image.tag={opts.tag}", "--set", f"gateway.search.model={model}"]
        docs = pe.adapt(pe.render(opts.helm, opts.values, self.gateway_port, extra), self.redis_port, work)
        self.configmaps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
        deps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
        self.gateway, self.redis = deps[pe.GATEWAY_DEPLOYMENT], deps[pe.REDIS_DEPLOYMENT]
        self.base = f"http://127.0.0.1:{self.gateway_port}"
        self.gateway_yaml = self.write(work, f"gateway-{model}.yaml", self.gateway)
        self.redis_yaml = self.write(work, "redis.yaml", self.redis)

    def write(self, work, name, deployment):
        path = os.path.join(work, name)
        with open(path, "w") as f:
            yaml.safe_dump_all([*self.configmaps.values(), deployment], f, sort_keys=False)
        return path

    def volume_names(self, deployment):
        spec = deployment["spec"]["template"]["spec"]
        return {v["configMap"]["name"] for v in spec.get("volumes") or [] if "configMap" in v}

    def gateway_only_volumes(self):
        return sorted(self.volume_names(self.gateway) - self.volume_names(self.redis))

    def container(self):
        spec = self.gateway["spec"]["template"]["spec"]
        ctr = next(c for c in spec["containers"] if c["name"] == "gateway")
        return spec, ctr

    def files(self, root):
        """The gateway container's ConfigMap volumes written under `root`:
        [(host dir, mount path)]."""
        spec, ctr = self.container()
        volumes = {v["name"]: v for v in spec.get("volumes") or []}
        out = []
        for m in ctr.get("volumeMounts") or []:
            src = volumes[m["name"]].get("configMap")
            if not src:
                continue
            data = self.configmaps[src["name"]]["data"]
            items = src.get("items") or [{"key": k, "path": k} for k in data]
            host = os.path.join(root, m["name"])
            for item in items:
                path = os.path.join(host, item["path"])
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(data[item["key"]])
            os.chmod(host, 0o755)
            out.append((host, m["mountPath"]))
        return out

    def env(self):
        """The gateway container's environment, with the in-process runtime instead of
        the executor (the process and container levels run no executor)."""
        _, ctr = self.container()
        env = {e["name"]: str(e["value"]) for e in ctr.get("env") or [] if "value" in e}
        env["MCC_EXECUTION__RUNTIME"] = "in-process"
        env.pop("MCC_EXECUTION__EXECUTOR_SOCKET", None)
        return env


# ---------------------------------------------------------------- the levels


def process_rounds(binary, rendered, work, rounds, timeout, model_dir=None):
    root = tempfile.mkdtemp(dir=work, prefix="proc-")
    files = rendered.files(root)
    env = {"PATH": os.environ["PATH"], "HOME": root}
    for k, v in rendered.env().items():
        for host, mount in files:
            if v == mount or v.startswith(mount + "/"):
                v = host + v[len(mount):]
        env[k] = v
    env["TMPDIR"] = root
    env.pop("MCC_SEARCH__MODEL_DIR", None)
    env["MCC_MODEL_CACHE"] = os.path.join(root, "no-models")
    if model_dir:
        env["MCC_SEARCH__MODEL_DIR"] = model_dir
    results = []
    log = os.path.join(root, "gateway.log")
    for _ in range(rounds):
        with open(log, "w") as out:
            t0 = time.monotonic()
            proc = subprocess.Popen([binary, "serve"], env=env, cwd=root, stdout=out, stderr=out)
        try:
            results.append(wait(rendered.base, t0, timeout, bool(model_dir), lambda: proc.poll() is None))
        except RuntimeError as e:
            with open(log) as f:
                raise RuntimeError(f"{e}; the gateway's log:\n{f.read()[-3000:]}") from None
        finally:
            proc.terminate()
            proc.wait(10)
    return results


def container_rounds(image, rendered, work, rounds, timeout):
    root = tempfile.mkdtemp(dir=work, prefix="ctr-")
    os.chmod(root, 0o755)
    args = ["run", "-d", "--rm", "--name", REPORT_CTR, "--network", "host", "--read-only",
            "--user", "65532:65532", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
            "--tmpfs", "/tmp"]
    for host, mount in rendered.files(root):
        args += ["-v", f"{host}:{mount}:ro"]
    for k, v in rendered.env().items():
        args += ["--env", f"{k}={v}"]
    results = []
    for _ in range(rounds):
        pe.podman("rm", "--force", "--time", "0", REPORT_CTR, check_rc=False)
        t0 = time.monotonic()
        pe.podman(*args, image, "serve")
        try:
            results.append(wait(rendered.base, t0, timeout))
        finally:
            pe.podman("rm", "--force", "--time", "0", REPORT_CTR, check_rc=False)
    return results


def started_at(ctr):
    out = pe.podman("inspect", "--format", "{{.State.StartedAt.UnixNano}}", ctr, check_rc=False)
    return int(out.stdout.strip()) / 1e9 if out.returncode == 0 else None


def pod_down(rendered):
    pe.podman("kube", "down", rendered.gateway_yaml, check_rc=False)
    volumes = rendered.gateway_only_volumes()
    if volumes:
        pe.podman("volume", "rm", "--force", *volumes, check_rc=False)


def pod_rounds(rendered, rounds, timeout, semantic):
    """[(ready, semantic, play returned, gateway container started, executor started)],
    seconds from the start of `podman kube play`."""
    results = []
    pod_down(rendered)
    for _ in range(rounds):
        wall0, t0 = time.time(), time.monotonic()
        play = {}

        def run_play():
            play["out"] = pe.podman("kube", "play", "--network", "host", rendered.gateway_yaml, check_rc=False)
            play["t"] = time.monotonic() - t0

        thread = threading.Thread(target=run_play)
        thread.start()
        try:
            ready, sem = wait(rendered.base, t0, timeout, semantic,
                              lambda: "out" not in play or play["out"].returncode == 0)
        except RuntimeError as e:
            thread.join()
            if play["out"].returncode != 0:
                raise RuntimeError(f"podman kube play failed: {play['out'].stderr.strip()}") from None
            logs = pe.podman("logs", "--tail", "30", pe.GATEWAY_CTR, check_rc=False)
            raise RuntimeError(f"{e}; the gateway container's log:\n{logs.stdout}{logs.stderr}") from None
        finally:
            thread.join()
        gw, ex = started_at(pe.GATEWAY_CTR), started_at(pe.EXECUTOR_CTR)
        results.append((ready, sem, play["t"], gw and gw - wall0, ex and ex - wall0))
        pod_down(rendered)
    return results


# ---------------------------------------------------------------- main


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--helm", default=os.environ.get("HELM", "helm"))
    parser.add_argument("--values", default=os.path.join(pe.REPO, "e2e/pod-values.yaml"))
    parser.add_argument("--tag", default="release")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--semantic-timeout", type=float, default=180)
    parser.add_argument("--target-dir", default=os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/mcc-target")))
    parser.add_argument("--cache", default=os.environ.get("MCC_IMAGES_CACHE", os.path.expanduser("~/.cache/mcc-images")))
    parser.add_argument("--base-image", default="docker.io/library/debian:bookworm-slim")
    parser.add_argument("--model-dir", default=os.path.expanduser("~/.cache/mcc/models/all-MiniLM-L6-v2"))
    opts = parser.parse_args()

    out = ["# MCC image report", "",
           f"uptime at the start: `{subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}`", ""]
    out += sizes(opts)

    work = tempfile.mkdtemp(prefix="mcc-image-report-")
    os.chmod(work, 0o755)
    plain = Rendered(opts, work, "none")
    # The same ports: one Redis (played once) serves every level.
    baked = Rendered(opts, work, "baked", (plain.gateway_port, plain.redis_port))

    stripped = f"{opts.cache}/stage/gateway/bin/mcc-gateway"
    unstripped = f"{opts.target_dir}/release/mcc-gateway"
    rows = []
    pe.podman("kube", "down", plain.redis_yaml, check_rc=False)
    try:
        pe.podman("kube", "play", "--network", "host", plain.redis_yaml)
        pod_down(plain)
        r = process_rounds(stripped, plain, work, opts.rounds, opts.timeout)
        rows.append(("process, stripped (the floor)", [x[0] for x in r]))
        r = process_rounds(unstripped, plain, work, opts.rounds, opts.timeout)
        rows.append(("process, unstripped", [x[0] for x in r]))
        model_rows = []
        if os.path.isdir(opts.model_dir):
            r = process_rounds(stripped, plain, work, opts.rounds, opts.semantic_timeout, opts.model_dir)
            rows.append(("process, stripped, with the model", [x[0] for x in r]))
            model_rows.append(("process, stripped, with the model", [x[1] for x in r]))
        r = container_rounds(f"localhost/mcc-gateway:{opts.tag}", plain, work, opts.rounds, opts.timeout)
        rows.append(("container: `podman run` of the gateway image", [x[0] for x in r]))
        pods = pod_rounds(plain, opts.rounds, opts.timeout, semantic=False)
        rows.append(("pod: `podman kube play`, gateway + executor, no model", [x[0] for x in pods]))
        pods_baked = []
        if image_size(f"localhost/mcc-gateway:{opts.tag}-model") is not None:
            pods_baked = pod_rounds(baked, opts.rounds, opts.semantic_timeout, semantic=True)
            rows.append(("pod: `podman kube play`, model baked (the chart's default)", [x[0] for x in pods_baked]))
            model_rows.append(("pod, model baked", [x[1] for x in pods_baked]))
    finally:
        pe.podman("rm", "--force", "--time", "0", REPORT_CTR, check_rc=False)
        pod_down(plain)
        pod_down(baked)
        pe.podman("kube", "down", plain.redis_yaml, check_rc=False)
        pe.podman("volume", "rm", "--force", *plain.configmaps, check_rc=False)
        shutil.rmtree(work, ignore_errors=True)

    out += ["", "## Cold start to `/readyz` 200", "",
            f"Seconds from the start of the command to the first `/readyz` 200 (polled every "
            f"{POLL * 1000:.0f} ms), {opts.rounds} rounds each.", "",
            "| level | median | min | max | rounds |", "| --- | ---: | ---: | ---: | --- |"]
    out += [f"| {label} | " + " | ".join(summary(v)) + " |" for label, v in rows]
    for label, pods_ in (("no model", pods), ("model baked", pods_baked)):
        if not pods_:
            continue
        out += ["", f"Pod rounds, {label}: where the time goes (seconds from the start of `podman kube play`; "
                "container starts are podman's `State.StartedAt`).", "",
                "| round | executor container started | gateway container started | `kube play` returned | `/readyz` 200 |",
                "| ---: | ---: | ---: | ---: | ---: |"]
        for i, (ready, _sem, played, gw, ex) in enumerate(pods_, 1):
            fmt = lambda x: "?" if x is None else f"{x:.3f}"  # noqa: E731
            out.append(f"| {i} | {fmt(ex)} | {fmt(gw)} | {fmt(played)} | {fmt(ready)} |")
    if model_rows:
        out += ["", "Until `search.semantic` is true (tool embeddings computed; `/readyz` does not wait for it):", "",
                "| level | median | min | max | rounds |", "| --- | ---: | ---: | ---: | --- |"]
        for label, v in model_rows:
            v = [x for x in v if x is not None]
            if v:
                out.append(f"| {label} | " + " | ".join(summary(v)) + " |")
    out += ["", f"uptime at the end: `{subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}`"]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
