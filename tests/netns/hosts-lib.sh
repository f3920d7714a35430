# hosts-lib.sh -- two hosts of the namespace fabric running softrdma's
# RoCE v2 path (sourced by rc-hosts.sh and ud-hosts.sh after lib.sh, with
# hosts_stem set to a few letters naming the test).
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
# shellcheck shell=sh
fabric=$top_srcdir/tests/netns/fabric.sh
why=$(sh "$fabric" check) || skip_all "network namespaces unavailable: $why"
name=${RDMAMSG_FABRIC_STEM:-rdmamsg}-$hosts_stem$$
trap 'for p in $tap_pids; do kill -TERM "$p" 2>/dev/null; done
	sh "$fabric" cleanup "$name"; tap_cleanup' EXIT
trap 'exit 1' INT TERM

fab() {
	sh "$fabric" "$@"
}
on() {
	_h=$1
	shift
	fab exec "$name" "$_h" env SOFTRDMA_NET=1 "$@"
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

for f in $(fab list); do
	p=${f#"${RDMAMSG_FABRIC_STEM:-rdmamsg}-$hosts_stem"}
	case $p in '' | *[!0-9]* | "$f") continue ;; esac
	kill -0 "$p" 2>/dev/null || fab down "$f"
done
