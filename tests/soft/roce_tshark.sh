#!/bin/sh
# roce_tshark.sh -- the RoCE v2 codec checked by a decoder nobody here
# wrote: tests/soft/roce_codec --pcap writes Ethernet/IPv4 and IPv6/UDP 4791
# frames, one per opcode and header kind, and tshark (Debian package) must
# decode each as InfiniBand with the opcode and PSN we put in, and report
# nothing malformed.
#
# tshark 4.0 (Debian 12) shows the invariant CRC but does not verify it (no
# preference, no expert info), so the ICRC is checked here by an
# independent CRC-32 (Python's zlib) over the masked fields of the IBA
# annex A17, on the bytes tshark reads; the last frame carries a corrupted
# ICRC, which that check must flag.  tshark 4.0 names no ATOMIC_WRITE
# (0x1d, IBA 1.5): it shows that opcode and the PSN, and the rest of the
# packet as "unknown" data without an ICRC field; its ICRC is still
# checked by zlib, as an XRC packet's.  It names the XRC opcodes (0xa0-0xb7)
# but parses nothing past their BTH: it shows the rest as vendor data, and
# an XRC request's must begin with the XRCETH (a zero byte, the SRQ number),
# before any RETH or AtomicETH.
#
# The payload dissector rpcordma claims arbitrary payload bytes as
# RPC-over-RDMA and then calls them malformed: it is turned off, the
# InfiniBand dissector itself is not.
. "$top_srcdir/tests/lib.sh"
command -v tshark >/dev/null 2>&1 ||
	skip_all "tshark not installed (Debian package tshark)"
command -v python3 >/dev/null 2>&1 || skip_all "python3 not installed"
codec=$top_builddir/tests/soft/roce_codec
[ -x "$codec" ] || skip_all "tests/soft/roce_codec not built"

pcap=$tap_tmp/roce.pcap
"$codec" --pcap "$pcap" >"$tap_tmp/want"
ok $? "roce_codec wrote the capture"
nwant=$(wc -l <"$tap_tmp/want")
[ "$nwant" -ge 123 ]
ok $? "it holds $nwant frames (61 opcodes over IPv4 and IPv6, one bad)"

tsh() {
	HOME=$tap_tmp tshark -n --disable-protocol rpcordma \
		-r "$pcap" "$@" 2>"$tap_tmp/tshark.err"
}

tsh -T fields -E separator=' ' -e frame.number -e udp.dstport \
	-e infiniband.bth.opcode -e infiniband.bth.psn >"$tap_tmp/got"
ok $? "tshark reads it"
show_log "$tap_tmp/tshark.err"
# want: "N 0xOP PSN GOOD|BAD"; got: "N 4791 OP PSN"
bad=0
while read -r n op psn _; do
	line=$(sed -n "${n}p" "$tap_tmp/got")
	if [ "$line" != "$n 4791 $((op)) $psn" ]; then
		diag "frame $n: want '$n 4791 $((op)) $psn', tshark: '$line'"
		bad=$((bad + 1))
	fi
done <"$tap_tmp/want"
[ $bad -eq 0 ]
ok $? "every frame decodes as InfiniBand on UDP 4791 with our opcode and PSN"

# want: "N 0xOP PSN GOOD SRQN" for an XRC request; got: "N VENDOR-HEX"
tsh -T fields -E separator=' ' -e frame.number -e infiniband.vendor \
	>"$tap_tmp/vendor"
bad=0 nx=0
while read -r n op psn _ srqn; do
	[ -n "$srqn" ] || continue
	nx=$((nx + 1))
	want=$(printf '00%06x' "$srqn")
	line=$(sed -n "${n}p" "$tap_tmp/vendor")
	case ${line#"$n "} in
	"$want"*) ;;
	*)
		diag "frame $n ($op): want XRCETH $want, tshark: '$line'"
		bad=$((bad + 1))
		;;
	esac
done <"$tap_tmp/want"
[ $bad -eq 0 ] && [ $nx -eq 34 ]
ok $? "XRC requests ($nx): the XRCETH (SRQ number) right after the BTH"

tsh -V >"$tap_tmp/verbose"
n=$(grep -c '^InfiniBand$' "$tap_tmp/verbose")
[ "$n" -eq "$nwant" ]
ok $? "tshark -V: $n InfiniBand sections, want $nwant"
[ "$n" -gt 0 ] &&
	! grep -Eiq 'malformed|exception|bad checksum|\[Expert Info \((Error|Warning)' \
		"$tap_tmp/verbose"
ok $? "tshark -V: nothing malformed, no error or warning"
grep -Ei -m5 'malformed|exception|Expert Info' "$tap_tmp/verbose" |
	sed 's/^/#   /'

# ICRC by an independent implementation, over the frames as tshark reads
# them (raw bytes exported by tshark itself)
tsh -T fields -e frame.number -e infiniband.invariant.crc \
	>"$tap_tmp/icrc"
python3 - "$pcap" "$tap_tmp/want" "$tap_tmp/icrc" >"$tap_tmp/py" 2>&1 <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
want = [l.split() for l in open(sys.argv[2])]
shown = {}
for l in open(sys.argv[3]):
    f = l.split()
    if len(f) == 2:
        shown[int(f[0])] = int(f[1], 16)
off, n, fails = 24, 0, 0
while off < len(data):
    _, _, incl, _ = struct.unpack_from("<IIII", data, off)
    frame = data[off + 16: off + 16 + incl]
    off += 16 + incl
    n += 1
    ethertype = frame[12:14]
    ip = bytearray(frame[14:])
    if ethertype == b"\x08\x00":
        hl = 20
        ip[1] = 0xff; ip[8] = 0xff; ip[10] = ip[11] = 0xff
    else:
        hl = 40
        ip[0] |= 0x0f; ip[1] = ip[2] = ip[3] = 0xff; ip[7] = 0xff
    ip[hl + 6] = ip[hl + 7] = 0xff
    ip[hl + 8 + 4] = 0xff
    crc = zlib.crc32(b"\xff" * 8 + bytes(ip[:-4]))
    have = struct.unpack("<I", bytes(ip[-4:]))[0]
    good = crc == have
    # tshark shows the ICRC field as read from the wire: least
    # significant byte first on the wire, so its value is the
    # big-endian reading of the four bytes
    t = shown.get(n)
    op = int(want[n - 1][1], 16)
    if t is None and (op == 0x1d or op & 0xe0 == 0xa0):
        pass  # ATOMIC_WRITE, XRC: tshark 4.0 stops at the BTH
    elif t != struct.unpack(">I", bytes(ip[-4:]))[0]:
        print("frame %d: tshark shows ICRC %r" % (n, t)); fails += 1
    if good != (want[n - 1][3] == "GOOD"):
        print("frame %d: ICRC %08x, computed %08x, want %s" %
              (n, have, crc, want[n - 1][3])); fails += 1
print("frames", n, "fails", fails)
sys.exit(1 if fails or n != len(want) else 0)
PY
ok $? "ICRC: every good frame verifies by zlib, the corrupted one does not"
show_log "$tap_tmp/py"
done_testing
