"""deploy/jetson/: the scripts pass shellcheck and dry-run without a GPU; the unit,
container recipe and example config hold together.

Nothing here needs a Jetson, TensorRT or trtexec: the dry runs print the commands
they would run and the tests check those commands.
"""

from __future__ import annotations

import configparser
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from inspector.export import tensorrt as trtx
from tests.unit.test_tensorrt import tiny_onnx

REPO = Path(__file__).resolve().parents[2]
JETSON = REPO / "deploy" / "jetson"
SCRIPTS = ("build_engine.sh", "install.sh", "gpu_check.sh")


@pytest.fixture(scope="module")
def onnx_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # One stand-in policy for the unit and the deploy tests.
    return tiny_onnx(tmp_path_factory.mktemp("model") / "panel.onnx")


def _env() -> dict[str, str]:
    # A PATH without trtexec (and no TRTEXEC override): dry runs must not need it.
    env = {k: v for k, v in os.environ.items() if k not in {"TRTEXEC", "PYTHON"}}
    env["PATH"] = "/usr/bin:/bin"
    env["PYTHONPATH"] = str(REPO)
    return env


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(JETSON / script), *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=_env(),
        timeout=120,
    )


def _commands(stdout: str) -> list[list[str]]:
    return [shlex.split(line) for line in stdout.splitlines() if line.strip()]


def _build(*args: str) -> subprocess.CompletedProcess[str]:
    return _run("build_engine.sh", "--python", sys.executable, *args, "--dry-run")


# ----------------------------------------------------------------- shell scripts


@pytest.mark.parametrize("script", (*SCRIPTS, "common.sh"))
def test_scripts_pass_shellcheck(script: str) -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck not installed (make test installs it: apt-get install shellcheck)")
    out = subprocess.run(
        ["shellcheck", "--shell=bash", "--severity=style", str(JETSON / script)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_are_strict_and_executable(script: str) -> None:
    path = JETSON / script
    text = path.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "\nset -euo pipefail\n" in text
    assert "--dry-run" in text
    assert os.access(path, os.X_OK), f"{script} is not executable (chmod +x)"


def test_build_engine_dry_run_fp16(onnx_file: Path, tmp_path: Path) -> None:
    out_engine = tmp_path / "models" / "panel.fp16.engine"
    res = _build("--onnx", str(onnx_file), "--out", str(out_engine), "--max-batch", "4")
    assert res.returncode == 0, res.stderr
    cmds = _commands(res.stdout)
    trtexec = next(c for c in cmds if Path(c[0]).name == "trtexec")
    assert f"--onnx={onnx_file}" in trtexec
    assert f"--saveEngine={out_engine}" in trtexec
    assert "--fp16" in trtexec and "--int8" not in trtexec
    assert f"--timingCacheFile={out_engine.parent / 'timing.cache'}" in trtexec
    assert "--memPoolSize=workspace:1024" in trtexec
    prof = trtx.shape_profile(trtx.read_onnx_meta(onnx_file), max_batch=4)
    for arg in prof.trtexec_args():
        assert arg in trtexec
    assert "--maxShapes=glimpse:4x2x8x8,overview:4x1x16x16,state:4x5" in trtexec
    sidecar = next(c for c in cmds if "sidecar" in c)
    assert sidecar[:4] == [sys.executable, "-m", "inspector.commands.engine", "sidecar"]
    assert sidecar[sidecar.index("--engine") + 1] == str(out_engine)
    assert sidecar[sidecar.index("--precision") + 1] == "fp16"
    assert sidecar[sidecar.index("--max-batch") + 1] == "4"
    assert not out_engine.parent.exists()  # a dry run changes nothing


def test_build_engine_dry_run_fp32_and_explicit_shapes(onnx_file: Path) -> None:
    res = _build(
        "--onnx",
        str(onnx_file),
        "--fp32",
        "--workspace-mb",
        "256",
        "--min-shapes",
        "glimpse:1x2x8x8,overview:1x1x16x16,state:1x5",
        "--opt-shapes",
        "glimpse:2x2x8x8,overview:2x1x16x16,state:2x5",
        "--max-shapes",
        "glimpse:2x2x8x8,overview:2x1x16x16,state:2x5",
        "--trtexec",
        "/usr/src/tensorrt/bin/trtexec",
    )
    assert res.returncode == 0, res.stderr
    trtexec = next(c for c in _commands(res.stdout) if c[0] == "/usr/src/tensorrt/bin/trtexec")
    assert "--fp16" not in trtexec and "--int8" not in trtexec
    assert "--memPoolSize=workspace:256" in trtexec
    assert "--optShapes=glimpse:2x2x8x8,overview:2x1x16x16,state:2x5" in trtexec
    assert str(onnx_file.with_suffix(".engine")) in " ".join(trtexec)


def test_build_engine_int8_paths(onnx_file: Path, tmp_path: Path) -> None:
    res = _build("--onnx", str(onnx_file), "--int8")
    assert res.returncode == 2
    assert "--calib DIR" in res.stderr and res.stdout == ""

    cache = tmp_path / "panel.calib"
    res = _build("--onnx", str(onnx_file), "--int8", "--calib-cache", str(cache))
    assert res.returncode == 0, res.stderr
    trtexec = next(c for c in _commands(res.stdout) if c[0] == "trtexec")
    assert "--int8" in trtexec and f"--calib={cache}" in trtexec

    res = _build("--onnx", str(onnx_file), "--int8", "--calib", str(tmp_path))
    assert res.returncode == 0, res.stderr
    (cmd,) = _commands(res.stdout)  # the Python builder does everything, sidecar included
    assert cmd[:4] == [sys.executable, "-m", "inspector.commands.engine", "build"]
    assert "--int8" in cmd and cmd[cmd.index("--calib") + 1] == str(tmp_path)


def test_build_engine_refuses_bad_input(onnx_file: Path, tmp_path: Path) -> None:
    assert "--onnx FILE is required" in _build().stderr
    res = _build("--onnx", str(tmp_path / "nope.onnx"))
    assert res.returncode == 2 and "no such ONNX file" in res.stderr
    res = _build("--onnx", str(onnx_file), "--max-batch", "zero")
    assert res.returncode == 2 and "positive integer" in res.stderr
    res = _build("--onnx", str(onnx_file), "--bogus")
    assert res.returncode == 2 and "unknown option" in res.stderr
    res = _build("--onnx", str(onnx_file), "--min-shapes", "glimpse:1x2x8x8")
    assert res.returncode == 2 and "or none" in res.stderr
    res = _build("--onnx", str(onnx_file), "--min-batch", "4", "--opt-batch", "2")
    assert res.returncode == 2 and "min <= opt <= max" in res.stderr


def test_build_engine_without_trtexec_says_where_it_is(onnx_file: Path, tmp_path: Path) -> None:
    if shutil.which("trtexec", path="/usr/bin:/bin") or Path("/usr/src/tensorrt/bin").exists():
        pytest.skip("trtexec is installed here")
    res = _run(
        "build_engine.sh",
        "--python",
        sys.executable,
        "--onnx",
        str(onnx_file),
        "--out",
        str(tmp_path / "e.engine"),
    )
    assert res.returncode == 2
    assert "trtexec not found" in res.stderr and "/usr/src/tensorrt/bin/trtexec" in res.stderr
    assert not (tmp_path / "e.engine").exists()


def test_gpu_check_dry_run(onnx_file: Path, tmp_path: Path) -> None:
    res = _run(
        "gpu_check.sh",
        "--onnx",
        str(onnx_file),
        "--python",
        sys.executable,
        "--workdir",
        str(tmp_path / "w"),
        "--dry-run",
    )
    assert res.returncode == 0, res.stderr
    cmds = _commands(res.stdout)
    builds = [c for c in cmds if c[3:4] == ["build"]]
    assert [c[c.index("--out") + 1] for c in builds] == [
        str(tmp_path / "w" / "check.fp32.engine"),
        str(tmp_path / "w" / "check.fp16.engine"),
    ]
    assert "--fp32" in builds[0] and "--fp16" in builds[1]
    assert len([c for c in cmds if c[3:4] == ["parity"]]) == 2
    pytest_cmd = cmds[-1]
    assert (
        "INSPECTOR_REQUIRE_TRT=1" in pytest_cmd and f"INSPECTOR_TRT_ONNX={onnx_file}" in pytest_cmd
    )
    assert "tests/unit/test_tensorrt.py" in pytest_cmd
    assert not (tmp_path / "w").exists()


def test_install_dry_run(tmp_path: Path) -> None:
    res = _run("install.sh", "--prefix", str(tmp_path / "opt"), "--dry-run")
    assert res.returncode == 0, res.stderr
    cmds = _commands(res.stdout)
    flat = [" ".join(c) for c in cmds]
    assert any(c[:3] == ["python3", "-m", "venv"] and "--system-site-packages" in c for c in cmds)
    pip = [c for c in cmds if "pip" in c and "install" in c]
    assert "--no-deps" in pip[0]
    assert not any(re.match(r"torch", a) for c in pip for a in c)
    assert any("inspector-station.service" in f and "/etc/systemd/system/" in f for f in flat)
    assert ["systemctl", "enable", "inspector-station.service"] in cmds
    assert not (tmp_path / "opt").exists()


# ----------------------------------------------------------------- unit, container, config


def _unit() -> configparser.ConfigParser:
    cp = configparser.ConfigParser(strict=True, interpolation=None)
    cp.optionxform = str  # systemd keys are case-sensitive
    cp.read_string((JETSON / "inspector-station.service").read_text())
    return cp


def test_systemd_unit_keys() -> None:
    unit = _unit()
    assert unit.sections() == ["Unit", "Service", "Install"]
    svc = unit["Service"]
    assert shlex.split(svc["ExecStart"])[1:] == ["run", "--config", "/etc/inspector/station.yaml"]
    assert Path(shlex.split(svc["ExecStart"])[0]).name == "inspector"
    assert svc["Restart"] == "always"
    assert int(svc["RestartSec"]) > 0
    assert svc["User"] == "inspector" and svc["User"] != "root"
    assert svc["WorkingDirectory"].startswith("/")
    assert svc["EnvironmentFile"].lstrip("-") == "/etc/inspector/station.env"
    assert "PrivateTmp" not in svc  # nvarguscamerasrc needs the host's /tmp/argus_socket
    assert unit["Unit"]["StartLimitIntervalSec"] == "0"
    assert unit["Install"]["WantedBy"] == "multi-user.target"
    config = yaml.safe_load((JETSON / "station.yaml").read_text())
    assert config["mqtt"]["password_env"] in (JETSON / "inspector-station.service").read_text()


def test_systemd_unit_verifies(tmp_path: Path) -> None:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze not installed (the INI checks above still ran)")
    # verify wants ExecStart's binary to exist; the rest of the unit is checked as written.
    text = (JETSON / "inspector-station.service").read_text()
    exe = shlex.split(_unit()["Service"]["ExecStart"])[0]
    unit = tmp_path / "inspector-station.service"
    unit.write_text(text.replace(f"ExecStart={exe} ", "ExecStart=/bin/true "))
    res = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True
    )
    problems = [
        line
        for line in (res.stdout + res.stderr).splitlines()
        if re.search(r"Unknown (key|section)|Invalid|Failed to parse|not executable", line)
    ]
    assert res.returncode == 0 and not problems, res.stdout + res.stderr


def test_example_station_config() -> None:
    config = yaml.safe_load((JETSON / "station.yaml").read_text())
    camera = config["camera"]
    assert camera["driver"] == "opencv"
    pipeline = camera["params"]["source"]
    assert pipeline.startswith("nvarguscamerasrc") and "appsink" in pipeline
    assert "\n" not in pipeline  # one pipeline string for cv2.VideoCapture(..., CAP_GSTREAMER)
    assert config["model"]["path"].endswith(".engine")
    assert config["model"]["backend"] == "tensorrt"
    assert config["mqtt"]["host"] == "MQTT_BROKER_HOST"
    assert "password" not in config["mqtt"]  # secrets come from the environment file
    assert isinstance(config["metrics_port"], int)


def _requirements(text: str) -> set[str]:
    return set(re.findall(r'"([a-z][a-z0-9-]*[<>=][^"]*)"', text))


def test_dockerfile_is_jetpack_without_torch() -> None:
    text = (JETSON / "Dockerfile").read_text()
    base = re.search(r"^ARG L4T_TAG=(\S+)$", text, re.M)
    assert base is not None and base.group(1).startswith("r36.")
    assert "FROM nvcr.io/nvidia/l4t-jetpack:${L4T_TAG}" in text
    assert "pip install --no-deps ." in text
    reqs = _requirements(text)
    assert {r.split(">")[0].split("<")[0].split("=")[0] for r in reqs} >= {
        "numpy",
        "pyyaml",
        "paho-mqtt",
        "prometheus-client",
        "onnxruntime",
        "cuda-python",
    }
    assert not any(r.startswith(("torch", "opencv")) for r in reqs)
    assert "numpy>=1.26,<2" in reqs
    # The container and the bare-metal install give the station the same libraries.
    assert reqs == _requirements((JETSON / "install.sh").read_text())
    for path in re.findall(r"^COPY (\S+) ", text, re.M):
        assert (REPO / path).exists(), f"Dockerfile copies {path}, which does not exist"
    assert re.search(r"^USER inspector$", text, re.M)
    assert 'CMD ["run", "--config", "/etc/inspector/station.yaml"]' in text


def test_readme_covers_the_procedure() -> None:
    text = (JETSON / "README.md").read_text()
    for needle in (
        "JetPack 6",
        "r36",
        "TensorRT 10",
        "build_engine.sh",
        "not portable",
        "systemctl start inspector-station",
        "mosquitto_sub",
        "## Update the model",
        "## Roll back",
        "install.sh",
    ):
        assert needle in text, needle
