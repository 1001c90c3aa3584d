"""Load test of `sqlwin serve`: concurrent pyhive clients running mixed sqlwin and plain queries.

    .venv/bin/python bench/server.py                       # 16 clients x 50 queries, own server
    .venv/bin/python bench/server.py --clients 4 --queries 10 --port 10000   # against a running one

Every client has its own JDBC session (so its own temp view of the Flink Bid table), checks
every result against hand-worked rows, and one extra client disconnects in the middle of a
long query: the others must not notice. Prints queries/s and p50/p99 latency.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

BIDS_VIEW = """CREATE OR REPLACE TEMPORARY VIEW bids AS
SELECT CAST(bidtime AS TIMESTAMP) AS bidtime, CAST(price AS DECIMAL(10, 2)) AS price, item, supplier_id
FROM VALUES ('2020-04-15 08:05:00', 4.00, 'C', 'supplier1'), ('2020-04-15 08:07:00', 2.00, 'A', 'supplier1'),
            ('2020-04-15 08:09:00', 5.00, 'D', 'supplier2'), ('2020-04-15 08:11:00', 3.00, 'B', 'supplier2'),
            ('2020-04-15 08:13:00', 1.00, 'E', 'supplier1'), ('2020-04-15 08:17:00', 6.00, 'F', 'supplier2')
     AS t(bidtime, price, item, supplier_id)"""

_W = "CAST(window_start AS STRING), CAST(window_end AS STRING), CAST(SUM(price) AS STRING)"
# name -> (SQL, expected rows), worked out by hand from Apache Flink's Bid example above. Every
# column is a string so that beeline's text output and pyhive's rows compare the same way.
QUERIES: dict[str, tuple[str, list[tuple[str, ...]]]] = {
    "tumble": (
        f"SELECT 'tumble', '-', {_W} FROM TUMBLE(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '10' MINUTES) "
        "GROUP BY window_start, window_end ORDER BY 3",
        [("tumble", "-", "2020-04-15 08:00:00", "2020-04-15 08:10:00", "11.00"),
         ("tumble", "-", "2020-04-15 08:10:00", "2020-04-15 08:20:00", "10.00")]),
    "hop": (
        f"SELECT 'hop', '-', {_W} FROM TABLE(HOP(TABLE bids, DESCRIPTOR(bidtime), INTERVAL '5' MINUTES, "
        "INTERVAL '10' MINUTES)) GROUP BY window_start, window_end ORDER BY 3",
        [("hop", "-", "2020-04-15 08:00:00", "2020-04-15 08:10:00", "11.00"),
         ("hop", "-", "2020-04-15 08:05:00", "2020-04-15 08:15:00", "15.00"),
         ("hop", "-", "2020-04-15 08:10:00", "2020-04-15 08:20:00", "10.00"),
         ("hop", "-", "2020-04-15 08:15:00", "2020-04-15 08:25:00", "6.00")]),
    "session": (
        f"SELECT 'session', supplier_id, {_W} FROM SESSION(TABLE bids PARTITION BY supplier_id, "
        "DESCRIPTOR(bidtime), INTERVAL '5' MINUTES) GROUP BY supplier_id, window_start, window_end ORDER BY 2, 3",
        [("session", "supplier1", "2020-04-15 08:05:00", "2020-04-15 08:12:00", "6.00"),
         ("session", "supplier1", "2020-04-15 08:13:00", "2020-04-15 08:18:00", "1.00"),
         ("session", "supplier2", "2020-04-15 08:09:00", "2020-04-15 08:16:00", "8.00"),
         ("session", "supplier2", "2020-04-15 08:17:00", "2020-04-15 08:22:00", "6.00")]),
    "rows3": (
        f"SELECT 'rows3', CAST(window_index AS STRING), {_W} FROM TUMBLE(TABLE bids, DESCRIPTOR(bidtime), "
        "ROWS 3) GROUP BY window_index, window_start, window_end ORDER BY 2",
        [("rows3", "0", "2020-04-15 08:05:00", "2020-04-15 08:09:00.001", "11.00"),
         ("rows3", "1", "2020-04-15 08:11:00", "2020-04-15 08:17:00.001", "10.00")]),
    "plain_group": (
        "SELECT 'plain_group', supplier_id, CAST(SUM(price) AS STRING) FROM bids GROUP BY supplier_id ORDER BY 2",
        [("plain_group", "supplier1", "7.00"), ("plain_group", "supplier2", "14.00")]),
    "plain_filter": (
        "SELECT 'plain_filter', item FROM bids WHERE price > 4 ORDER BY item",
        [("plain_filter", "D"), ("plain_filter", "F")]),
    "plain_const": ("SELECT 'plain_const', CAST(1 + 1 AS STRING)", [("plain_const", "2")]),
}
# Runs until cancelled: the disconnecting client leaves it behind.
LONG_QUERY = ("SELECT COUNT(*) FROM TUMBLE(TABLE(SELECT timestamp_seconds(id) AS ts FROM range(0, 100000000000)), "
              "DESCRIPTOR(ts), INTERVAL '1' MINUTE)")


def connect(host: str, port: int, **kwargs):
    from pyhive import hive

    return hive.connect(host=host, port=port, auth=kwargs.pop("auth", "NONE"),
                        username=kwargs.pop("username", "bench"), **kwargs)


def fetch(cursor, sql: str) -> list[tuple]:
    cursor.execute(sql)
    return [tuple(row) for row in cursor.fetchall()]


@dataclass
class LoadResult:
    latencies: list[float] = field(default_factory=list)
    records: list[tuple[int, str, float, float]] = field(default_factory=list)  # client, query, start, s
    errors: list[str] = field(default_factory=list)
    wall: float = 0.0
    disconnected_running: bool = False

    @property
    def qps(self) -> float:
        return len(self.latencies) / self.wall if self.wall else 0.0

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] if ordered else 0.0

    def summary(self) -> str:
        return (f"{len(self.latencies)} queries in {self.wall:.1f}s: {self.qps:.2f} queries/s, "
                f"p50 {self.percentile(50) * 1000:.0f} ms, p99 {self.percentile(99) * 1000:.0f} ms, "
                f"mean {statistics.fmean(self.latencies or [0]) * 1000:.0f} ms, {len(self.errors)} errors")


def _client(host: str, port: int, index: int, queries: int, result: LoadResult, lock: threading.Lock) -> None:
    names = list(QUERIES)
    try:
        conn = connect(host, port)
        cursor = conn.cursor()
        cursor.execute(BIDS_VIEW)
        for i in range(queries):
            name = names[(index + i) % len(names)]
            sql, expected = QUERIES[name]
            started = time.perf_counter()
            rows = fetch(cursor, sql)
            elapsed = time.perf_counter() - started
            with lock:
                result.latencies.append(elapsed)
                result.records.append((index, name, started, elapsed))
                if rows != expected:
                    result.errors.append(f"client {index} {name}: got {rows}")
        conn.close()
    except Exception as e:  # a failed client is a failed benchmark, with the reason
        with lock:
            result.errors.append(f"client {index}: {type(e).__name__}: {str(e)[:300]}")


def _disconnector(host: str, port: int, result: LoadResult, lock: threading.Lock) -> None:
    """Start a query that never ends, wait until it runs, then drop the TCP connection."""
    from TCLIService.ttypes import TOperationState

    try:
        conn = connect(host, port)
        cursor = conn.cursor()
        cursor.execute(LONG_QUERY, async_=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if cursor.poll().operationState == TOperationState.RUNNING_STATE:
                with lock:
                    result.disconnected_running = True
                break
            time.sleep(0.2)
        time.sleep(1.0)
        conn._transport.close()  # no CloseSession: as if the client process died
    except Exception as e:
        with lock:
            result.errors.append(f"disconnector: {type(e).__name__}: {e}")


def run_load(host: str, port: int, clients: int = 16, queries: int = 50, *,
             disconnect: bool = True) -> LoadResult:
    """``clients`` threads x ``queries`` queries each (plus the disconnecting client)."""
    result, lock = LoadResult(), threading.Lock()
    threads = [threading.Thread(target=_client, args=(host, port, i, queries, result, lock))
               for i in range(clients)]
    if disconnect:
        threads.insert(clients // 2, threading.Thread(target=_disconnector, args=(host, port, result, lock)))
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.wall = time.perf_counter() - started
    if disconnect and not result.disconnected_running:
        result.errors.append("disconnector: the long query never reached RUNNING")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, help="use a running server instead of starting one")
    parser.add_argument("--no-disconnect", action="store_true")
    args = parser.parse_args(argv)
    server = None
    if args.port is None:
        from sqlwin.server import ServerProcess

        started = time.perf_counter()
        server = ServerProcess(args.host).start()
        print(f"server up on {server.url} in {time.perf_counter() - started:.1f}s", flush=True)
    port = args.port or server.port
    try:
        # One client first, so JVM warm-up is not counted as latency.
        warm = connect(args.host, port).cursor()
        warm.execute(BIDS_VIEW)
        for sql, _ in QUERIES.values():
            fetch(warm, sql)
        result = run_load(args.host, port, args.clients, args.queries, disconnect=not args.no_disconnect)
    finally:
        if server is not None:
            server.stop()
    print(f"{args.clients} clients x {args.queries} mixed queries"
          f"{'' if args.no_disconnect else ' + 1 client disconnecting mid-query'}: {result.summary()}")
    origin = min((r[2] for r in result.records), default=0.0)
    for client, name, started, elapsed in sorted(result.records, key=lambda r: -r[3])[:5]:
        print(f"slowest: client {client} {name} at +{started - origin:.1f}s took {elapsed:.2f}s")
    for error in result.errors[:20]:
        print("ERROR", error)
    return 1 if result.errors else 0


if __name__ == "__main__":
    sys.exit(main())
