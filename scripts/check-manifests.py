#!/usr/bin/env python3
"""Starts every Redis data node the Kubernetes manifests describe, as the manifest writes its command, with Debian's
redis-server on 127.0.0.1, and checks what a pod would do: the server starts, the ACL users the manifest creates
log in with their passwords, the default user is refused, and the store's user reaches the store's keys and no
others. kubernetes-validate checks a manifest's shape; this checks that its redis-server accepts what it is told
(it reads an option's words as one config line: `--user "default off"` names a user "default off" and the server
exits).

Each `redis` container of deploy/kubernetes/**/*.yaml whose image is redis is run with its `command` and `args`
(Kubernetes' $(VAR) expansion for a plain args list; `sh -c` scripts through sh with the container's environment),
its Secret values replaced by test passwords, through a `redis-server` on PATH that appends a free port, the bind
address, and a temporary directory for the manifest's /data. Usage: scripts/check-manifests.py (exit 1 on a
failure, naming the manifest and what went wrong)."""

import glob
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
PASSWORDS = {"redis-password": "store-pass-3c9e", "redis-admin-password": "admin-pass-81d0"}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(port, *command, user=None, password=None):
    auth = ["--user", user, "--pass", password, "--no-auth-warning"] if user else []
    done = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), *auth, *command],
                          capture_output=True, text=True, timeout=5)
    return (done.stdout + done.stderr).strip()


def users(argv):
    """The ACL users the command line creates: {name: (password, rule words)}."""
    found, words = {}, None
    for word in argv + ["--end"]:
        if word.startswith("--"):
            if words:
                found[words[0]] = words[1:]
            words = [] if word == "--user" else None
        elif words is not None:
            words.append(word)
    return found


def check(path, container, env):
    port = free_port()
    work = tempfile.mkdtemp(prefix="prefetch-manifest-")
    wrapper_dir = os.path.join(work, "bin")
    os.makedirs(wrapper_dir)
    seen = os.path.join(work, "argv")
    real = shutil.which("redis-server")
    # Records the argv the manifest produced, then runs the real server on a free port with /data moved.
    with open(os.path.join(wrapper_dir, "redis-server"), "w") as f:
        f.write(f"""#!/usr/bin/env python3
import os, sys
argv = [a.replace("/data", {work!r} + "/data") for a in sys.argv[1:]]
open({seen!r}, "w").write("\\0".join(sys.argv[1:]))
os.makedirs({work!r} + "/data", exist_ok=True)
os.execv({real!r}, [{real!r}] + argv + ["--port", "{port}", "--bind", "127.0.0.1", "--daemonize", "no",
    "--logfile", {work!r} + "/server.log"])
""")
    os.chmod(os.path.join(wrapper_dir, "redis-server"), 0o755)
    command, args = container.get("command") or [], container.get("args") or []
    if command[:2] == ["sh", "-c"]:
        argv = ["sh", "-c", args[0]]
    else:
        argv = ["redis-server", *[re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), a) for a in command[1:] + args]]
    process = subprocess.Popen(argv, env={**os.environ, **env, "PATH": wrapper_dir + ":" + os.environ["PATH"]},
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work)
    where = f"{os.path.relpath(path, ROOT)} ({container['name']})"
    problems = []
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not os.path.exists(os.path.join(work, "server.log")):
            time.sleep(0.05)
        ready = False
        while time.monotonic() < deadline and process.poll() is None:
            if "Ready to accept connections" in open(os.path.join(work, "server.log")).read():
                ready = True
                break
            time.sleep(0.05)
        if not ready:
            log = open(os.path.join(work, "server.log")).read() if os.path.exists(os.path.join(work, "server.log")) else ""
            return [f"{where}: redis-server did not start: {log.strip().splitlines()[-1] if log.strip() else 'no log'}"]
        created = users(open(seen).read().split("\0"))
        if "default" not in created or "off" not in created["default"]:
            problems.append(f"{where}: the default user is not turned off")
        if not cli(port, "ping").startswith("NOAUTH"):
            problems.append(f"{where}: a client without credentials is let in")
        for name, rule in created.items():
            if name == "default":
                continue
            password = next((w[1:] for w in rule if w.startswith(">")), None)
            if password not in PASSWORDS.values():
                problems.append(f"{where}: user {name}'s password is not a Secret's value ({password!r})")
                continue
            answer = cli(port, "ping", user=name, password=password)
            if answer != "PONG":
                problems.append(f"{where}: user {name} cannot log in: {answer}")
        if "prefetch" in created:
            store = dict(user="prefetch", password=PASSWORDS["redis-password"])
            if cli(port, "ping", **store) != "PONG":
                problems.append(f"{where}: the store's user cannot log in")
            # The store's keys: any answer but a permission error (a cluster node without slots says CLUSTERDOWN).
            if cli(port, "get", "prefetch:v1:{00}:e:check", **store).startswith("NOPERM"):
                problems.append(f"{where}: the store's user may not read the store's keys")
            if not cli(port, "get", "other:key", **store).startswith("NOPERM"):
                problems.append(f"{where}: the store's user reaches keys outside prefetch:")
            if not cli(port, "config", "set", "maxmemory", "1", **store).startswith("NOPERM"):
                problems.append(f"{where}: the store's user may run admin commands")
        else:
            problems.append(f"{where}: no ACL user prefetch")
    finally:
        process.kill()
        process.wait()
        shutil.rmtree(work, ignore_errors=True)
    return problems


def main():
    if not shutil.which("redis-server"):
        print("check-manifests: redis-server is not installed (apt-get install redis-server)", file=sys.stderr)
        return 1
    problems, checked = [], 0
    for path in sorted(glob.glob(os.path.join(ROOT, "deploy/kubernetes/**/*.yaml"), recursive=True)):
        for document in yaml.safe_load_all(open(path)):
            spec = (document or {}).get("spec", {}).get("template", {}).get("spec", {})
            for container in spec.get("containers", []):
                if container.get("name") != "redis" or not str(container.get("image", "")).startswith("redis:"):
                    continue
                env = {e["name"]: PASSWORDS[e["valueFrom"]["secretKeyRef"]["key"]] for e in container.get("env", [])
                       if "secretKeyRef" in e.get("valueFrom", {})}
                problems += check(path, container, env)
                checked += 1
    for problem in problems:
        print(f"check-manifests: {problem}", file=sys.stderr)
    if checked == 0:
        print("check-manifests: no redis container found in deploy/kubernetes", file=sys.stderr)
        return 1
    if not problems:
        print(f"check-manifests: {checked} Redis data nodes of the manifests start, with their ACL users as written")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
