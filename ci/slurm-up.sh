#!/usr/bin/env bash
# Start a single-node Slurm cluster on this machine (Debian 12, slurm-wlm 22.05) for the tests of
# trainer/slurm and the Slurm runner. Run it as root (or it re-runs itself with sudo -n).
#
#   ci/slurm-up.sh          install (if needed), configure, start, wait until the node is idle
#   ci/slurm-up.sh stop     stop the daemons this script started (by their pid files)
#
# Idempotent: when the cluster already answers and the node is usable it only says so.
# No systemd: munged, slurmctld and slurmd run as background daemons; their logs are in
# /var/log/munge and /var/log/slurm. The node is this host with its real CPU count and memory;
# without cgroups (proctrack/linuxproc, task/none) memory limits are not enforced.
set -euo pipefail

if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
		exec sudo -n "$0" "$@"
	fi
	echo "slurm-up: needs root (or password-less sudo) to install and start Slurm" >&2
	exit 1
fi

CONF=/etc/slurm/slurm.conf
RUN=/run/slurm
STOP_HELP="stop it with: $0 stop"

running() { # running PID: the process is there and not a zombie (no procps needed)
	local st
	st=$(sed -n 's/^[0-9]* (.*) \([A-Za-z]\) .*/\1/p' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

pid_alive() { # pid_alive FILE: the process named in FILE is running
	[ -s "$1" ] && running "$(cat "$1")"
}

stop_daemon() { # stop_daemon PIDFILE: SIGTERM it and wait (bounded) until it is gone
	local pid
	pid_alive "$1" || return 0
	pid=$(cat "$1")
	kill "$pid"
	for _ in $(seq 100); do running "$pid" || break; sleep 0.1; done
	echo "slurm-up: stopped $(basename "$1" .pid) (pid $pid)"
}

stop() {
	stop_daemon "$RUN/slurmd.pid"
	stop_daemon "$RUN/slurmctld.pid"
	stop_daemon /run/munge/munged.pid
}

ours() { # no slurm.conf yet, or the one this script writes (never a real cluster's)
	[ ! -s "$CONF" ] || head -n 1 "$CONF" | grep -q '^# Written by ci/slurm-up.sh'
}

if [ "${1:-}" = stop ]; then
	if ! ours; then
		echo "slurm-up: $CONF was not written by this script; not stopping its daemons" >&2
		exit 1
	fi
	stop
	exit 0
fi

healthy() { # the controller answers and the node can take jobs
	scontrol ping 2>/dev/null | grep -q UP || return 1
	sinfo -h -N -o '%T' 2>/dev/null | grep -Eq '^(idle|mixed|allocated|completing)'
}

start=$(date +%s)
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null || ! command -v sbatch >/dev/null; then
	echo "slurm-up: installing slurm-wlm and munge"
	export DEBIAN_FRONTEND=noninteractive
	aptlog=$(mktemp)
	if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends slurm-wlm munge; } >"$aptlog" 2>&1; then
		cat "$aptlog" >&2
		echo "slurm-up: apt-get could not install slurm-wlm and munge" >&2
		exit 1
	fi
	rm -f "$aptlog"
fi
installed=$(date +%s)

# munge: the key (the package's postinst usually made one), then the daemon as user munge.
if [ ! -s /etc/munge/munge.key ]; then
	mungekey --create --keyfile=/etc/munge/munge.key
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
install -d -o munge -g munge -m 0755 /run/munge
if ! pid_alive /run/munge/munged.pid; then
	runuser -u munge -- munged
fi

# slurm.conf: written every time from this host's hardware, so a changed script takes effect.
node_line=$(slurmd -C | head -n 1) # NodeName=HOST CPUs=N ... RealMemory=M
node=$(sed -n 's/^NodeName=\([^ ]*\).*/\1/p' <<<"$node_line")
cpus=$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$node_line")
mem=$(sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p' <<<"$node_line")
install -d -o slurm -g slurm -m 0755 "$RUN" /var/lib/slurm/slurmctld /var/log/slurm
install -d -m 0755 /var/lib/slurm/slurmd
new_conf=$(mktemp)
cat >"$new_conf" <<EOF
# Written by ci/slurm-up.sh: a single-node cluster for tests. Edits are overwritten.
ClusterName=trainbot
SlurmctldHost=$node(127.0.0.1)
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
# No cgroups in a container: track processes by parent pid, bind nothing.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
# Memory is counted so --mem is checked against the node, but a job that asks for none gets its
# CPU's share, not the whole node (which would let only one job run at a time).
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=$((mem / cpus))
# sstat works (MaxRSS) through the slurmd, without slurmdbd.
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=30
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
# scontrol show job knows a finished job for an hour (there is no slurmdbd for sacct).
MinJobAge=3600
# A node that was down (e.g. the host restarted) takes jobs again when its slurmd registers.
ReturnToService=2
# Small test jobs: a submitted batch job is scheduled on slurmctld's next background tick (it
# runs once a second) instead of after batch_sched_delay (3 s); no 2 s minimum between scheduling
# passes. Measured: sbatch to RUNNING in 0.3-0.9 s, against 1.8-2.9 s with the defaults.
SchedulerParameters=sched_min_interval=0,batch_sched_delay=0
# A cancelled job's processes get SIGKILL 5 s after SIGTERM (default 30 s).
KillWait=5
InactiveLimit=0
SlurmctldDebug=info
SlurmdDebug=info
$node_line NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
if ! ours; then
	rm -f "$new_conf"
	echo "slurm-up: $CONF was not written by this script (a real cluster's?); not touching it" >&2
	exit 1
fi
conf_changed=0
if ! cmp -s "$new_conf" "$CONF"; then
	install -m 0644 "$new_conf" "$CONF"
	conf_changed=1
fi
rm -f "$new_conf"

if [ "$conf_changed" = 0 ] && healthy; then
	echo "slurm-up: already running ($(sinfo -h -N -o '%N %T')); $STOP_HELP"
	exit 0
fi
# A daemon already running with an older config is restarted so it reads the new one.
if [ "$conf_changed" = 1 ]; then
	stop_daemon "$RUN/slurmd.pid"
	stop_daemon "$RUN/slurmctld.pid"
fi
if ! pid_alive "$RUN/slurmctld.pid"; then
	slurmctld
fi
if ! pid_alive "$RUN/slurmd.pid"; then
	slurmd
fi

# Wait (bounded) until the node can take jobs; a node left down or drained by an earlier run is resumed.
deadline=$(($(date +%s) + 60))
while ! healthy; do
	state=$(sinfo -h -N -o '%T' 2>/dev/null || true)
	case "$state" in
	down* | drain* | drained*) scontrol update NodeName="$node" State=RESUME 2>/dev/null || true ;;
	esac
	if [ "$(date +%s)" -ge "$deadline" ]; then
		echo "slurm-up: node $node not idle after 60 s (state: ${state:-none}); see /var/log/slurm/*.log" >&2
		exit 1
	fi
	sleep 0.2
done
ready=$(date +%s)
echo "slurm-up: node $node ($cpus CPUs, $mem MB) is $(sinfo -h -N -o '%T'); install $((installed - start)) s, start $((ready - installed)) s"
echo "slurm-up: $STOP_HELP"
