"""The egress forwarder: what relays a sandbox's `127.0.0.1:3128` to the bot's egress proxy.

The sandbox has its own network namespace with nothing but loopback, and the proxy listens on a
Unix socket bound read-only into it (`bot.network.route`). Before setup's commands (or an
agent's command) run, the shell line `forwarder_command` makes starts a small forwarder there:
it listens on `127.0.0.1:<port>` before the line returns (the command's first connection is
never refused), then serves in the background: each connection is relayed to the proxy's
socket both ways, each way ending with a half-close (a client that has sent its request still
gets the answer), a client the proxy cannot take is closed, and many tunnels run at once. It
dies with the sandbox.

It runs before every confined agent and setup run where the server cannot make the proxy's
socket in the sandbox itself (`bot.network.netns`: a server that is not root), so it is kept
cheap: **perl** when the tool PATH has it (~3 ms to start; `perl-base` is on every Debian and
Ubuntu system), with no module at all (the socket calls are perl's own), else **python3** with
its C modules alone (~11 ms).
Neither reads a file: the code is on the command line. The variables that would change either
(`PERL5OPT`, `PERL5LIB`, `PERLIO`, …; `PYTHONPATH`, …) are set aside for it (perl's emptied for
its command, `-C0`; Python's by `-I -S`), since setup's and the agent's environment are the
repository's or the agent's: a forwarder that failed to start would fail the run.
"""

from __future__ import annotations

import shlex
from pathlib import Path

PROXY_PORT = 3128
"""Where the forwarder listens inside setup's (or the agent's) own network namespace."""

PERL = r"""
my ($path, $port) = @ARGV;
socket(my $server, 2, 1, 0) or die "socket: $!\n";  # AF_INET, SOCK_STREAM
bind($server, pack("S n C4 x8", 2, $port, 127, 0, 0, 1)) or die "bind: $!\n";
listen($server, 64) or die "listen: $!\n";
my $pid = fork() // die "fork: $!\n";
exit 0 if $pid;  # listening: the line goes on
setpgrp(0, 0);
open(STDIN, "<", "/dev/null"); open(STDOUT, ">", "/dev/null"); open(STDERR, ">", "/dev/null");
$SIG{CHLD} = "IGNORE";  # children reaped by the kernel
$SIG{PIPE} = "IGNORE";  # a write to a closed socket fails
while (1) {
    accept(my $client, $server) or next;
    my $child = fork();
    if (!defined $child || $child) { close($client); next; }
    close($server);
    socket(my $up, 1, 1, 0) or exit 0;  # AF_UNIX, SOCK_STREAM
    connect($up, pack("S Z108", 1, $path)) or exit 0;  # no proxy: the client is closed
    my @ways = ([$client, $up, 1], [$up, $client, 1]);  # from, to, open
    while (grep { $_->[2] } @ways) {
        my $wanted = "";
        vec($wanted, fileno($_->[0]), 1) = 1 for grep { $_->[2] } @ways;
        select(my $ready = $wanted, undef, undef, undef) > 0 or next;
        for my $way (grep { $_->[2] && vec($ready, fileno($_->[0]), 1) } @ways) {
            my ($from, $to) = @$way;
            my $got = sysread($from, my $data, 65536);
            my $sent = 0;
            while ($got && $sent < $got) {
                my $wrote = syswrite($to, $data, $got - $sent, $sent);
                last unless $wrote;
                $sent += $wrote;
            }
            next if $got && $sent == $got;
            $way->[2] = 0;  # this way has ended:
            shutdown($to, 1);  # its half-close
        }
    }
    exit 0;
}
"""
"""The forwarder in perl, without a module (the constants are Linux's, where bubblewrap runs):
forks once listening, then a process per connection relays both ways with `select`."""

PYTHON = """\
import _socket, _thread, posix, sys
path, port = sys.argv[1], int(sys.argv[2])
server = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
server.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", port))
server.listen(64)
if posix.fork():
    posix._exit(0)
posix.setsid()
null = posix.open("/dev/null", posix.O_RDWR)
for fd in (0, 1, 2):
    posix.dup2(null, fd)


def pipe(src, dst, then):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(_socket.SHUT_WR)
    except OSError:
        pass
    then()


def serve(fd):
    client = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM, 0, fd)
    upstream = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    done = _thread.allocate_lock()
    done.acquire()
    _thread.start_new_thread(pipe, (client, upstream, done.release))
    pipe(upstream, client, done.acquire)  # then waits until the other way has ended too
    client.close()
    upstream.close()


while True:
    fd, _ = server._accept()
    _thread.start_new_thread(serve, (fd,))
"""
"""The forwarder in Python, for a sandbox without perl: listens, forks, then relays each connection
with a thread per direction, each ending its side with a half-close. Python's start without
`site` (`-I -S`: nor the sandbox's `PYTHON*` variables, nor its site-packages), and the C
modules alone (`_socket`, `_thread`, `posix`: no `socket`, `threading`, `enum` or `selectors`)."""
PYTHON_START = "python3 -I -S"
"""How the Python forwarder starts (`-I`: no `PYTHON*` variable, no user site, and with `-c`
not the working directory, the worktree, on its path; `-S`: no site-packages, whose `.pth`
files run code at start)."""
PERL_START = "PERL5OPT= PERL5LIB= PERLLIB= PERLIO= PERL5DB= perl -C0"
"""How the perl forwarder starts: the variables that would load modules or change its I/O
emptied for its command alone, and no Unicode layers (`-C0`, whatever `PERL_UNICODE` says)."""


_PERL_QUOTED, _PYTHON_QUOTED = shlex.quote(PERL), shlex.quote(PYTHON)


def forwarder_command(folder: Path, port: int = PROXY_PORT, *, who: str = "setup") -> str:
    """The shell line that starts the forwarder (to the proxy's socket in `folder`) before setup's
    commands: perl's when the PATH has perl, else (or when that perl cannot run it: one from a
    tool directory without its library, say) Python's. Nothing is written for it."""
    args = f"{shlex.quote(f'{folder}/proxy.sock')} {port}"
    return (
        f"if command -v perl >/dev/null 2>&1 && {PERL_START} -e {_PERL_QUOTED} {args}; then :; "
        f"else {PYTHON_START} -c {_PYTHON_QUOTED} {args} || "
        f"{{ echo 'Plan Cascade: cannot start the {who} egress forwarder (perl or python3 on PATH?)' >&2; "
        "exit 97; }; fi\n"
    )
