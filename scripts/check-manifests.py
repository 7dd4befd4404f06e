#!/usr/bin/env python3
"""Starts every Redis data node the Kubernetes manifests describe, as the manifest writes its command, with Debian's
redis-server on 127.0.0.1, and checks what a pod would do: the server starts, each ACL user the manifest creates logs
in with its own Secret's password, the default user is refused, and the store's user reaches the store's keys and
nothing of the admin commands. A node started by a shell script must also refuse the Secret's placeholder password.
kubernetes-validate checks a manifest's shape; this checks that its redis-server accepts what it is told (it reads an
option's words as one config line: `--user "default off"` names a user "default off", and the server exits).

Each `redis` container of deploy/kubernetes/**/*.yaml whose image is redis is run with its `command` and `args`
(a shell script through sh with the container's environment; otherwise Kubernetes' $(VAR) expansion, and the args
alone go to redis-server as the image's entrypoint does), its Secret values replaced by test passwords, through a
`redis-server` on PATH that appends a free port, the bind address and a log file, and moves the manifest's /data
to a temporary directory. Usage: scripts/check-manifests.py (exit 1 on a failure, naming the manifest and what went
wrong)."""

import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import yaml

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
PASSWORDS = {"redis-password": "store-pass-3c9e-7a41-b2d8", "redis-admin-password": "admin-pass-81d0-5f2c-9e63"}
# Whose password each ACL user must have.
USERS = {"prefetch": "redis-password", "cluster-admin": "redis-admin-password"}
SHELLS = ("sh", "/bin/sh", "bash", "/bin/bash")


def bindable(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_port():
    """A free port whose cluster bus port (port + 10000) is free too: redis-server refuses a port above 55535 with
    cluster mode on."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port <= 55535 and bindable(port + 10000):
            return port


def cli(port, *command, user=None, password=None):
    env = {**os.environ, "REDISCLI_AUTH": password} if user else os.environ
    auth = ["--user", user] if user else []
    done = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(port), *auth, *command],
                          capture_output=True, text=True, timeout=5, env=env)
    return (done.stdout + done.stderr).strip()


def users(argv):
    """The ACL users the command line creates: {name: rule words}."""
    found, words = {}, None
    for word in argv + ["--end"]:
        if word.startswith("--"):
            if words:
                found[words[0]] = words[1:]
            words = [] if word == "--user" else None
        elif words is not None:
            words.append(word)
    return found


def command_line(container, env):
    """The argv a pod would run, and whether it is a shell script."""
    command, args = container.get("command") or [], container.get("args") or []
    if command and command[0] in SHELLS and "-c" in command:
        script = (command + args)[command.index("-c") + 1]
        return ["sh", "-c", script], True
    expand = lambda a: re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), a)
    if not command:
        # The image's entrypoint runs redis-server with the args.
        return ["redis-server", *map(expand, args)], False
    return [*map(expand, command), *map(expand, args)], False


def run(container, env, work):
    """Starts the container's command with the wrapper on PATH; (process, port, seen-argv path)."""
    port = free_port()
    wrapper_dir = os.path.join(work, "bin")
    os.makedirs(wrapper_dir, exist_ok=True)
    seen = os.path.join(work, "argv")
    real = shutil.which("redis-server")
    data = os.path.join(work, "data")
    with open(os.path.join(wrapper_dir, "redis-server"), "w") as f:
        f.write(f"""#!/usr/bin/env python3
import os, sys
moved = lambda a: {data!r} + a[len("/data"):] if a == "/data" or a.startswith("/data/") else a
open({seen!r}, "w").write("\\0".join(sys.argv[1:]))
os.makedirs({data!r}, exist_ok=True)
os.execv({real!r}, [{real!r}] + [moved(a) for a in sys.argv[1:]] + ["--port", "{port}", "--bind", "127.0.0.1",
    "--daemonize", "no", "--logfile", {work!r} + "/server.log"])
""")
    os.chmod(os.path.join(wrapper_dir, "redis-server"), 0o755)
    argv, _ = command_line(container, env)
    stderr = open(os.path.join(work, "stderr"), "w")
    process = subprocess.Popen(argv, env={**os.environ, **env, "PATH": wrapper_dir + ":" + os.environ["PATH"]},
                               stdout=subprocess.DEVNULL, stderr=stderr, cwd=work, start_new_session=True)
    return process, port, seen


def stop(process):
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def last_words(work):
    for name in ("server.log", "stderr"):
        path = os.path.join(work, name)
        if os.path.exists(path) and open(path).read().strip():
            return open(path).read().strip().splitlines()[-1]
    return "no output"


def check(path, container, env):
    where = f"{os.path.relpath(path, ROOT)} ({container['name']})"
    problems = []
    work = tempfile.mkdtemp(prefix="prefetch-manifest-")
    process, port, seen = run(container, env, work)
    try:
        log = os.path.join(work, "server.log")
        deadline = time.monotonic() + 15
        ready = False
        while time.monotonic() < deadline and process.poll() is None:
            if os.path.exists(log) and "Ready to accept connections" in open(log).read():
                ready = True
                break
            time.sleep(0.05)
        if not ready:
            return [f"{where}: redis-server did not start: {last_words(work)}"]
        created = users(open(seen).read().split("\0"))
        if "default" not in created or "off" not in created["default"]:
            problems.append(f"{where}: the default user is not turned off")
        if not cli(port, "ping").startswith("NOAUTH"):
            problems.append(f"{where}: a client without credentials is let in")
        for name, rule in created.items():
            if name == "default":
                continue
            if name not in USERS:
                problems.append(f"{where}: user {name} is none of the users the Secret has a password for ({', '.join(USERS)})")
                continue
            if "nopass" in rule or sum(w.startswith(">") for w in rule) != 1:
                problems.append(f"{where}: user {name} must have exactly one password and no nopass")
            answer = cli(port, "ping", user=name, password=PASSWORDS[USERS[name]])
            if answer != "PONG":
                problems.append(f"{where}: user {name} cannot log in with the Secret's {USERS[name]}: {answer}")
        if "prefetch" in created:
            store = dict(user="prefetch", password=PASSWORDS["redis-password"])
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
        stop(process)
        shutil.rmtree(work, ignore_errors=True)
    if command_line(container, env)[1]:
        problems += refuses_placeholder(where, container, env)
    return problems


def refuses_placeholder(where, container, env):
    """A node started by a script must not start with the Secret template's REPLACE_ME."""
    work = tempfile.mkdtemp(prefix="prefetch-manifest-")
    placeholder = {name: "REPLACE_ME" for name in env}
    process, _, _ = run(container, placeholder, work)
    try:
        process.wait(timeout=10)
        if os.path.exists(os.path.join(work, "argv")):
            return [f"{where}: started redis-server with the Secret's placeholder passwords"]
        if process.returncode == 0:
            return [f"{where}: exited 0 on the Secret's placeholder passwords"]
        return []
    except subprocess.TimeoutExpired:
        if os.path.exists(os.path.join(work, "argv")):
            return [f"{where}: started redis-server with the Secret's placeholder passwords"]
        return [f"{where}: still running 10 s after being given the Secret's placeholder passwords"]
    finally:
        stop(process)
        shutil.rmtree(work, ignore_errors=True)


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
