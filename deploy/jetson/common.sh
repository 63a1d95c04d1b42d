# What the scripts beside this one share; they source it (it runs nothing itself).
# shellcheck shell=bash

# Say what went wrong, as "<script>: error: ...", and exit 2.
die() {
  echo "$(basename "$0"): error: $*" >&2
  exit 2
}

# Print the command (with --dry-run: the caller's dry_run=1) or run it.
run() {
  if [[ ${dry_run:-0} -eq 1 ]]; then
    printf '%q ' "$@"
    printf '\n'
  else
    "$@"
  fi
}
