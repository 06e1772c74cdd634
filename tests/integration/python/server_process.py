"""Starts docsparse-server on loopback for the Python client tests.

Standard library only: the KServe SDK test runs in a venv without grpcio-tools.
"""
import re
import subprocess
import time


def start_server(binary, repository, flags=()):
    """Runs `binary` on free loopback ports with `flags`; returns (process,
    gRPC address) once it printed "ready", or raises with what it printed."""
    proc = subprocess.Popen(
        [binary, "--host=127.0.0.1", "--port=0", "--metrics_port=0",
         f"--model_repository={repository}", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    address = None
    deadline = time.time() + 120
    output = []
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        output.append(line)
        match = re.search(r"listening grpc=(\S+)", line)
        if match:
            address = match.group(1)
        if "docsparse-server: ready" in line:
            return proc, address
    proc.kill()
    raise RuntimeError("server did not become ready:\n" + "".join(output))
