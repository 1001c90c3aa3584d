"""`sqlwin serve`: the Spark Thrift server (HiveServer2 protocol) speaking sqlwin SQL.

Spark's own Thrift server runs in-process; a parser extension (``server_java/``, compiled at
first use against the pyspark jars) sends each statement that mentions a sqlwin keyword to
Python, where :func:`sqlwin.pipeline.spark_sql_for` rewrites it for the *calling* session.
Every JDBC connection therefore gets its own SparkSession (temp views and settings cannot
leak between clients), with sqlwin's UDTFs registered on first use; metadata calls, fetching
and cancellation are Spark's own.
"""

from __future__ import annotations

import argparse
import hashlib
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlwin.errors import SqlwinError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

JAVA_DIR = Path(__file__).with_name("server_java")
ERROR_PREFIX = "\u0001sqlwin-error\u0001"  # must match SqlwinParser.ERROR_PREFIX
# A statement is sent to Python only when it contains one of these words (a superset is
# harmless: plain SQL comes back unchanged). Keep in step with GRAMMAR.md.
KEYWORDS = ("TUMBLE", "HOP", "CUMULATE", "SESSION", "DESCRIPTOR", "EMIT", "WATERMARK", "STREAM",
            "STREAMING", "LATENESS", "GRACE", "EVICT", "REWRITE", "PROCTIME", "TRIGGER")
KEYWORD_REGEX = r"\b(" + "|".join(KEYWORDS) + r")\b"

RewriteFn = Callable[["SparkSession", str], str]


def _jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def compile_java(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """Compile ``server_java/*.java`` once per source version; return the classes directory.

    Binaries are never shipped: the cache key is a hash of the sources and the Spark jars in
    use, so upgrading either recompiles. Compilation goes to a temp dir renamed into place,
    so concurrent first starts do not see half-written classes.
    """
    sources = sorted(JAVA_DIR.glob("*.java"))
    digest = hashlib.sha256()
    for src in sources:
        digest.update(src.name.encode() + b"\0" + src.read_bytes())
    jars = _jars_dir()
    digest.update(" ".join(sorted(p.name for p in jars.glob("spark-*.jar"))).encode())
    root = Path(cache_dir or os.environ.get("SQLWIN_CACHE_DIR") or Path.home() / ".cache" / "sqlwin")
    target = root / f"server-classes-{digest.hexdigest()[:16]}"
    if (target / "sqlwin" / "SqlwinParser.class").exists():
        return target
    javac = shutil.which("javac") or str(Path(os.environ.get("JAVA_HOME", "/nonexistent")) / "bin" / "javac")
    if not os.access(javac, os.X_OK):
        raise SqlwinError("sqlwin serve compiles a small Spark parser extension and needs a JDK: "
                          "no javac on PATH or in $JAVA_HOME/bin")
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="classes-", dir=root))
    cmd = [str(javac), "-nowarn", "-encoding", "UTF-8", "-d", str(tmp), "-cp", f"{jars}/*",
           *map(str, sources)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SqlwinError(f"javac failed on {JAVA_DIR}:\n{proc.stderr}")
    try:
        tmp.rename(target)
    except OSError:  # another process won the race: use its copy
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _default_rewrite(spark: SparkSession, text: str) -> str:
    from sqlwin.pipeline import spark_sql_for

    return spark_sql_for(spark, text)


# A call of one of sqlwin's generic UDTFs (``udtfs.GENERIC``) from plain Spark SQL.
_GENERIC_CALL = re.compile(r"\b(tumble|hop|cumulate|session)\s*\(", re.IGNORECASE)


class _Rewriter:
    """The py4j callback behind ``sqlwin.Rewriter``: rewrites one statement for one session."""

    MAX_SESSIONS = 64  # pyspark wrappers kept (each pins its JVM session until evicted)

    def __init__(self, sc: Any, rewrite: RewriteFn):
        self._sc = sc
        self._rewrite = rewrite
        self._lock = threading.Lock()
        # sessionUUID -> [wrapper, generic UDTFs registered?, statements of it being rewritten]
        self._sessions: OrderedDict[str, list[Any]] = OrderedDict()
        self._routed: list[str] = []  # the stream names the parser's pattern holds besides the keywords

    def _session(self, jsession: Any) -> list[Any]:
        """The pyspark wrapper of the calling JVM session (and whether sqlwin.register ran in it).

        Wrappers are reused (they carry the per-session registry of the UDTF plan) for the
        most recent sessions only, so closed JDBC sessions are not kept alive forever; a
        session whose wrapper was evicted just registers its functions again.
        """
        from pyspark.sql import SparkSession

        key = jsession.sessionUUID()
        with self._lock:
            entry = self._sessions.get(key)
            if entry is None:
                entry = self._sessions[key] = [SparkSession(self._sc, jsession), False, 0]
                while len(self._sessions) > self.MAX_SESSIONS:
                    self._sessions.popitem(last=False)
            self._sessions.move_to_end(key)
        return entry

    @staticmethod
    def _register(entry: list[Any]) -> None:
        """Register sqlwin's generic UDTFs in the session: only once a statement calls one,
        since it costs ~0.3 s of Python per session and most sessions never do."""
        if not entry[1]:
            from sqlwin.api import register

            register(entry[0])
            entry[1] = True

    def rewrite(self, sql: str, jsession: Any) -> str | None:
        try:
            entry = self._session(jsession)
            if not re.search(KEYWORD_REGEX, sql, re.IGNORECASE):  # sent for a stream's name: Spark SQL, checked
                if not entry[2]:  # not SQL sqlwin runs itself while it rewrites a statement of this session
                    from sqlwin.streaming.statements import check_plain_text

                    check_plain_text(entry[0], sql)
                return None
            entry[2] += 1
            try:
                out = self._rewrite(entry[0], sql)
            except SqlwinError:  # perhaps a generic UDTF inside a TVF's input: register, retry
                if entry[1] or not _GENERIC_CALL.search(sql):
                    raise
                self._register(entry)
                out = self._rewrite(entry[0], sql)
            finally:
                entry[2] -= 1
            if _GENERIC_CALL.search(out):  # plain Spark SQL calling tumble(TABLE(t), ...) & co
                self._register(entry)
        except SqlwinError as e:
            return ERROR_PREFIX + str(e)
        except Exception as e:  # never let a Python traceback kill the JDBC call
            return ERROR_PREFIX + f"sqlwin internal error: {type(e).__name__}: {e}"
        finally:
            self.route_stream_names()
        return None if out == sql else out

    def route_stream_names(self) -> None:
        """Have the parser send sqlwin the statements that name a stream (or a view over one) too, though they
        hold no sqlwin keyword: ``SELECT * FROM s`` is refused as ``sqlwin.sql`` refuses it (a live stream's
        rows are no table, a replay stream's are not its table's). Set again when the names change; a view's stored
        text (which Spark parses again whenever the view is read, even as a session closes) is not sent for them."""
        from sqlwin.streaming import catalog

        names = sorted(catalog.stream_names())
        if names == self._routed:
            return
        self._routed = names
        words = "".join(f"|(?<![\\w$]){re.escape(name)}(?![\\w$])" for name in names)
        self._sc._jvm.sqlwin.SqlwinParser.route(KEYWORD_REGEX + words)

    class Java:
        implements = ["sqlwin.Rewriter"]


@dataclass
class ServerHandle:
    """A running server: ``url`` for clients, ``stop()`` to shut it (and its Spark) down."""

    host: str
    port: int
    spark: SparkSession
    _jserver: Any = field(repr=False)
    _scratch: str | None = field(default=None, repr=False)  # removed on stop()
    _stopped: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def url(self) -> str:
        return f"jdbc:hive2://{self.host}:{self.port}/default"

    def stop(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        from sqlwin.streaming import registry

        registry.disable()  # the tables end with the server's Spark: they stay running in it, none marked failed
        jvm = self.spark.sparkContext._jvm
        try:
            jvm.sqlwin.SqlwinParser.uninstall()
            self._jserver.stop()
        finally:
            self.spark.stop()
            if self._scratch:
                shutil.rmtree(self._scratch, ignore_errors=True)

    def wait(self) -> None:
        """Block until :meth:`stop` has been called (from another thread)."""
        while not self._stopped.wait(0.5):
            pass


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# HiveServer2 reads these environment variables before its configuration: they would silently
# move the endpoint (e.g. to all interfaces, or to HTTP mode, which ignores the bind host).
_ENV_OVERRIDES = ("HIVE_SERVER2_TRANSPORT_MODE", "HIVE_SERVER2_THRIFT_BIND_HOST", "HIVE_SERVER2_THRIFT_PORT",
                  "HIVE_SERVER2_THRIFT_HTTP_PORT")
_PROTECTED_CONF = ("hive.server2.transport.mode", "hive.server2.thrift.bind.host", "hive.server2.thrift.port",
                   "hive.server2.authentication", "hive.server2.custom.authentication.class",
                   "spark.sql.hive.thriftServer.singleSession")


def _check_no_overrides(conf: dict[str, Any]) -> None:
    """Refuse settings that would change where or how the endpoint listens behind our back."""
    env = [name for name in _ENV_OVERRIDES if os.environ.get(name)]
    if env:
        raise SqlwinError(f"unset {', '.join(env)}: use --host/--port (binary transport only)")
    for key in conf:
        if any(key == name or key.endswith("." + name) for name in _PROTECTED_CONF):
            raise SqlwinError(f"--conf {key} is managed by sqlwin serve (use --host/--port/--auth-user)")


SCRATCH_PREFIX = "sqlwin-serve-"
OWNER_FILE = "owner.pid"  # the server process that made a scratch folder


def sweep_stale_scratch(folder: str) -> list[str]:
    """Remove the scratch folders (``SCRATCH_PREFIX``) of servers that are gone: ``stop()`` removes a server's
    own, but a server killed (SIGKILL, a crash) leaves it behind. A folder whose owner process is alive, or that
    names no owner (another version's), is kept. Returns the folders removed."""
    removed = []
    for entry in Path(folder).glob(f"{SCRATCH_PREFIX}*"):
        owner = entry / OWNER_FILE
        try:
            pid = int(owner.read_text().strip())
        except (OSError, ValueError):
            continue
        if not _alive(pid):
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(str(entry))
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def serve(host: str = "127.0.0.1", port: int = 10000, *, auth_user: str | None = None,
          auth_password: str | None = None, conf: dict[str, Any] | None = None,
          warehouse: str | None = None, metastore: str | None = None,
          rewrite: RewriteFn | None = None) -> ServerHandle:
    """Start a local Spark with the sqlwin parser and its Thrift server on ``host:port``.

    Binary transport only (Spark's HTTP mode ignores the bind host). A non-loopback ``host``
    requires ``auth_user``/``auth_password`` (HiveServer2 CUSTOM auth, SASL PLAIN).
    Tables live in Spark's in-memory catalog (gone when the server stops) unless ``metastore``
    names a folder: then a Hive catalog with a Derby metastore and the warehouse live there.
    ``rewrite`` replaces :func:`sqlwin.pipeline.spark_sql_for` (for tests of the hook itself).
    """
    if not _is_loopback(host) and not (auth_user and auth_password):
        raise SqlwinError(f"refusing to listen on non-loopback address {host} without "
                          "--auth-user and a password (SQLWIN_AUTH_PASSWORD)")
    if bool(auth_user) != bool(auth_password):
        raise SqlwinError("authentication needs both a user name and a password")
    _check_no_overrides(conf or {})
    from pyspark import SparkContext

    if SparkContext._active_spark_context is not None:
        raise SqlwinError("serve() must start its own Spark (the parser extension is set at JVM "
                          "launch): call it before any SparkSession exists, or use ServerProcess")
    classes = compile_java()
    if metastore:
        root = Path(metastore).resolve()
        root.mkdir(parents=True, exist_ok=True)
        warehouse = warehouse or str(root / "warehouse")
        conf = {"spark.sql.catalogImplementation": "hive",
                "spark.hadoop.javax.jdo.option.ConnectionURL":
                    f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
                "spark.driver.extraJavaOptions": f"-Dderby.system.home={root}",
                **(conf or {})}
    # Hive's scratch, resource and operation-log folders (default: /tmp, never cleaned) and,
    # without --warehouse/--metastore, the warehouse: one temp folder removed on stop().
    sweep_stale_scratch(tempfile.gettempdir())
    scratch = tempfile.mkdtemp(prefix=SCRATCH_PREFIX)
    Path(scratch, OWNER_FILE).write_text(str(os.getpid()))
    warehouse = warehouse or os.path.join(scratch, "warehouse")
    server_conf: dict[str, Any] = {
        "hive.exec.scratchdir": os.path.join(scratch, "hive"),
        "hive.exec.local.scratchdir": os.path.join(scratch, "local"),
        # one folder per Hive session, as Hive's default: a shared one races when sessions open
        # concurrently, and a closing session deletes it under the others
        "hive.downloaded.resources.dir": os.path.join(scratch, "${hive.session.id}_resources"),
        "hive.querylog.location": os.path.join(scratch, "querylog"),
        "hive.server2.logging.operation.log.location": os.path.join(scratch, "operation_logs"),
        "spark.driver.extraClassPath": str(classes),
        "spark.sql.extensions": "sqlwin.SqlwinExtensions",
        "spark.sql.warehouse.dir": warehouse,
        "spark.sql.hive.thriftServer.singleSession": "false",
        "hive.server2.thrift.bind.host": host,
        "hive.server2.thrift.port": str(port),
        "hive.server2.transport.mode": "binary",
        "hive.server2.authentication": "CUSTOM" if auth_user else "NONE",
        "hive.server2.enable.doAs": "false",
    }
    from sqlwin.session import local_session

    user_conf = dict(conf or {})
    # Other extensions (e.g. Delta Lake) stay; ours goes last so it sees the text first.
    for key, sep in (("spark.sql.extensions", ","), ("spark.driver.extraClassPath", os.pathsep)):
        if user_conf.get(key):
            server_conf[key] = f"{user_conf[key]}{sep}{server_conf[key]}"
    spark = local_session("sqlwin-server", {**user_conf, **server_conf})
    sc = spark.sparkContext
    jvm = sc._jvm
    if auth_user and auth_password:
        jvm.sqlwin.SqlwinAuth.configure(auth_user, hashlib.sha256(auth_password.encode()).hexdigest())
        # HiveServer2 2.3 builds the CUSTOM provider from a fresh HiveConf, which reads system
        # properties but not the session's configuration.
        jvm.java.lang.System.setProperty("hive.server2.custom.authentication.class", "sqlwin.SqlwinAuth")
    from pyspark.java_gateway import ensure_callback_server_started

    ensure_callback_server_started(sc._gateway)
    rewriter = _Rewriter(sc, rewrite or _default_rewrite)
    jvm.sqlwin.SqlwinParser.install(rewriter, KEYWORD_REGEX)
    jserver = jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2.startWithContext(
        spark._jsparkSession.sqlContext())
    handle = ServerHandle(host, port, spark, jserver, scratch)
    resume_streaming_tables(spark)
    rewriter.route_stream_names()  # the resumed tables' streams
    return handle


def resume_streaming_tables(spark: SparkSession) -> list[str]:
    """Keep a registry of the streaming tables this server runs (in its streaming root), and start again each one
    the registry says was running: in a session of its own, its streams' CREATE STREAM statements and then its own
    statement, which resume from its checkpoint (``sqlwin.streaming.registry``). A table that cannot start is
    reported on stderr, one line in the statement's terms, and the others still start. A table the registry marks
    failed is not started (it would fail again at every start): it is listed, failed with its error, until its
    statement is run again (the cause fixed) or it is dropped. The outputs of a table not started keep their views,
    but one whose folder someone deleted gets none (reported likewise). Returns the messages."""
    from sqlwin.pipeline import execute_statement
    from sqlwin.streaming import catalog, registry
    from sqlwin.streaming.storage import streaming_root

    root = streaming_root(spark)
    registry.enable(root)
    messages = []
    for entry in registry.entries(root):
        if entry.get("failed") or not entry.get("running"):  # not started: its outputs stay readable by name
            messages += _restore_views(spark, entry)
        if entry.get("failed"):
            failed = registry.FailedTable(spark, entry)
            catalog.add_table(failed)
            rerun = _RERUN.format(failed.name)
            message = f"streaming table {failed.name} not resumed: it failed: {failed.error} {rerun}"
            print(f"sqlwin serve: {message}", file=sys.stderr, flush=True)
            messages.append(message)
            continue
        if not entry.get("running"):
            continue
        session = spark.newSession()
        out = sys.stdout
        try:
            for key, value in entry.get("conf", {}).items():
                session.conf.set(key, value)
            for text in [*entry.get("streams", []), entry["statement"]]:
                result = execute_statement(session, text)
            message = f"resumed {result.message}"
        except Exception as err:  # SqlwinError, or Spark's: the server runs on, the table is listed failed
            error, out = str(err).splitlines()[0], sys.stderr
            started = catalog.find_table(entry["name"])
            if started is not None and started.is_active:  # it runs: what failed came after its start
                message = f"resumed streaming table {entry.get('name')}, but: {error}"
            else:
                catalog.add_table(registry.not_resumed(spark, entry, error))
                messages += _restore_views(spark, entry)
                message = (f"streaming table {entry.get('name')} not resumed: {error} "
                           f"{_RERUN.format(entry.get('name'))}")
        print(f"sqlwin serve: {message}", file=out, flush=True)
        messages.append(message)
    return messages


def _restore_views(spark: SparkSession, entry: dict) -> list[str]:
    """The views of a table the server does not run, as ``registry.restore_views``; returns (and prints on
    stderr) what could not be restored."""
    from sqlwin.streaming import registry

    name = entry.get("name")
    try:
        messages = [f"streaming table {name}: the view of {out['name']} not restored: its folder {out['path']} "
                    "is gone" for out in registry.restore_views(spark, entry)]
    except Exception as err:  # a file unreadable: the server runs on, the table's views with it
        messages = [f"streaming table {name}: its views not restored: {str(err).splitlines()[0]}"]
    for message in messages:
        print(f"sqlwin serve: {message}", file=sys.stderr, flush=True)
    return messages


_RERUN = ("(fix the cause and run its statement again, which resumes it from its checkpoint; or DROP STREAMING "
          "TABLE {})")


def main(argv: list[str] | None = None) -> int:
    """``sqlwin serve``: run until SIGINT/SIGTERM. Returns the process exit code."""
    parser = argparse.ArgumentParser(
        prog="sqlwin serve",
        description="Serve sqlwin SQL over JDBC/ODBC (HiveServer2 protocol: beeline, pyhive, dbt-spark).")
    parser.add_argument("--host", default=os.environ.get("SQLWIN_HOST", "127.0.0.1"),
                        help="bind address (default 127.0.0.1; others need --auth-user)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("SQLWIN_PORT", "10000")))
    parser.add_argument("--auth-user", default=os.environ.get("SQLWIN_AUTH_USER"),
                        help="require this user name (password from SQLWIN_AUTH_PASSWORD "
                             "or --auth-password-file)")
    parser.add_argument("--auth-password-file", help="file holding the password (first line)")
    parser.add_argument("--warehouse", help="spark.sql.warehouse.dir (default: a temp dir)")
    parser.add_argument("--metastore", metavar="DIR",
                        help="keep tables across restarts: Hive catalog, Derby metastore and warehouse in DIR")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="extra Spark/Hive configuration (repeatable)")
    args = parser.parse_args(argv)
    password = os.environ.get("SQLWIN_AUTH_PASSWORD")
    if args.auth_password_file:
        password = Path(args.auth_password_file).read_text().splitlines()[0]
    bad = [item for item in args.conf if "=" not in item]
    if bad:
        parser.error(f"--conf expects KEY=VALUE, got {bad[0]!r}")
    conf = dict(item.split("=", 1) for item in args.conf)
    try:
        handle = serve(args.host, args.port, auth_user=args.auth_user, auth_password=password,
                       conf=conf, warehouse=args.warehouse, metastore=args.metastore)
    except SqlwinError as e:
        print(f"sqlwin serve: {e}", file=sys.stderr)
        return 2
    stop_requested = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop_requested.set())
    signal.signal(signal.SIGINT, lambda signum, frame: stop_requested.set())
    print(f"sqlwin serve: listening on {handle.url}", flush=True)
    while not stop_requested.wait(0.5):
        pass
    print("sqlwin serve: stopping", flush=True)
    handle.stop()
    return 0


class ServerProcess:
    """``sqlwin serve`` in a child process, for tests and benchmarks.

    ``start()`` waits for the "listening" line (a bare TCP probe would make HiveServer2 log a
    failed handshake); ``stop()`` sends SIGTERM and waits, killing only after a timeout.
    """

    def __init__(self, host: str = "127.0.0.1", port: int | None = None, *, args: list[str] | None = None,
                 env: dict[str, str] | None = None, log_path: str | os.PathLike[str] | None = None):
        self.host = host
        self.port = port or free_port(host)
        self.args = list(args or [])
        self.env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", **(env or {})}
        self._own_log = log_path is None  # a temp log is removed after a clean stop
        self.log_path = Path(log_path or tempfile.mkstemp(prefix="sqlwin-serve-", suffix=".log")[1])
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"jdbc:hive2://{self.host}:{self.port}/default"

    def start(self, timeout: float = 240.0) -> ServerProcess:
        cmd = [sys.executable, "-m", "sqlwin", "serve", "--host", self.host, "--port", str(self.port),
               *self.args]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                         stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sqlwin serve exited with {self.proc.returncode}:\n{self.log_tail()}")
            if b"sqlwin serve: listening on" in self.log_path.read_bytes():
                return self
            time.sleep(0.3)
        self.stop()
        raise TimeoutError(f"sqlwin serve did not start in {timeout:.0f}s:\n{self.log_tail()}")

    def log_tail(self, chars: int = 4000) -> str:
        return self.log_path.read_bytes()[-chars:].decode(errors="replace")

    def stop(self, timeout: float = 60.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self._own_log and self.proc.returncode == 0:
            self.log_path.unlink(missing_ok=True)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago (the OS picks it)."""
    import socket

    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


if __name__ == "__main__":
    sys.exit(main())
