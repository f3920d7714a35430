#!/bin/sh
# fabric.sh -- a test fabric of network namespaces: N hosts on one or two
# bridges (rails), each host with its own /dev/shm, faults on demand.
#
# usage: fabric.sh check                  can namespaces be made here? (the
#                                         reason on stdout when not)
#        fabric.sh up NAME HOSTS [RAILS [MTU]]
#                                         start HOSTS hosts (1-200) on RAILS
#                                         bridges (1 or 2, default 1); MTU
#                                         of every link (68-65535, default
#                                         1500; 9000: jumbo frames, which a
#                                         RoCE MTU of 4096 needs)
#        fabric.sh exec NAME HOST CMD...  run CMD on host HOST (1..HOSTS)
#        fabric.sh addr NAME HOST [RAIL]  the host's address on a rail
#        fabric.sh netem NAME HOST RAIL ARGS...
#                                         tc netem on the host's egress to
#                                         that rail (loss 10%, delay 5ms,
#                                         reorder..., duplicate...);
#                                         "netem NAME HOST RAIL off" removes it
#                                         (needs the kernel's sch_netem: where
#                                         it is missing this fails, saying so)
#        fabric.sh loss NAME HOST RAIL PERCENT|off
#                                         a lossy cable: each packet the host
#                                         sends or receives on that rail is
#                                         dropped with that chance (1-99), by
#                                         tc netem where the kernel has it,
#                                         else by a tc clsact filter (random
#                                         drop); says which on stdout
#        fabric.sh drop NAME HOST RAIL on|off
#                                         blackhole: every packet the host
#                                         sends on that rail is dropped, the
#                                         carrier stays up (a tc clsact
#                                         filter: works without sch_netem)
#        fabric.sh blackhole NAME RAIL on|off
#                                         a dead switch: the rail's bridge
#                                         forwards nothing, every host's
#                                         carrier stays up and its packets
#                                         leave it (lost in the fabric, not
#                                         refused by the host's own stack)
#        fabric.sh link NAME HOST RAIL down|up
#                                         pull or plug the host's cable on
#                                         that rail (its switch port), so the
#                                         host sees carrier loss
#        fabric.sh down NAME              remove the fabric
#        fabric.sh cleanup STEM           remove every fabric whose NAME
#                                         starts with STEM (killed runs)
#        fabric.sh list                   fabrics present
#
# NAME is the run's unique prefix (e.g. "myproj-$$"): the namespaces are
# NAME-hN (hosts) and NAME-sw (the switch, holding the bridges br0, br1);
# every interface lives inside them, none in the caller's namespace, so
# parallel fabrics never collide and removing the namespaces removes all.
# Host N has interface ethR on rail R (0, 1) with address 10.231.(R+1).N/24
# (IPv4 only inside namespaces this script creates) and fd00:e7:R::N/64,
# and lo up.
#
# Each host's /dev/shm is a directory of STATE (default /dev/shm, a tmpfs)
# bind-mounted over /dev/shm in a private mount namespace for each command
# run with exec: every process of one host sees the same /dev/shm (the
# softrdma registry lives there), hosts see each other's never.
#
# Callers clean up with "down" from a trap on EXIT INT TERM; a run killed
# with SIGKILL leaves its namespaces behind, which "cleanup STEM" removes.
# Root only (CAP_SYS_ADMIN, CAP_NET_ADMIN).
set -u

state=${RDMAMSG_FABRIC_STATE:-/dev/shm}

die() {
	echo "fabric.sh: $*" >&2
	exit 1
}

ns_list() {
	ip netns list 2>/dev/null | sed 's/ .*//'
}

check() {
	if [ "$(id -u)" != 0 ]; then
		echo "not root: network namespaces need CAP_SYS_ADMIN"
		return 1
	fi
	for c in ip tc unshare mount; do
		command -v $c >/dev/null 2>&1 ||
			{ echo "$c not installed"; return 1; }
	done
	p=fabric-probe-$$
	if ! ip netns add "$p" 2>/dev/null; then
		echo "cannot create a network namespace (ip netns add failed)"
		return 1
	fi
	r=0
	if ! ip -n "$p" link add name va type veth peer name vb 2>/dev/null; then
		echo "cannot create veth pairs in a namespace"
		r=1
	elif ! ip -n "$p" link add name vbr type bridge 2>/dev/null; then
		echo "cannot create bridges in a namespace"
		r=1
	elif ! ip netns exec "$p" unshare --mount --propagation private \
		mount -t tmpfs fabric-probe /dev/shm 2>/dev/null; then
		echo "cannot mount a private /dev/shm in a namespace"
		r=1
	fi
	ip netns del "$p" 2>/dev/null
	return $r
}

down() {
	name=$1
	for ns in $(ns_list); do
		case $ns in
		"$name"-h[0-9]* | "$name"-sw)
			# what still runs on the host (a killed run's servers,
			# agents) goes with it
			ino=$(stat -L -c %i "/run/netns/$ns" 2>/dev/null)
			[ -n "$ino" ] && for f in /proc/[0-9]*/ns/net; do
				[ "$(stat -L -c %i "$f" 2>/dev/null)" = "$ino" ] &&
					f=${f#/proc/} && kill -KILL "${f%%/*}" 2>/dev/null
			done
			ip netns del "$ns" 2>/dev/null ;;
		esac
	done
	rm -rf "${state:?}/fabric-$name"
}

up() {
	name=$1
	hosts=$2
	rails=${3:-1}
	mtu=${4:-1500}
	case $hosts in '' | *[!0-9]*) die "HOSTS must be a number" ;; esac
	case $mtu in '' | *[!0-9]*) die "MTU must be a number" ;; esac
	[ "$mtu" -ge 68 ] && [ "$mtu" -le 65535 ] || die "MTU: 68 to 65535"
	[ "$hosts" -ge 1 ] && [ "$hosts" -le 200 ] || die "HOSTS: 1 to 200"
	[ "$rails" = 1 ] || [ "$rails" = 2 ] || die "RAILS: 1 or 2"
	case $name in '' | *[!A-Za-z0-9_.-]*) die "NAME: letters, digits, _.-" ;; esac
	if ns_list | grep -q "^$name-"; then
		die "a fabric $name exists already"
	fi
	sw=$name-sw
	# the state directory first, so that "cleanup" finds even a fabric
	# killed while it was being made
	mkdir -p "$state/fabric-$name" || die "cannot create $state/fabric-$name"
	echo "$hosts $rails" >"$state/fabric-$name/size"
	ip netns add "$sw" || die "ip netns add $sw failed"
	ip -n "$sw" link set lo up
	r=0
	while [ $r -lt "$rails" ]; do
		ip -n "$sw" link add name "br$r" type bridge || die "bridge br$r"
		# no STP: ports forward at once
		ip -n "$sw" link set "br$r" type bridge stp_state 0 forward_delay 0
		ip -n "$sw" link set "br$r" up
		r=$((r + 1))
	done
	h=1
	while [ "$h" -le "$hosts" ]; do
		ns=$name-h$h
		ip netns add "$ns" || die "ip netns add $ns failed"
		ip -n "$ns" link set lo up
		mkdir -p "$state/fabric-$name/h$h/shm"
		chmod 1777 "$state/fabric-$name/h$h/shm"
		r=0
		while [ $r -lt "$rails" ]; do
			ip -n "$sw" link add name "h${h}r$r" type veth peer name "eth$r" \
				netns "$ns" || die "veth of host $h rail $r"
			ip -n "$sw" link set "h${h}r$r" mtu "$mtu" master "br$r" up
			ip -n "$ns" link set "eth$r" mtu "$mtu"
			ip -n "$ns" addr add "10.231.$((r + 1)).$h/24" dev "eth$r"
			ip -n "$ns" addr add "fd00:e7:$r::$h/64" dev "eth$r" nodad
			ip -n "$ns" link set "eth$r" up
			r=$((r + 1))
		done
		h=$((h + 1))
	done
}

host_ns() {
	name=$1
	h=$2
	case $h in '' | *[!0-9]*) die "HOST must be a number" ;; esac
	ip netns list 2>/dev/null | grep -q "^$name-h$h\( \|$\)" ||
		die "no host $h in fabric $name"
	echo "$name-h$h"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
case $cmd in
check)
	check ;;
up)
	[ $# -ge 2 ] && [ $# -le 4 ] || die "usage: up NAME HOSTS [RAILS [MTU]]"
	up "$@" ;;
down)
	[ $# -eq 1 ] || die "usage: down NAME"
	down "$1" ;;
cleanup)
	[ $# -eq 1 ] && [ -n "$1" ] || die "usage: cleanup STEM"
	names=$(ns_list | sed -n "s/^\($1[A-Za-z0-9_.-]*\)-\(sw\|h[0-9]*\)\$/\1/p")
	for d in "$state"/fabric-"$1"*; do
		[ -d "$d" ] && names="$names ${d#"$state"/fabric-}"
	done
	for n in $(echo "$names" | tr ' ' '\n' | sort -u); do
		down "$n"
	done ;;
list)
	ns_list | sed -n 's/^\(.*\)-sw$/\1/p' ;;
addr)
	[ $# -ge 2 ] || die "usage: addr NAME HOST [RAIL]"
	echo "10.231.$((${3:-0} + 1)).$2" ;;
exec)
	[ $# -ge 3 ] || die "usage: exec NAME HOST CMD..."
	ns=$(host_ns "$1" "$2") || exit 1
	shm=$state/fabric-$1/h$2/shm
	shift 2
	# a private mount namespace per command, /dev/shm the host's own
	exec ip netns exec "$ns" unshare --mount --propagation private \
		sh -c 'mount --bind "$0" /dev/shm && exec "$@"' "$shm" "$@" ;;
netem)
	[ $# -ge 4 ] || die "usage: netem NAME HOST RAIL ARGS...|off"
	ns=$(host_ns "$1" "$2") || exit 1
	dev=eth$3
	shift 3
	if [ "$1" = off ]; then
		tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null
		exit 0
	fi
	if ! err=$(tc -n "$ns" qdisc replace dev "$dev" root netem "$@" 2>&1); then
		case $err in
		*"qdisc kind is unknown"*)
			die "netem: this kernel has no sch_netem (tc: $err)" ;;
		esac
		die "netem $*: $err"
	fi ;;
loss)
	[ $# -eq 4 ] || die "usage: loss NAME HOST RAIL PERCENT|off"
	ns=$(host_ns "$1" "$2") || exit 1
	sw=$1-sw
	devs="$ns eth$3
$sw h${2}r$3"
	if [ "$4" = off ]; then
		echo "$devs" | while read -r n d; do
			tc -n "$n" qdisc del dev "$d" root 2>/dev/null
			tc -n "$n" qdisc del dev "$d" clsact 2>/dev/null
		done
		exit 0
	fi
	case $4 in '' | *[!0-9]*) die "PERCENT must be a number" ;; esac
	[ "$4" -ge 1 ] && [ "$4" -le 99 ] || die "PERCENT: 1 to 99"
	if sh "$0" netem-available; then
		echo "$devs" | while read -r n d; do
			tc -n "$n" qdisc replace dev "$d" root netem loss "$4%" ||
				exit 1
		done || die "netem loss $4% failed"
		echo "netem loss $4%"
	else
		# classic BPF, direct action: A = a random u32 (SKF_AD_RANDOM);
		# below PERCENT/100 of 2^32 return TC_ACT_SHOT (2), else OK (0)
		t=$(($4 * 42949672))
		echo "$devs" | while read -r n d; do
			tc -n "$n" qdisc replace dev "$d" clsact &&
				tc -n "$n" filter replace dev "$d" egress pref 1 \
					bpf da bytecode \
					"4,32 0 0 4294963256,53 0 1 $t,6 0 0 0,6 0 0 2," ||
				exit 1
		done || die "random drop filter failed"
		echo "tc random drop $4% (no sch_netem here)"
	fi ;;
netem-available)
	# exit 0 when tc netem works here (probed in a scratch namespace)
	p=fabric-netem-probe-$$
	ip netns add "$p" 2>/dev/null || exit 1
	ip -n "$p" link add name va type veth peer name vb 2>/dev/null &&
		tc -n "$p" qdisc add dev va root netem delay 1ms 2>/dev/null
	r=$?
	ip netns del "$p"
	exit $r ;;
drop)
	[ $# -eq 4 ] || die "usage: drop NAME HOST RAIL on|off"
	ns=$(host_ns "$1" "$2") || exit 1
	dev=eth$3
	case $4 in
	on)
		tc -n "$ns" qdisc replace dev "$dev" clsact || exit 1
		# classic BPF, direct action: return TC_ACT_SHOT (2)
		tc -n "$ns" filter replace dev "$dev" egress pref 1 bpf da \
			bytecode '1,6 0 0 2,' ;;
	off)
		tc -n "$ns" qdisc del dev "$dev" clsact 2>/dev/null
		exit 0 ;;
	*) die "drop: on or off" ;;
	esac ;;
blackhole)
	[ $# -eq 3 ] || die "usage: blackhole NAME RAIL on|off"
	case $2 in 0 | 1) ;; *) die "blackhole: RAIL 0 or 1" ;; esac
	case $3 in on) st=down ;; off) st=up ;; *) die "blackhole: on or off" ;; esac
	# a bridge that is down disables its ports: frames die there
	ip -n "$1-sw" link set "br$2" "$st" ;;
link)
	[ $# -eq 4 ] || die "usage: link NAME HOST RAIL down|up"
	host_ns "$1" "$2" >/dev/null || exit 1
	case $4 in down | up) ;; *) die "link: down or up" ;; esac
	ip -n "$1-sw" link set "h$2r$3" "$4" ;;
*)
	sed -n '2,/^set -u/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
	exit 2 ;;
esac
