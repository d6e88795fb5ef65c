#!/usr/bin/env bash
# Smoke test of gpu-platform/base and gpu-platform/base-cpu. Runs inside the container:
#
#   /opt/gpu-platform/smoke-test/base.sh [--require-gpu]
#
# Checks the runtime contract of the image (README.md): non-root user, Python in /opt/venv, the tools,
# writable /workspace and /checkpoints, unbuffered Python output, an SSH server another replica can log
# into, and the GPUs when any are visible (all of them required with --require-gpu).
# Prints one line per check; exits 0 when all pass, 1 otherwise, 2 on bad usage.
set -uo pipefail

require_gpu=0
for arg in "$@"; do
  case "${arg}" in
    --require-gpu) require_gpu=1 ;;
    *) echo "usage: $0 [--require-gpu]" >&2; exit 2 ;;
  esac
done

failures=0
pass() { echo "ok    $1"; }
fail() { echo "FAIL  $1"; failures=$((failures + 1)); }
check() {
  local what=$1
  shift
  if "$@" >/dev/null 2>&1; then pass "${what}"; else fail "${what}"; fi
}

check "runs as a non-root user (uid $(id -u))" test "$(id -u)" -ne 0
check "python is the /opt/venv interpreter" test "$(command -v python)" = /opt/venv/bin/python
check "python has ssl, sqlite3 and venv" python -c "import ssl, sqlite3, venv"
check "pip works" python -m pip --version
for tool in git curl ssh ssh-keygen sshd tini rsync start-sshd; do
  check "${tool} is installed" command -v "${tool}"
done
check "PYTHONUNBUFFERED=1" test "${PYTHONUNBUFFERED:-}" = 1
for dir in /workspace /checkpoints /opt/venv; do
  check "${dir} is writable" sh -c "touch '${dir}/.smoke-test' && rm '${dir}/.smoke-test'"
done

# Throughput contract: the helper writes the number to the file the platform names.
tput_file="$(mktemp)"
check "gpu_platform.report_throughput writes GPU_PLATFORM_THROUGHPUT_FILE" sh -c \
  "GPU_PLATFORM_THROUGHPUT_FILE='${tput_file}' python -c 'import gpu_platform; gpu_platform.report_throughput(12.5)' && test \"\$(cat '${tput_file}')\" = 12.5"
rm -f "${tput_file}"

# Preemption contract: the checkpoint loop saves on SIGTERM and resumes from it with RESUME=1.
if out="$(python /opt/gpu-platform/smoke-test/checkpoint.py --self-test 2>&1)"; then
  pass "a preempted training loop checkpoints on SIGTERM and resumes with RESUME=1"
else
  fail "checkpoint and resume: $(echo "${out}" | grep FAIL | head -n 1)"
fi

# SSH: start the server the way a distributed launcher would and log into it with a fresh key.
tmp="$(mktemp -d)"
port=$((20000 + RANDOM % 20000))
ssh-keygen -q -t ed25519 -N '' -f "${tmp}/client_key"
mkdir -p "${tmp}/sshd"
cp "${tmp}/client_key.pub" "${tmp}/sshd/authorized_keys"
SSH_DIR="${tmp}/sshd" SSH_PORT="${port}" start-sshd >"${tmp}/sshd.log" 2>&1 &
sshd_pid=$!
ssh_ok=0
for _ in $(seq 1 50); do
  if ssh -q -p "${port}" -i "${tmp}/client_key" -o BatchMode=yes -o StrictHostKeyChecking=no \
       -o UserKnownHostsFile=/dev/null 127.0.0.1 true 2>/dev/null; then
    ssh_ok=1
    break
  fi
  sleep 0.2
done
if [[ ${ssh_ok} == 1 ]]; then pass "start-sshd accepts a key login on port ${port}"; else
  fail "start-sshd accepts a key login on port ${port}: $(tail -n 1 "${tmp}/sshd.log")"
fi
kill "${sshd_pid}" 2>/dev/null
wait "${sshd_pid}" 2>/dev/null
rm -rf "${tmp}"

# CUDA images (nvidia/cuda sets CUDA_VERSION) must carry the CUDA runtime library.
if [[ -n "${CUDA_VERSION:-}" ]]; then
  check "CUDA ${CUDA_VERSION} runtime library is installed" sh -c "ldconfig -p | grep -q libcudart.so"
fi

# GPUs: the NVIDIA container runtime mounts nvidia-smi and the driver when GPUs are assigned.
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  pass "GPUs visible (driver $(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)):"
  nvidia-smi -L | sed 's/^/        /'
elif [[ ${require_gpu} == 1 ]]; then
  fail "no GPU visible: run the container with GPUs (docker run --gpus all) and check NVIDIA_VISIBLE_DEVICES"
else
  echo "skip  no GPU visible (pass --require-gpu to make this a failure)"
fi

if [[ ${failures} -gt 0 ]]; then
  echo "${failures} check(s) failed"
  exit 1
fi
echo "all checks passed"
