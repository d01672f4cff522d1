# Sourced by the tests' scripts that run clients, one after another, against one `iperf3 -s`.
# iperf3 takes every connection for a test, and after each test it closes its listening socket
# before it opens a new one: a client (or a probe connection) that comes in between is refused
# or reset (seen in CI). So the server runs with --forceflush, its output going to $IPERF3_LOG,
# and each client starts only once the server has announced the test it will serve:
# "Server listening on PORT (test #N)".
iperf3_tests=0

# Waits (10 s at most) until the server listens for the next test.
iperf3_next() {
    iperf3_tests=$((iperf3_tests + 1))
    iperf3_i=0
    until grep -qF "(test #$iperf3_tests)" "$IPERF3_LOG" 2>/dev/null; do
        iperf3_i=$((iperf3_i + 1))
        if [ $iperf3_i -gt 200 ]; then
            echo "iperf3 -s did not listen for test #$iperf3_tests within 10 s" >&2
            return 1
        fi
        sleep 0.05
    done
}

# `iperf3 -c ARGS`, once the server listens for it.
iperf3c() {
    iperf3_next && iperf3 -c "$@"
}
