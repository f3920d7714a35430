#!/bin/sh
# readme-example.sh -- the README's example is samples/hello/hello.c, and it
# works: it gets its message echoed by samples/echo_server over softrdma
. "$top_srcdir/tests/lib.sh"

awk '/^```c$/ {on = 1; next} /^```$/ {if (on) exit} on' \
	"$top_srcdir/README.md" >"$tap_tmp/readme.c"
cmp -s "$tap_tmp/readme.c" "$top_srcdir/samples/hello/hello.c"
ok $? "README example is samples/hello/hello.c"

export SOFTRDMA_SHM_PREFIX="readme-$$"
port=$(free_port)
mkfifo "$tap_tmp/stdin"
# Opened read-write first so that neither end blocks; the server reads it.
exec 3<>"$tap_tmp/stdin"
"$top_builddir/samples/echo_server/echo_server" -p "$port" -i 0 \
	<"$tap_tmp/stdin" >"$tap_tmp/server.out" 2>&1 &
server=$!
tap_pids="$tap_pids $server"
wait_port "$port" 10
ok $? "echo_server listens on $port"

timeout 30 "$top_builddir/samples/hello/hello" "127.0.0.1:$port" \
	>"$tap_tmp/hello.out" 2>&1
ok $? "hello exits 0"
grep -qx "echo: hello" "$tap_tmp/hello.out"
ok $? "hello prints the echo"
show_log "$tap_tmp/hello.out"

echo quit >&3
exec 3>&-
i=0
while kill -0 "$server" 2>/dev/null && [ $i -lt 100 ]; do
	sleep 0.1
	i=$((i + 1))
done
wait "$server"
ok $? "echo_server quits when told, exit status 0"
show_log "$tap_tmp/server.out"
done_testing
