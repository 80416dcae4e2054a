#!/usr/bin/env python3
"""Writes a one-layer OCI image archive from files on this machine, without a registry,
a daemon or an image store, for `ctr -n k8s.io images import` (node-up.sh).

    oci_image.py OUT.tar REF [--add SRC:DEST]... [--link DEST:TARGET]...
                 [--entrypoint ARG]... [--cmd ARG]... [--user UID:GID]

The archive is reproducible (fixed timestamps, sorted entries), so importing it again
yields the same digest. Used for the node's pause image (Debian's static `catatonit -P`)
and a busybox image (Debian's `busybox-static`) for probes.
"""
import argparse
import hashlib
import io
import json
import tarfile


def layer_tar(adds, links):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs = set()
        for dest in [d for _, d in adds] + [d for d, _ in links]:
            parts = dest.strip("/").split("/")[:-1]
            for i in range(1, len(parts) + 1):
                dirs.add("/".join(parts[:i]))
        for d in sorted(dirs):
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
        for src, dest in sorted(adds, key=lambda a: a[1]):
            data = open(src, "rb").read()
            info = tarfile.TarInfo(dest.strip("/"))
            info.size, info.mode, info.mtime = len(data), 0o755, 0
            tar.addfile(info, io.BytesIO(data))
        for dest, target in sorted(links):
            info = tarfile.TarInfo(dest.strip("/"))
            info.type, info.linkname, info.mode, info.mtime = tarfile.SYMTYPE, target, 0o777, 0
            tar.addfile(info)
    return buf.getvalue()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("ref")
    p.add_argument("--add", action="append", default=[])
    p.add_argument("--link", action="append", default=[])
    p.add_argument("--entrypoint", action="append", default=[])
    p.add_argument("--cmd", action="append", default=[])
    p.add_argument("--user")
    a = p.parse_args()
    layer = layer_tar([x.split(":", 1) for x in a.add], [x.split(":", 1) for x in a.link])
    layer_digest = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    }
    if a.entrypoint:
        config["config"]["Entrypoint"] = a.entrypoint
    if a.cmd:
        config["config"]["Cmd"] = a.cmd
    if a.user:
        config["config"]["User"] = a.user
    config_b = json.dumps(config, sort_keys=True).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": "sha256:" + hashlib.sha256(config_b).hexdigest(), "size": len(config_b)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": layer_digest, "size": len(layer)}],
    }
    manifest_b = json.dumps(manifest, sort_keys=True).encode()
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "digest": "sha256:" + hashlib.sha256(manifest_b).hexdigest(),
                       "size": len(manifest_b),
                       "platform": {"architecture": "amd64", "os": "linux"},
                       "annotations": {"io.containerd.image.name": a.ref,
                                       "org.opencontainers.image.ref.name": a.ref}}],
    }
    with tarfile.open(a.out, "w", format=tarfile.PAX_FORMAT) as tar:
        def put(name, data):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
        put("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        put("index.json", json.dumps(index, sort_keys=True).encode())
        for blob in (layer, config_b, manifest_b):
            put("blobs/sha256/" + hashlib.sha256(blob).hexdigest(), blob)


if __name__ == "__main__":
    main()
