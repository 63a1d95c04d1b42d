"""deploy/k3s: every manifest validates offline against the Kubernetes schemas, the
ConfigMap's station.yaml is a valid StationConfig, and the pieces agree with each
other (ports, secret names, broker address, registry mount)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

kubernetes_validate = pytest.importorskip("kubernetes_validate")

K3S = Path(__file__).resolve().parents[3] / "deploy" / "k3s"
#: The Kubernetes release the manifests target (k3s follows upstream releases).
VERSION = "1.31"


def documents() -> list[tuple[str, dict]]:
    out = []
    for f in sorted(K3S.glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            if doc:
                out.append((f.name, doc))
    return out


def find(kind: str, name: str) -> dict:
    hits = [d for _, d in documents() if d["kind"] == kind and d["metadata"]["name"] == name]
    assert len(hits) == 1, (kind, name)
    return hits[0]


def station_sets() -> list[dict]:
    return [
        d
        for _, d in documents()
        if d["kind"] == "DaemonSet"
        and d["metadata"]["labels"].get("app.kubernetes.io/name") == "inspector-station"
    ]


def test_schemas_ship_with_the_package():
    # Nothing is downloaded: the schemas are files inside the installed package.
    import importlib.resources

    root = importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema"
    assert (root / f"v{VERSION}.0-local-strict" / "daemonset-apps-v1.json").is_file()


@pytest.mark.parametrize(
    ("file", "doc"),
    documents(),
    ids=[f"{f}:{d['kind']}/{d['metadata']['name']}" for f, d in documents()],
)
def test_manifest_validates(file, doc):
    kubernetes_validate.validate(doc, VERSION, strict=True)


def test_validation_is_not_vacuous():
    ds = station_sets()[0]
    bad = yaml.safe_load(yaml.safe_dump(ds))
    bad["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, VERSION, strict=True)
    bad = yaml.safe_load(yaml.safe_dump(ds))
    bad["spec"]["template"]["spec"]["containers"][1]["ports"][0]["containerPort"] = "9443"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, VERSION, strict=True)


def station_config_of(ds: dict, tmp_path: Path):
    from inspector.station.config import load_station_config

    cm_name = next(
        v["configMap"]["name"]
        for v in ds["spec"]["template"]["spec"]["volumes"]
        if "configMap" in v
    )
    cm = find("ConfigMap", cm_name)
    path = tmp_path / "station.yaml"
    path.write_text(cm["data"]["station.yaml"])
    return load_station_config(path)


def test_station_configmap_is_a_valid_station_config(tmp_path):
    assert station_sets(), "no station DaemonSet in deploy/k3s"
    for ds in station_sets():
        cfg = station_config_of(ds, tmp_path)
        assert cfg.check() is cfg
        assert cfg.mqtt.enabled and cfg.mqtt.password is None  # no secret in a ConfigMap


def test_station_pieces_agree(tmp_path):
    broker = find("Service", "mosquitto")
    acl = find("ConfigMap", "mosquitto-conf")["data"]["acl"]
    for ds in station_sets():
        cfg = station_config_of(ds, tmp_path)
        pod = ds["spec"]["template"]
        containers = {c["name"]: c for c in pod["spec"]["containers"]}
        c, proxy = containers["station"], containers["metrics-proxy"]
        # The endpoint has no credentials: loopback only, served outside by the proxy,
        # which Prometheus finds through the annotations.
        assert cfg.metrics_host == "127.0.0.1"
        assert f"--upstream=http://127.0.0.1:{cfg.metrics_port}/" in proxy["args"]
        (port,) = proxy["ports"]
        assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(port["containerPort"])
        assert f"--secure-listen-address=0.0.0.0:{port['containerPort']}" in proxy["args"]
        assert pod["spec"]["serviceAccountName"] == "inspector-station"
        find("ServiceAccount", "inspector-station")
        probe = c["livenessProbe"]["exec"]["command"]
        assert probe[:2] == ["inspector", "health"]
        assert probe[probe.index("--port") + 1] == str(cfg.metrics_port)
        # The password comes from a Secret, under the name the config reads.
        env = {e["name"]: e for e in c["env"]}
        assert "secretKeyRef" in env[cfg.mqtt.password_env]["valueFrom"]
        # The broker is the mosquitto Service, and its ACL knows the station's user.
        assert cfg.mqtt.host == f"{broker['metadata']['name']}.inspector.svc.cluster.local"
        assert cfg.mqtt.port == broker["spec"]["ports"][0]["port"]
        assert re.search(rf"^user {re.escape(cfg.mqtt.username)}$", acl, re.M)
        # Writable state is on the mounted state volume; the registry is mounted read-only.
        mounts = {m["name"]: m for m in c["volumeMounts"]}
        assert cfg.outbox.path.startswith(mounts["state"]["mountPath"] + "/")
        assert mounts["registry"]["readOnly"] is True
        # The model is the line's roll-out, in the registry the pod mounts.
        line = ds["metadata"]["labels"]["inspector.io/line"]
        assert cfg.model.path == f"registry:{line}@stable"
        assert cfg.model.registry == mounts["registry"]["mountPath"]
        # Camera access through the device plugin, requested and limited alike.
        res = c["resources"]
        assert res["requests"]["squat.ai/video"] == res["limits"]["squat.ai/video"] == "1"
        assert not c["securityContext"].get("privileged", False)
        # Stations take their id from the node.
        assert "$(NODE_NAME)" in c["args"]
        assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
        line = ds["metadata"]["labels"]["inspector.io/line"]
        assert pod["spec"]["nodeSelector"] == {"inspector.io/line": line}


def test_every_container_has_requests_and_limits():
    for _, d in documents():
        spec = d.get("spec", {}).get("template", {}).get("spec")
        if not spec:
            continue
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]), c["name"]
            assert {"cpu", "memory"} <= set(c["resources"]["limits"]), c["name"]


def test_prometheus_scrape_config_keeps_annotated_pods():
    cfg = yaml.safe_load(find("ConfigMap", "prometheus-inspector")["data"]["prometheus.yml"])
    (job,) = cfg["scrape_configs"]
    assert job["kubernetes_sd_configs"][0]["namespaces"]["names"] == ["inspector"]
    keep = job["relabel_configs"][0]
    assert keep["action"] == "keep" and keep["regex"] == "true"
    # Prometheus joins address and port annotation with ";" and anchors the regex.
    rewrite = job["relabel_configs"][1]
    m = re.fullmatch(rewrite["regex"], "10.42.0.7:8080;9108")
    assert rewrite["replacement"].replace("$1", m.group(1)).replace("$2", m.group(2)) == (
        "10.42.0.7:9108"
    )
