#!/usr/bin/env bash
# Check the TensorRT path on a machine with an NVIDIA GPU and TensorRT 10 (a Jetson
# or an x86 CUDA box): build fp32 and fp16 engines from an ONNX policy with the
# Python builder, compare each with ONNX Runtime (fp32 within 1e-4, fp16 within
# 1e-3), then run the GPU tests of tests/unit/test_tensorrt.py on the same file.
#
#   deploy/jetson/gpu_check.sh [--onnx model.onnx] [--python PY] [--workdir DIR] [--dry-run]
#
# Without --onnx the tests use their own tiny policy and the parity step is skipped.
# Run it from the repository root. --dry-run prints the commands instead.
set -euo pipefail

# shellcheck source=deploy/jetson/common.sh disable=SC1091
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

onnx=""
python="${PYTHON:-python3}"
workdir=""
dry_run=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --onnx | --python | --workdir)
      [[ $# -ge 2 ]] || die "$1 needs a value"
      case "$1" in
        --onnx) onnx="$2" ;;
        --python) python="$2" ;;
        --workdir) workdir="$2" ;;
      esac
      shift 2
      ;;
    --dry-run) dry_run=1; shift ;;
    -h | --help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1'" ;;
  esac
done
[[ -z "$onnx" || -f "$onnx" ]] || die "$onnx: no such ONNX file"
[[ -f tests/unit/test_tensorrt.py ]] || die "run me from the repository root"
[[ -n "$workdir" ]] || workdir="${TMPDIR:-/tmp}/inspector-gpu-check"

if [[ $dry_run -eq 0 ]]; then
  if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi -L
  elif [[ -f /etc/nv_tegra_release ]]; then
    head -n 1 /etc/nv_tegra_release
  else
    die "no NVIDIA GPU found (neither nvidia-smi nor /etc/nv_tegra_release)"
  fi
fi
run "$python" -c "import tensorrt; print('tensorrt', tensorrt.__version__)"
run mkdir -p -- "$workdir"

if [[ -n "$onnx" ]]; then
  for precision in fp32 fp16; do
    engine="$workdir/check.$precision.engine"
    run "$python" -m inspector.commands.engine build --onnx "$onnx" --out "$engine" \
      "--$precision" --max-batch 8
    run "$python" -m inspector.commands.engine parity --onnx "$onnx" --engine "$engine" --n 1024
  done
fi

# INSPECTOR_REQUIRE_TRT turns the tests' "TensorRT missing" skips into failures.
run env "INSPECTOR_TRT_ONNX=$onnx" INSPECTOR_REQUIRE_TRT=1 "$python" -m pytest tests/unit/test_tensorrt.py -q -rs \
  -k "engine or policy_runs or int8"
