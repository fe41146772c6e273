#!/usr/bin/env python3
"""A stand-in for NCCL's RAS client service, for tests/e2e/ras.sh.

Usage: ras_server.py PORTFILE LOGFILE [json|text]

Listens on 127.0.0.1 (a free port, written to PORTFILE), and answers as NCCL
2.28.9 does (src/ras/client_support.cc): "CLIENT PROTOCOL <n>" gets
"SERVER PROTOCOL 2", "SET FORMAT json" gets "OK" (mode json) or, as before
2.28.7, "ERROR: Invalid format json" (mode text), and "VERBOSE STATUS" gets
the status report, after which the connection is closed. Each connection and each
command is appended to LOGFILE.
"""
import os
import socket
import sys

port_file, log_file = sys.argv[1], sys.argv[2]
mode = sys.argv[3] if len(sys.argv) > 3 else "json"
REPORT = {"json": '{"nccl_version": "2.28.9", "communicators": [{"hash": "5f3a", '
                  '"missing_ranks": [1], "status": "RUNNING"}]}\n',
          "text": "Communicators... (1 found)\n  Missing ranks: 1\n"}


def log(line):
    with open(log_file, "a") as f:
        f.write(line + "\n")


srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(8)
with open(port_file + ".tmp", "w") as f:
    f.write(str(srv.getsockname()[1]))
os.rename(port_file + ".tmp", port_file)
while True:
    conn, _ = srv.accept()
    log("connection")
    buf = b""
    fmt = "text"
    open_ = True
    while open_:
        data = conn.recv(4096)
        if not data:
            break
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            cmd = line.decode()
            log(cmd)
            if cmd.upper().startswith("CLIENT PROTOCOL "):
                conn.sendall(b"SERVER PROTOCOL 2\n")
            elif cmd.upper() == "SET FORMAT JSON":
                if mode == "json":
                    fmt = "json"
                    conn.sendall(b"OK\n")
                else:
                    conn.sendall(b"ERROR: Invalid format json\n")
            elif cmd.upper() == "VERBOSE STATUS":
                conn.sendall(REPORT[fmt].encode())
                open_ = False
                break
            else:
                conn.sendall(b"ERROR: Unknown command " + line + b"\n")
    conn.close()
