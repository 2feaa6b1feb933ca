#!/usr/bin/env bash
# A server banner with escape sequences reaches gpufleet's messages only
# escaped: a fake SSH server on 127.0.0.1 answers with an SSH-1.5 version
# string holding an OSC title and a clear-screen, which libssh quotes in
# its error; exec (default and --gather) and status show it as \e...
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "python3 is needed for the fake server" >&2; exit 1; }
cat >"$T/srv.py" <<'EOF'
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
import os
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
while True:
    c, _ = s.accept()
    try:
        c.sendall(b"SSH-1.5-evil\x1b]0;title\x07\x1b[2J\r\n")
        c.recv(4096)
    except OSError:
        pass
    c.close()
EOF
python3 "$T/srv.py" "$T/port" &
srv=$!
cleanup_hooks+=("kill $srv")
for _ in $(seq 100); do [ -s "$T/port" ] && break; sleep 0.1; done
port=$(cat "$T/port")
mkdir -p "$HOME/.ssh"
ssh-keygen -q -t ed25519 -N '' -f "$HOME/.ssh/id_ed25519"
run add evil "127.0.0.1:$port"
expect_rc 0 "add the fake server"

want='(banner: SSH-1.5-evil\e]0;title\a\e[2J)'
raw=$'\033]0;title'
run exec evil -- true
expect_rc 1 "exec fails on the fake server"
expect_match "$err" "^gpufleet: evil: .*banner: SSH-1.5-evil" "the failure quotes the banner"
expect_contains "$err" "$want" "the banner is shown escaped in the message"
expect_contains "$err" "gpufleet: exec: 1 host: 0 ok" "the summary still follows"
checks=$((checks + 1))
case $err in *"$raw"*) fail "raw banner in exec's message" ;; esac

run exec evil -b -- true
expect_match "$out" "^  evil: .*banner: SSH-1.5-evil" "gather lists the reason"
expect_contains "$out" "$want" "gather header escaped"
checks=$((checks + 1))
case $out in *"$raw"*) fail "raw banner in exec --gather" ;; esac

run status evil
expect_contains "$out" "$want" "status table escaped"
checks=$((checks + 1))
case $out in *"$raw"*) fail "raw banner in the status table" ;; esac
finish
