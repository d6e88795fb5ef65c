#!/usr/bin/env bash
# Start an OpenSSH server as the (non-root) job user, for launchers that reach the other replicas of a
# distributed job over SSH (mpirun, DeepSpeed's pdsh launcher, Horovod).
#
#   start-sshd [extra sshd options...]
#
# SSH_PORT (default 2222): a non-root user cannot bind port 22.
# SSH_DIR (default ~/.ssh): holds the host key, authorized_keys and the pid file. The host key is
#   generated on first start, so no two containers share one.
# The launcher (or the platform) puts the job's public key into $SSH_DIR/authorized_keys.
set -euo pipefail

port="${SSH_PORT:-2222}"
dir="${SSH_DIR:-${HOME}/.ssh}"
mkdir -p "${dir}"
chmod 700 "${dir}"
if [[ ! -f "${dir}/ssh_host_ed25519_key" ]]; then
  ssh-keygen -q -t ed25519 -N '' -f "${dir}/ssh_host_ed25519_key"
fi
touch "${dir}/authorized_keys"
chmod 600 "${dir}/authorized_keys"

# UsePAM and StrictModes need root; key authentication is the only way in.
exec /usr/sbin/sshd -D -e -p "${port}" \
  -h "${dir}/ssh_host_ed25519_key" \
  -o PidFile="${dir}/sshd.pid" \
  -o AuthorizedKeysFile="${dir}/authorized_keys" \
  -o UsePAM=no \
  -o StrictModes=no \
  -o PasswordAuthentication=no \
  -o KbdInteractiveAuthentication=no \
  "$@"
