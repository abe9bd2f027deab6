# A TCP proxy for one Redis client that forwards each command to server A
# and, once the client's Nth EVALSHA has been answered, to server B: a
# failover behind a proxy that keeps the client's connection open
# (facility_script.rs). Usage: switch_proxy.py LISTEN_PORT A_PORT B_PORT N
# Prints "ready" once listening.
import socket
import sys
import threading

listen, a, b, switch_after = (int(v) for v in sys.argv[1:5])


def read_value(f):
    """One RESP value, as its bytes."""
    line = f.readline()
    if not line:
        raise EOFError
    out, kind = line, line[:1]
    if kind in (b"+", b"-", b":"):
        return out
    if kind == b"$":
        n = int(line[1:-2])
        return out + (f.read(n + 2) if n >= 0 else b"")
    if kind == b"*":
        for _ in range(max(int(line[1:-2]), 0)):
            out += read_value(f)
        return out
    raise ValueError(f"not RESP: {line!r}")


def serve(client):
    commands = client.makefile("rb")
    servers = []
    for port in (a, b):
        s = socket.create_connection(("127.0.0.1", port))
        servers.append((s, s.makefile("rb")))
    evalshas, current = 0, 0
    while True:
        try:
            command = read_value(commands)
        except (EOFError, ValueError, OSError):
            break
        name = command.split(b"\r\n")[2].upper() if command.startswith(b"*") else b""
        s, replies = servers[current]
        s.sendall(command)
        client.sendall(read_value(replies))
        if name == b"EVALSHA":
            evalshas += 1
            if evalshas == switch_after:
                current = 1


server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", listen))
server.listen(8)
print("ready", flush=True)
while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
