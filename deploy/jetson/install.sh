#!/usr/bin/env bash
# Install an inspector station on a Jetson running JetPack 6.1/6.2 (L4T r36.4):
# a system user, /etc/inspector, /var/lib/inspector, a venv that sees JetPack's
# TensorRT and OpenCV (--system-site-packages), the project without torch, and
# the systemd unit. Run as root from a checkout of the repository:
#
#   sudo deploy/jetson/install.sh [--src DIR] [--prefix /opt/inspector] [--dry-run]
#
# It never overwrites /etc/inspector/station.yaml or station.env once they exist.
# --dry-run prints the commands instead of running them (no root needed).
set -euo pipefail

# shellcheck source=deploy/jetson/common.sh disable=SC1091
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

here="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"
src="$(cd -- "$here/../.." && pwd)"
prefix=/opt/inspector
dry_run=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --src | --prefix)
      [[ $# -ge 2 ]] || die "$1 needs a value"
      if [[ "$1" == --src ]]; then src="$2"; else prefix="$2"; fi
      shift 2
      ;;
    --dry-run) dry_run=1; shift ;;
    -h | --help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1'" ;;
  esac
done
[[ -f "$src/pyproject.toml" ]] || die "$src is not an inspector checkout (no pyproject.toml)"

# The station's libraries; keep equal to the list in deploy/jetson/Dockerfile.
# numpy stays below 2: JetPack's OpenCV and TensorRT bindings are built against 1.x.
STATION_REQUIREMENTS=(
  "numpy>=1.26,<2"
  "pyyaml>=6"
  "pluggy>=1.5"
  "paho-mqtt>=2,<3"
  "prometheus-client>=0.20"
  "jsonschema>=4.20"
  "rich>=13"
  "onnx>=1.16"
  "onnxruntime>=1.18"
  "cuda-python>=12.6,<13"
)

if [[ $dry_run -eq 0 && $(id -u) -ne 0 ]]; then
  die "run as root (sudo), or with --dry-run to see what it would do"
fi
if [[ -f /etc/nv_tegra_release ]]; then
  release="$(head -n 1 /etc/nv_tegra_release)"
  [[ "$release" == *"R36"* ]] || echo "install.sh: warning: expected L4T R36 (JetPack 6), found: $release" >&2
else
  echo "install.sh: warning: /etc/nv_tegra_release not found: is this a Jetson?" >&2
fi

venv="$prefix/venv"
etc=/etc/inspector
state=/var/lib/inspector

run apt-get install -y --no-install-recommends python3-venv python3-libnvinfer libopencv-python \
  gstreamer1.0-tools mosquitto-clients
if ! id -u inspector >/dev/null 2>&1; then
  run useradd --system --home-dir "$state" --shell /usr/sbin/nologin --groups video inspector
fi
run install -d -m 0755 "$prefix" "$etc"
run install -d -o inspector -g inspector -m 0750 "$state" "$state/models" "$state/footage"
# Only what the station needs: no .git, .venv or training outputs.
run rm -rf -- "$prefix/src"
run install -d -m 0755 "$prefix/src"
run cp -a -- "$src/pyproject.toml" "$src/README.md" "$src/main.py" "$src/inspector" \
  "$src/plugins" "$src/camera_drivers" "$src/reward_profiles" "$src/deploy" "$prefix/src/"
run python3 -m venv --system-site-packages "$venv"
run "$venv/bin/python" -m pip install --no-deps "$prefix/src"
run "$venv/bin/python" -m pip install "${STATION_REQUIREMENTS[@]}"
if [[ ! -f "$etc/station.yaml" ]]; then
  run install -m 0644 "$here/station.yaml" "$etc/station.yaml"
fi
if [[ ! -f "$etc/station.env" ]]; then
  # Root-only: it holds the MQTT password (INSPECTOR_MQTT_PASSWORD=...).
  run install -m 0600 /dev/null "$etc/station.env"
fi
run install -m 0644 "$here/inspector-station.service" /etc/systemd/system/inspector-station.service
run systemctl daemon-reload
run systemctl enable inspector-station.service
echo "installed; next: build the engine (README.md), edit $etc/station.yaml and $etc/station.env," \
  "then: systemctl start inspector-station"
