# hosts-lib.sh -- hosts of the namespace fabric running softrdma's RoCE v2
# path (sourced by rc-hosts.sh, ud-hosts.sh and mcast-hosts.sh after
# lib.sh, with hosts_stem set to a few letters naming the test).
#
# Skips the test where network namespaces are unavailable; sets fabric and
# name (the fabric of this run, removed at exit, also when killed); brings
# down the fabrics of earlier runs that were killed outright (their shell
# is gone; their programs end by themselves, the agents a second after
# their last client).  Defines:
#   fab ARGS...         tests/netns/fabric.sh ARGS...
#   on HOST CMD...      CMD on a host, with SOFTRDMA_NET=1
#   listening HOST PORT wait (30 s at most) for a TCP listener there
#   agent_gone HOST     wait (10 s at most) until the host's agent exited
#   capture_start FILE  where dumpcap and tshark are installed: capture UDP
#                       port 4791 on host 1's eth0 into FILE (cap=FILE),
#                       waiting (30 s at most) until dumpcap says it
#                       captures; else cap is empty and it returns 1
#   capture_stop        end that capture (dumpcap flushes FILE and exits)
#   tap_passed FILE RC  show a peer's TAP (as comments: its "Bail out!"
#                       ends the peer, not this script's TAP); true when it
#                       passed: no "not ok", an "ok", and the peer's exit
#                       RC 0
# shellcheck shell=sh
fabric=$top_srcdir/tests/netns/fabric.sh
why=$(sh "$fabric" check) || skip_all "network namespaces unavailable: $why"
name=${RDMAMSG_FABRIC_STEM:-rdmamsg}-$hosts_stem$$
# (down, not cleanup: cleanup takes a stem, and this run's name, say
# rdmamsg-aph1234, is one of rdmamsg-aph12345's, another run's)
tap_exit_hook() {
	for p in $tap_pids; do kill -TERM "$p" 2>/dev/null; done
	sh "$fabric" down "$name"
}

fab() {
	sh "$fabric" "$@"
}
on() {
	_h=$1
	shift
	fab exec "$name" "$_h" env SOFTRDMA_NET=1 "$@"
}
tap_passed() {
	sed 's/^/#   /' "$1"
	! grep -q '^not ok' "$1" && grep -q '^ok' "$1" && [ "$2" -eq 0 ]
}
listening() {
	_i=0
	while [ $_i -lt 300 ]; do
		fab exec "$name" "$1" cat /proc/net/tcp 2>/dev/null |
			grep -Eq ":$(printf '%04X' "$2") 0+:0000 0A" && return 0
		sleep 0.1
		_i=$((_i + 1))
	done
	return 1
}
agent_gone() {
	_i=0
	while [ $_i -lt 100 ]; do
		fab exec "$name" "$1" cat /proc/net/unix |
			grep -q '@softrdma-roce' || return 0
		sleep 0.1
		_i=$((_i + 1))
	done
	return 1
}
capture_start() {
	cap=
	command -v dumpcap >/dev/null 2>&1 &&
		command -v tshark >/dev/null 2>&1 || return 1
	cap=$1
	: >"$tap_tmp/dumpcap.log"
	# (its pid from the shell it replaces: SIGINT is ignored in
	# background jobs, and "ip netns exec" may stand between; a 64 MiB
	# kernel buffer holds a whole run while dumpcap waits for a CPU)
	fab exec "$name" 1 sh -c 'echo $$ >"$0"; exec "$@"' \
		"$tap_tmp/dumpcap.pid" timeout -k 10 300 dumpcap -q -i eth0 \
		-B 64 -f 'udp port 4791' -w "$cap" >"$tap_tmp/dumpcap.log" 2>&1 &
	cpid=$!
	tap_pids="$tap_pids $cpid"
	# live once it has written its file's header: it opens the interface
	# first, and says "Capturing on" before either (a run started at
	# the words lost its first 16 frames in half the tries of
	# rc-atomic-hosts.sh)
	_i=0
	while [ $_i -lt 300 ] && ! { [ -s "$cap" ] &&
		grep -q "Capturing on" "$tap_tmp/dumpcap.log"; }; do
		sleep 0.1
		_i=$((_i + 1))
	done
	return 0
}
capture_stop() {
	[ -n "${cpid:-}" ] || return 0
	# what dumpcap has read is written before it exits, but what the
	# kernel still queues for it is lost: a loaded machine (valgrind)
	# may keep dumpcap off the CPU while the run goes on, so first wait
	# until the file has stopped growing for 2 s (at most 60 s)
	_i=0
	_same=0
	_last=-1
	while [ $_i -lt 600 ] && [ $_same -lt 20 ]; do
		_n=$(wc -c <"$cap" 2>/dev/null || echo 0)
		if [ "$_n" = "$_last" ]; then
			_same=$((_same + 1))
		else
			_same=0
		fi
		_last=$_n
		sleep 0.1
		_i=$((_i + 1))
	done
	kill -TERM "$(cat "$tap_tmp/dumpcap.pid")" 2>/dev/null
	wait "$cpid"
	cpid=
}

for f in $(fab list); do
	p=${f#"${RDMAMSG_FABRIC_STEM:-rdmamsg}-$hosts_stem"}
	case $p in '' | *[!0-9]* | "$f") continue ;; esac
	kill -0 "$p" 2>/dev/null || fab down "$f"
done
