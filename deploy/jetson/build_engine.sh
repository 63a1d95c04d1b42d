#!/usr/bin/env bash
# Build a TensorRT engine from an exported inspector policy (.onnx), ON THE DEVICE
# THAT WILL RUN IT: an engine only loads with the TensorRT version and GPU that built it.
#
# fp16/fp32 engines are built with trtexec; int8 engines need calibration, which
# trtexec cannot do from observations, so `--int8 --calib DIR` uses the Python
# builder (inspector.export.tensorrt) and `--int8 --calib-cache FILE` reuses a cache.
# Both write the sidecar <engine>.json with the model metadata the station reads.
#
#   deploy/jetson/build_engine.sh --onnx model.onnx [--out model.engine] [--fp16|--fp32]
#       [--int8 (--calib DIR | --calib-cache FILE)] [--min-batch 1 --opt-batch 1 --max-batch 8]
#       [--workspace-mb 1024] [--timing-cache FILE] [--builder trtexec|python]
#       [--min-shapes S --opt-shapes S --max-shapes S] [--trtexec PATH] [--python PY] [--dry-run]
#
# --dry-run prints the commands (one per line, shell-quoted) instead of running them;
# it reads the ONNX metadata for the shapes but needs no GPU, TensorRT or trtexec.
set -euo pipefail

usage() {
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
}

# shellcheck source=deploy/jetson/common.sh disable=SC1091
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

onnx=""
out=""
precision="fp16"
calib=""
calib_cache=""
workspace_mb=1024
min_batch=1
opt_batch=1
max_batch=8
min_shapes=""
opt_shapes=""
max_shapes=""
timing_cache=""
builder="trtexec"
trtexec="${TRTEXEC:-}"
python="${PYTHON:-python3}"
dry_run=0

need_value() {
  [[ $2 -ge 2 ]] || die "$1 needs a value"
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --onnx | --out | --calib | --calib-cache | --workspace-mb | --min-batch | --opt-batch | \
      --max-batch | --min-shapes | --opt-shapes | --max-shapes | --timing-cache | --builder | \
      --trtexec | --python)
      need_value "$1" "$#"
      case "$1" in
        --onnx) onnx="$2" ;;
        --out) out="$2" ;;
        --calib) calib="$2" ;;
        --calib-cache) calib_cache="$2" ;;
        --workspace-mb) workspace_mb="$2" ;;
        --min-batch) min_batch="$2" ;;
        --opt-batch) opt_batch="$2" ;;
        --max-batch) max_batch="$2" ;;
        --min-shapes) min_shapes="$2" ;;
        --opt-shapes) opt_shapes="$2" ;;
        --max-shapes) max_shapes="$2" ;;
        --timing-cache) timing_cache="$2" ;;
        --builder) builder="$2" ;;
        --trtexec) trtexec="$2" ;;
        --python) python="$2" ;;
      esac
      shift 2
      ;;
    --fp16) precision="fp16"; shift ;;
    --fp32) precision="fp32"; shift ;;
    --int8) precision="int8"; shift ;;
    --dry-run) dry_run=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

[[ -n "$onnx" ]] || die "--onnx FILE is required"
[[ -f "$onnx" ]] || die "$onnx: no such ONNX file"
[[ -n "$out" ]] || out="${onnx%.onnx}.engine"
[[ -n "$timing_cache" ]] || timing_cache="$(dirname -- "$out")/timing.cache"
for n in "$workspace_mb" "$min_batch" "$opt_batch" "$max_batch"; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "expected a positive integer, got '$n'"
done
case "$builder" in trtexec | python) ;; *) die "--builder must be trtexec or python" ;; esac

batch_args=(--min-batch "$min_batch" --opt-batch "$opt_batch" --max-batch "$max_batch")

if [[ "$precision" == "int8" && -z "$calib" && -z "$calib_cache" ]]; then
  die "--int8 needs --calib DIR (observations as .npz) or --calib-cache FILE; without them trtexec makes up the int8 scales"
fi

if [[ "$builder" == "python" || -n "$calib" ]]; then
  # The Python builder calibrates, caches and writes the sidecar itself.
  py_args=(--onnx "$onnx" --out "$out" --workspace-mb "$workspace_mb" --timing-cache "$timing_cache")
  case "$precision" in
    fp32) py_args+=(--fp32) ;;
    int8) py_args+=(--int8) ;;
  esac
  [[ -z "$calib" ]] || py_args+=(--calib "$calib")
  [[ -z "$calib_cache" ]] || py_args+=(--calib-cache "$calib_cache")
  run "$python" -m inspector.commands.engine build "${py_args[@]}" "${batch_args[@]}"
  exit 0
fi

# Shapes: from the flags, else from the ONNX metadata (glimpse, overview, state sizes).
if [[ -n "$min_shapes" && -n "$opt_shapes" && -n "$max_shapes" ]]; then
  shape_args=("--minShapes=$min_shapes" "--optShapes=$opt_shapes" "--maxShapes=$max_shapes")
elif [[ -n "$min_shapes$opt_shapes$max_shapes" ]]; then
  die "give all of --min-shapes, --opt-shapes and --max-shapes, or none"
else
  shapes="$("$python" -m inspector.commands.engine shapes --onnx "$onnx" "${batch_args[@]}")" ||
    die "could not read the input shapes from $onnx (is inspector installed for $python?)"
  read -r -a shape_args <<<"$shapes"
fi

if [[ -z "$trtexec" ]]; then
  if command -v trtexec >/dev/null 2>&1; then
    trtexec="$(command -v trtexec)"
  elif [[ -x /usr/src/tensorrt/bin/trtexec ]]; then
    trtexec=/usr/src/tensorrt/bin/trtexec # where JetPack puts it
  elif [[ $dry_run -eq 1 ]]; then
    trtexec=trtexec
  else
    die "trtexec not found: on JetPack it is /usr/src/tensorrt/bin/trtexec (apt install tensorrt), or pass --trtexec PATH"
  fi
fi

trt_args=(
  "--onnx=$onnx"
  "--saveEngine=$out"
  "--memPoolSize=workspace:$workspace_mb"
  "--timingCacheFile=$timing_cache"
  "${shape_args[@]}"
  --skipInference
)
case "$precision" in
  fp16) trt_args+=(--fp16) ;;
  int8) trt_args+=(--int8 --fp16 "--calib=$calib_cache") ;;
esac

run mkdir -p -- "$(dirname -- "$out")"
run "$trtexec" "${trt_args[@]}"
run "$python" -m inspector.commands.engine sidecar --onnx "$onnx" --engine "$out" \
  --precision "$precision" "${batch_args[@]}"
