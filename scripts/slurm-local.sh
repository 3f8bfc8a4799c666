#!/usr/bin/env bash
# Starts a one-node Slurm on this machine (munged, slurmctld, slurmd) so the
# test suite can launch smprun with srun (test/smprun/launchers-srun.test).
#
# It never touches a Slurm it did not set up: when /etc/slurm/slurm.conf
# exists and was not written by this script, it only reports whether that
# Slurm answers. Idempotent: daemons already running are left alone.
# The packages come from `scripts/install-deps.sh --tests` (slurmd,
# slurmctld, munge). Needs root (it writes /etc/slurm and starts daemons);
# without root or the packages it says why and exits 0, and the srun test
# is reported unsupported by lit.
set -uo pipefail

CONF=/etc/slurm/slurm.conf
MARK="# written by smp scripts/slurm-local.sh"

say() { echo "slurm-local: $*"; }

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null ||
   ! command -v munged >/dev/null; then
  say "slurmctld/slurmd/munged not installed (bash scripts/install-deps.sh --tests installs them); srun tests will be skipped"
  exit 0
fi

if [[ -f $CONF ]] && ! grep -qF "$MARK" "$CONF"; then
  if sinfo -h -o %t 2>/dev/null | grep -Eq 'idle|mix|alloc'; then
    say "using this machine's own Slurm ($CONF)"
  else
    say "$CONF is not ours and its Slurm does not answer; srun tests will be skipped"
  fi
  exit 0
fi

if [[ $(id -u) != 0 ]]; then
  say "not root: cannot start a local Slurm; srun tests will be skipped"
  exit 0
fi

host=$(hostname -s)
cpus=$(nproc)
mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 8 / 10 ))
mkdir -p /etc/slurm /var/spool/smp-slurmctld /var/spool/smp-slurmd /var/log/slurm \
  /run/munge
chown munge:munge /run/munge 2>/dev/null || true

want=$(cat <<EOF
$MARK
ClusterName=smplocal
SlurmctldHost=$host
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=/var/spool/smp-slurmctld
SlurmdSpoolDir=/var/spool/smp-slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
)
restart=0
if [[ ! -f $CONF ]] || [[ $(cat "$CONF") != "$want" ]]; then
  printf '%s\n' "$want" > "$CONF"
  restart=1
fi

if [[ ! -s /etc/munge/munge.key ]]; then
  mungekey --create >/dev/null 2>&1 ||
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null
  chown munge:munge /etc/munge/munge.key
  chmod 400 /etc/munge/munge.key
fi
if ! pgrep -x munged >/dev/null; then
  su -s /bin/sh munge -c /usr/sbin/munged 2>/dev/null || /usr/sbin/munged --force
fi
if ((restart)); then
  pkill -x slurmd 2>/dev/null; pkill -x slurmctld 2>/dev/null
  for _ in $(seq 10); do
    pgrep -x 'slurmd|slurmctld' >/dev/null || break
    sleep 0.5
  done
  pkill -9 -x slurmd 2>/dev/null; pkill -9 -x slurmctld 2>/dev/null
fi
pgrep -x slurmctld >/dev/null || slurmctld
pgrep -x slurmd >/dev/null || slurmd

for _ in $(seq 30); do
  if sinfo -h -o %t 2>/dev/null | grep -Eq 'idle|mix|alloc'; then
    say "one-node Slurm up on $host ($cpus CPUs): $(srun --mpi=list 2>&1 | tr '\n\t' '  ' | sed 's/  */ /g')"
    exit 0
  fi
  sleep 1
done
say "Slurm did not come up (see /var/log/slurm/); srun tests will be skipped"
exit 0
