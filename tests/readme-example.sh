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
start_echo_server "$port"
ok $? "echo_server listens on $port"

timeout -k 10 30 "$top_builddir/samples/hello/hello" "127.0.0.1:$port" \
	>"$tap_tmp/hello.out" 2>&1
ok $? "hello exits 0"
grep -qx "echo: hello" "$tap_tmp/hello.out"
ok $? "hello prints the echo"
show_log "$tap_tmp/hello.out"

stop_echo_server
ok $? "echo_server quits when told, exit status 0"
show_log "$tap_tmp/echo_server.out"
done_testing
