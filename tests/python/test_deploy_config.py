# SPDX-License-Identifier: MIT
"""The deployment files agree with each other and with the image (no container tools needed):
the port, the health check, the token's variables and secret path, the user and the sizing
flags in docker/Dockerfile, docker/entrypoint.sh, docker/compose.yaml and docker/k8s/; the
Kubernetes manifests match the Kubernetes API schemas (when ./setup.sh --containers installed
the validator); and the entry point serves the tree's sensimd with the token from the
environment or a file, refusing what it cannot serve safely with a message naming the variable.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import selectors
import shlex
import shutil
import signal
import subprocess
import time

import pytest
import yaml

from sensim import Client, errors

REPO = pathlib.Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
K8S = DOCKER / "k8s"
VALIDATOR = K8S / "validate"
ENTRYPOINT = DOCKER / "entrypoint.sh"


# ---------------------------------------------------------------------------- reading the files

def dockerfile_stages(text: str) -> dict[str, list[tuple[str, str]]]:
    """The instructions of each stage of a Dockerfile, by stage name: (KEYWORD, arguments),
    continuation lines joined, comments dropped."""
    stages: dict[str, list[tuple[str, str]]] = {}
    current = None
    logical = ""
    for line in text.splitlines():
        if not logical and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            logical += line[:-1] + " "
            continue
        logical += line
        keyword, _, args = logical.strip().partition(" ")
        logical = ""
        keyword = keyword.upper()
        if keyword == "FROM":
            m = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", args.strip(), re.IGNORECASE)
            assert m, f"FROM {args}"
            current = m.group(2) or f"stage{len(stages)}"
            stages[current] = [("FROM", m.group(1))]
        else:
            assert current, f"{keyword} before FROM"
            stages[current].append((keyword, args.strip()))
    return stages


def runtime_image() -> dict:
    """What the runtime stage declares: user, exposed ports, environment, health check and
    entry point."""
    stages = dockerfile_stages((DOCKER / "Dockerfile").read_text())
    last = list(stages)[-1]
    assert last == "runtime", "the runtime stage is the last one (the default target)"
    image: dict = {"env": {}, "expose": []}
    for keyword, args in stages[last]:
        if keyword == "USER":
            image["user"] = args
        elif keyword == "EXPOSE":
            image["expose"] += args.split()
        elif keyword == "ENV":
            for item in shlex.split(args):
                key, _, value = item.partition("=")
                image["env"][key] = value
        elif keyword == "HEALTHCHECK":
            options, _, cmd = args.partition("CMD ")
            image["healthcheck"] = json.loads(cmd)
            image["healthcheck_options"] = dict(o.lstrip("-").split("=", 1)
                                                for o in options.split())
        elif keyword == "ENTRYPOINT":
            image["entrypoint"] = json.loads(args)
        elif keyword == "COPY":
            image.setdefault("copies", []).append(args.split())
    return image


def installed_as(image: dict, source: str) -> str:
    """Where the runtime stage copies `source` (a path of the repository) to."""
    for parts in image.get("copies", []):
        if source in parts[:-1] and not parts[0].startswith("--from"):
            return parts[-1]
    raise AssertionError(f"the runtime stage does not copy {source}")


def entrypoint_defaults() -> dict:
    text = ENTRYPOINT.read_text()
    m = re.search(r'^listen="\$\{SENSIM_LISTEN:-([^}]+)\}"', text, re.MULTILINE)
    assert m, "entrypoint.sh: no default for SENSIM_LISTEN"
    return {"listen": m.group(1), "variables": set(re.findall(r"\bSENSIM_[A-Z_]+\b", text))}


def compose_file() -> dict:
    """compose.yaml with its variables at their defaults (${NAME:-default})."""
    text = (DOCKER / "compose.yaml").read_text()
    return yaml.safe_load(re.sub(r"\$\{[A-Z0-9_]+:-([^}]*)\}", r"\1", text))


def k8s_objects() -> dict[str, dict]:
    """The manifests kustomization.yaml lists, by kind."""
    kust = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    objects = {}
    for name in kust["resources"]:
        for doc in yaml.safe_load_all((K8S / name).read_text()):
            if doc:
                assert doc["kind"] not in objects, f"two {doc['kind']} manifests"
                objects[doc["kind"]] = doc
    return objects


def port_of(listen: str) -> int:
    return int(listen.rsplit(":", 1)[1])


def container_env(container: dict) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def sensimd_services(compose: dict) -> dict[str, dict]:
    return {name: s for name, s in compose["services"].items()
            if s.get("build", {}).get("target") == "runtime"}


def flag(args: list[str], name: str) -> str:
    assert name in args, f"{name} missing from {args}"
    return args[args.index(name) + 1]


def quantity_bytes(q: str) -> int:
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}
    for suffix, scale in units.items():
        if q.endswith(suffix):
            return int(q[: -len(suffix)]) * scale
    return int(q)


# ---------------------------------------------------------------------------- agreement

def test_the_port_agrees_everywhere():
    image = runtime_image()
    port = port_of(entrypoint_defaults()["listen"])
    assert port_of(image["env"]["SENSIM_LISTEN"]) == port
    assert image["expose"] == [str(port)]

    compose = compose_file()
    services = sensimd_services(compose)
    assert {"sensimd", "sensimd-0", "sensimd-1", "sensimd-2"} <= set(services)
    host_ports = []
    for name, s in services.items():
        assert port_of(s["environment"]["SENSIM_LISTEN"]) == port, name
        (published,) = s["ports"]
        host_ip, host_port, container_port = published.rsplit(":", 2)
        assert int(container_port) == port, name
        assert host_ip == "127.0.0.1", f"{name} is published beyond the host's loopback"
        host_ports.append(host_port)
    assert len(set(host_ports)) == len(host_ports), f"host ports collide: {host_ports}"
    demo = compose["services"]["demo"]["entrypoint"][-1]
    assert f"--host sensimd --port {port}" in demo

    k8s = k8s_objects()
    (container,) = k8s["StatefulSet"]["spec"]["template"]["spec"]["containers"]
    (cport,) = container["ports"]
    assert cport["containerPort"] == port
    assert port_of(container_env(container)["SENSIM_LISTEN"]) == port
    (sport,) = k8s["Service"]["spec"]["ports"]
    assert sport["port"] == port and sport["targetPort"] == cport["name"]
    (rule,) = k8s["NetworkPolicy"]["spec"]["ingress"]
    assert [p["port"] for p in rule["ports"]] == [cport["name"]]


def test_the_health_checks_are_the_images():
    image = runtime_image()
    check = image["healthcheck"]
    assert check[:1] == ["sensimd-entrypoint"] and check[1:] == ["health"]
    assert installed_as(image, "docker/entrypoint.sh").endswith("/" + check[0])
    # the probe's own timeout (entrypoint.sh) fits inside the runner's
    text = ENTRYPOINT.read_text()
    probe_ms = int(re.search(r"SENSIM_PROBE_TIMEOUT_MS:-(\d+)", text).group(1))
    assert probe_ms < 1000 * int(image["healthcheck_options"]["timeout"].rstrip("s"))

    k8s = k8s_objects()
    (container,) = k8s["StatefulSet"]["spec"]["template"]["spec"]["containers"]
    ready, live = container["readinessProbe"], container["livenessProbe"]
    assert ready["exec"]["command"] == check
    assert live["exec"]["command"] == check + ["--live"]
    for probe in (ready, live):
        assert probe_ms < 1000 * probe["timeoutSeconds"]

    # the compose services inherit the image's check rather than restating it
    for name, s in sensimd_services(compose_file()).items():
        assert "healthcheck" not in s, name


def test_the_token_comes_from_a_mounted_secret_everywhere():
    variables = entrypoint_defaults()["variables"]
    assert {"SENSIM_TOKEN", "SENSIM_TOKEN_FILE"} <= variables
    assert "SENSIM_TOKEN" not in runtime_image()["env"], "no token baked into the image"

    compose = compose_file()
    for name, s in sensimd_services(compose).items():
        env = s["environment"]
        assert "SENSIM_TOKEN" not in env, name
        assert set(env) <= variables, f"{name} sets variables the entry point never reads"
        (secret,) = s["secrets"]
        assert secret in compose["secrets"]
        # a file secret is mounted at /run/secrets/NAME (Compose specification)
        assert env["SENSIM_TOKEN_FILE"] == f"/run/secrets/{secret}", name
    demo = compose["services"]["demo"]
    (secret,) = demo["secrets"]
    assert f"/run/secrets/{secret}" in demo["entrypoint"][-1]

    k8s = k8s_objects()
    pod = k8s["StatefulSet"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = container_env(container)
    assert "SENSIM_TOKEN" not in env and set(env) <= variables
    token_file = pathlib.PurePosixPath(env["SENSIM_TOKEN_FILE"])
    (mount,) = [m for m in container["volumeMounts"]
                if token_file.is_relative_to(m["mountPath"])]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    (item,) = volume["secret"]["items"]
    assert token_file == pathlib.PurePosixPath(mount["mountPath"]) / item["path"]
    # the image's user reads it through the pod's group
    assert volume["secret"]["defaultMode"] & 0o040
    assert pod["securityContext"]["fsGroup"] == int(runtime_image()["user"].split(":")[1])


def test_the_user_and_the_sizing_agree():
    uid, gid = (int(x) for x in runtime_image()["user"].split(":"))
    assert uid != 0 and gid != 0
    k8s = k8s_objects()
    pod = k8s["StatefulSet"]["spec"]["template"]["spec"]
    ctx = pod["securityContext"]
    assert ctx["runAsNonRoot"] is True
    assert (ctx["runAsUser"], ctx["runAsGroup"]) == (uid, gid)
    (container,) = pod["containers"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False

    # sensimd sizes its defaults from the node, not from the container's limits: the worker
    # threads follow the CPU request, and its byte budgets fit in the memory limit
    args = container["args"]
    resources = container["resources"]
    assert int(flag(args, "--threads")) == int(resources["requests"]["cpu"])
    assert resources["limits"]["cpu"] == resources["requests"]["cpu"]
    budget = int(flag(args, "--max-scene-bytes")) + int(flag(args, "--max-held-bytes"))
    assert budget <= 0.9 * quantity_bytes(resources["limits"]["memory"])
    assert "--listen" not in args and "--token" not in args

    # the compose daemons run as hardened as the pods
    for name, s in sensimd_services(compose_file()).items():
        assert s.get("read_only") is True, name
        assert s.get("cap_drop") == ["ALL"], name
        assert "no-new-privileges:true" in s.get("security_opt", []), name


# ---------------------------------------------------------------------------- schema

def run_validator(directory: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run(["node", str(VALIDATOR / "validate.mjs"), str(directory)],
                          capture_output=True, text=True, timeout=120)


needs_validator = pytest.mark.skipif(
    not (VALIDATOR / "node_modules").is_dir() or shutil.which("node") is None,
    reason="the Kubernetes schema validator is not installed (./setup.sh --containers)")


@needs_validator
def test_the_manifests_match_the_kubernetes_schema():
    r = run_validator(K8S)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(k8s_objects())} manifests checked, 0 problems" in r.stdout


@needs_validator
@pytest.mark.parametrize("edit, expected", [
    # a misspelt field, a wrong type, a value outside an enumeration, required fields missing
    (("readinessProbe:", "readinesProbe:"), "containers[0].readinesProbe: unknown field"),
    (("containerPort: 7700", 'containerPort: "7700"'),
     "containers[0].ports[0].containerPort: type"),
    (("podManagementPolicy: Parallel", "podManagementPolicy: parallel"),
     "spec.podManagementPolicy: enum"),
    (("- name: sensimd\n          image:", "- image:"),
     'containers[0]: required {"missingProperty":"name"}'),
    (("  selector:\n    matchLabels:", "  selectr:\n    matchLabels:"),
     "spec: required"),
])
def test_the_schema_check_fails_on_a_broken_manifest(tmp_path, edit, expected):
    shutil.copytree(K8S, tmp_path / "k8s", ignore=shutil.ignore_patterns("validate"))
    target = tmp_path / "k8s" / "statefulset.yaml"
    old, new = edit
    text = target.read_text()
    assert old in text
    target.write_text(text.replace(old, new, 1))
    r = run_validator(tmp_path / "k8s")
    assert r.returncode == 1 and expected in r.stdout, r.stdout + r.stderr


# ---------------------------------------------------------------------------- the entry point

def entrypoint_env(**extra: str) -> dict[str, str]:
    """An environment whose PATH finds the tree's sensimd first (the image's is on PATH)."""
    sensimd = pathlib.Path(os.environ.get("SENSIMD") or REPO / "build" / "server" / "sensimd")
    env = {"PATH": f"{sensimd.parent}:/usr/bin:/bin", "SENSIM_LISTEN": "127.0.0.1:0"}
    env.update(extra)
    return env


class Served:
    """sensimd started through entrypoint.sh (the image's way); stopped with SIGTERM, after which
    it must exit with 0."""

    def __init__(self, env: dict[str, str], *args: str):
        self.proc = subprocess.Popen([str(ENTRYPOINT), *args], env=env,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        line = b""
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            deadline = time.monotonic() + 20.0
            while not line.endswith(b"\n"):
                left = deadline - time.monotonic()
                chunk = os.read(self.proc.stdout.fileno(), 1) if left > 0 and sel.select(left) \
                    else b""
                if not chunk:
                    self.proc.kill()
                    raise AssertionError(f"no listening line: {line!r} "
                                         f"{self.proc.communicate()[1].decode()}")
                line += chunk
        m = re.fullmatch(rb"sensimd listening on 127\.0\.0\.1:(\d+)\n", line)
        assert m, line
        self.port = int(m.group(1))

    def client(self, **kwargs) -> Client:
        return Client("127.0.0.1", self.port, timeout=10.0, **kwargs)

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc) -> None:
        self.proc.send_signal(signal.SIGTERM)
        _, err = self.proc.communicate(timeout=30)
        assert self.proc.returncode == 0, err.decode()


def refusal(env: dict[str, str], *args: str) -> str:
    r = subprocess.run([str(ENTRYPOINT), *args], env=env, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stdout == ""
    return r.stderr


@pytest.mark.parametrize("source", ["file", "file without line end", "variable"])
def test_the_entrypoint_serves_with_the_token(tmp_path, source):
    token = "s3cret-token"
    if source == "variable":
        env = entrypoint_env(SENSIM_TOKEN=token)
    else:
        path = tmp_path / "token"
        path.write_text(token + ("\n" if source == "file" else ""))
        env = entrypoint_env(SENSIM_TOKEN_FILE=str(path))
    with Served(env) as d:
        with d.client(token=token) as c:
            c.ping()
        for wrong in (None, "s3cret", token + "x"):
            with pytest.raises(errors.Unauthenticated):
                d.client(token=wrong).close()


def test_the_entrypoint_runs_without_a_token_only_when_told(tmp_path):
    message = refusal(entrypoint_env())
    assert "no token" in message and "SENSIM_TOKEN_FILE" in message
    with Served(entrypoint_env(SENSIM_ALLOW_NO_TOKEN="1")) as d:
        with d.client() as c:
            c.ping()


def test_the_entrypoint_refuses_what_it_cannot_serve(tmp_path):
    token = tmp_path / "token"
    token.write_text("abc\n")
    both = refusal(entrypoint_env(SENSIM_TOKEN="abc", SENSIM_TOKEN_FILE=str(token)))
    assert "SENSIM_TOKEN or SENSIM_TOKEN_FILE, not both" in both
    missing = refusal(entrypoint_env(SENSIM_TOKEN_FILE=str(tmp_path / "absent")))
    assert f"SENSIM_TOKEN_FILE={tmp_path / 'absent'} cannot be read" in missing
    empty = tmp_path / "empty"
    empty.write_text("\n")
    assert "is empty" in refusal(entrypoint_env(SENSIM_TOKEN_FILE=str(empty)))
    two_lines = tmp_path / "two"
    two_lines.write_text("abc\ndef\n")
    assert "a line break" in refusal(entrypoint_env(SENSIM_TOKEN_FILE=str(two_lines)))
    assert "longer than 127" in refusal(entrypoint_env(SENSIM_TOKEN="x" * 128))
    assert "control character" in refusal(entrypoint_env(SENSIM_TOKEN="a\tb"))
    for arg in ("--listen", "--token=abc"):
        message = refusal(entrypoint_env(SENSIM_TOKEN="abc"), arg, "0.0.0.0:1")
        assert f"{arg}: set SENSIM_LISTEN / SENSIM_TOKEN / SENSIM_TOKEN_FILE" in message
    assert "must be ADDR:PORT" in refusal(entrypoint_env(SENSIM_TOKEN="abc",
                                                         SENSIM_LISTEN="7700"))


def test_the_entrypoint_passes_options_to_sensimd():
    env = entrypoint_env(SENSIM_TOKEN="abc")
    with Served(env, "--threads", "1") as d, d.client(token="abc") as c:
        assert c.get_info().threads == 1
    r = subprocess.run([str(ENTRYPOINT), "--threads", "0"], env=env, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2 and "--threads '0'" in r.stderr, r.stderr
