"""Makes the trial's mocks reachable inside a sandbox with the network off (standalone: stdlib
only, copied into the trial's mock folder; never imported by Proctor itself).

    python3 netbridge.py PORT=SOCKET [PORT=SOCKET ...] -- COMMAND [ARG ...]

The sandbox has its own network namespace with only loopback in it. This listens on
127.0.0.1:PORT there for each mock, forwards every connection to the mock's unix socket (bound
into the sandbox from the host), then runs COMMAND and exits with its status. Nothing else of
the host's network is reachable: a unix socket is a file, not a route.
"""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading


def pump(source, target):
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)


def forward(client, path):
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        return
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def serve(listener, path):
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=forward, args=(client, path), daemon=True).start()


def main(argv):
    split = argv.index("--")
    routes, command = argv[:split], argv[split + 1 :]
    for route in routes:
        port, _, path = route.partition("=")
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind(("127.0.0.1", int(port)))
        except OSError as exc:
            # The network is shared after all (the port is the host's own mock): nothing to do.
            if exc.errno != 98:
                raise
            listener.close()
            continue
        listener.listen(64)
        threading.Thread(target=serve, args=(listener, path), daemon=True).start()
    try:
        child = subprocess.Popen(command)
    except FileNotFoundError:
        sys.stderr.write(f"could not start {command[0]}: not found\n")
        return 127
    except PermissionError:
        sys.stderr.write(f"could not start {command[0]}: cannot be executed\n")
        return 127
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda number, _frame: child.send_signal(number))
    status = child.wait()
    return 128 - status if status < 0 else status


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv[1:]))
