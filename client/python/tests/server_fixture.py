"""One real docsparse-server on loopback for the whole test run.

The repository it serves is a temporary folder: a link to every model folder
of $DOCSPARSE_MODEL_REPOSITORY (default: models/ of the source tree) and
`bart`, the tiny random-weight BART of tests/fixtures/seq2seq/bart (the
default repository has no abstractive model, and only those stream token by
token). The server binary is $DOCSPARSE_SERVER_BINARY (default:
build/server/docsparse-server). Started by tests/integration/python/
server_process.py, as the other Python client tests start it.
"""
import atexit
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

SOURCE_DIR = Path(os.environ.get("DOCSPARSE_SOURCE_DIR") or Path(__file__).resolve().parents[3])
GPL3 = Path("/usr/share/common-licenses/GPL-3")
BART_FIXTURE = SOURCE_DIR / "tests" / "fixtures" / "seq2seq" / "bart"

sys.path.insert(0, str(SOURCE_DIR / "tests" / "integration" / "python"))
import server_process  # noqa: E402


class RunningServer:
    def __init__(self, process, address, repository):
        self.process = process
        self.address = address
        self.repository = repository
        # The server's last lines, for failure messages; a thread keeps the
        # pipe drained so that a chatty server never blocks on it.
        self.output = collections.deque(maxlen=200)
        self._drain = threading.Thread(target=self._read_output, daemon=True)
        self._drain.start()

    def _read_output(self):
        for line in self.process.stdout:
            self.output.append(line)

    def stop(self):
        """SIGTERM (the server drains and exits 0); SIGKILL after 30 s."""
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.repository, ignore_errors=True)


def _make_repository():
    models = Path(os.environ.get("DOCSPARSE_MODEL_REPOSITORY") or SOURCE_DIR / "models")
    repository = Path(tempfile.mkdtemp(prefix="docsparse-client-repository."))
    try:
        for model in sorted(models.iterdir()):
            if (model / "docsparse.json").is_file():
                (repository / model.name).symlink_to(model.resolve(), target_is_directory=True)
        bart = repository / "bart"
        shutil.copytree(BART_FIXTURE, bart)
        (bart / "docsparse.json").write_text(json.dumps({"tasks": ["summarize"]}))
    except BaseException:
        shutil.rmtree(repository, ignore_errors=True)
        raise
    return repository


_server = None


def shared_server():
    """The running server, started on first use and stopped at exit."""
    global _server
    if _server is None:
        binary = os.environ.get("DOCSPARSE_SERVER_BINARY") or str(
            SOURCE_DIR / "build" / "server" / "docsparse-server")
        repository = _make_repository()
        try:
            process, address = server_process.start_server(binary, str(repository),
                                                           ["--threads=2"])
        except Exception:
            shutil.rmtree(repository, ignore_errors=True)
            raise
        _server = RunningServer(process, address, repository)
        atexit.register(_server.stop)
    return _server
