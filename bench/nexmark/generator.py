"""A deterministic Nexmark-style event generator (persons, auctions, bids) writing parquet.

It follows the shape of the Nexmark generator (Flink/Beam): events are numbered 0, 1, ... in
arrival order, and each block of 50 events holds 1 person, 3 auctions and 46 bids; sellers and
bidders are recent persons (a few hot ones), bids go to recent auctions (one hot auction at a
time), prices are log-uniform. Event ``i`` happens at ``start + i / rate``; bid timestamps are then
perturbed so a stream has something to do: a fraction of bids is slightly out of order (up to
``disorder`` behind), a smaller fraction is late (``late_min`` .. ``late_max`` behind, far past
any reasonable watermark). Rows are written in arrival order; ``seq`` is the event number (the
arrival order a replay stream needs, since ``date_time`` is not monotonic).

Everything is vectorized (numpy + pyarrow) and written chunk by chunk (one parquet file per
chunk and table), so 10M events never sit in memory at once. The output depends only on the
seed and the parameters, never on the machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

PROPORTION = 50  # events per block: 1 person, 3 auctions, 46 bids (Nexmark's defaults)
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
ACTIVE_PEOPLE = 1000  # sellers and bidders are drawn from the most recent persons
IN_FLIGHT_AUCTIONS = 100  # bids go to one of the most recent auctions ...
HOT_AUCTION_RATIO = 2  # ... or, half the time, to the current hot auction
HOT_BIDDER_RATIO = 4  # 3 bids in 4 come from a hot bidder
HOT_SELLER_RATIO = 4
CHUNK_EVENTS = 1_000_000  # fixed, so the output does not depend on memory or chunking choices

FIRST_NAMES = ["Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"]
LAST_NAMES = ["Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"]
CITIES = ["Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle",
          "Kent", "Cheyenne"]
STATES = ["AZ", "CA", "ID", "OR", "WA", "WY"]
CHANNELS = ["Google", "Facebook", "Baidu", "Apple"]
CATEGORIES = 5

TS = pa.timestamp("us", tz="UTC")  # Spark reads this as TIMESTAMP, DuckDB as TIMESTAMPTZ (same instants)
SCHEMAS = {
    "persons": pa.schema([("id", pa.int64()), ("name", pa.string()), ("email_address", pa.string()),
                          ("credit_card", pa.string()), ("city", pa.string()), ("state", pa.string()),
                          ("date_time", TS), ("seq", pa.int64())]),
    "auctions": pa.schema([("id", pa.int64()), ("item_name", pa.string()), ("initial_bid", pa.int64()),
                           ("reserve", pa.int64()), ("date_time", TS), ("expires", TS), ("seller", pa.int64()),
                           ("category", pa.int64()), ("seq", pa.int64())]),
    "bids": pa.schema([("auction", pa.int64()), ("bidder", pa.int64()), ("price", pa.int64()),
                       ("channel", pa.string()), ("url", pa.string()), ("date_time", TS), ("seq", pa.int64())]),
}


@dataclass(frozen=True)
class Config:
    """What the generated data depends on (saved beside it as ``config.json``)."""

    events: int
    seed: int = 42
    rate: int = 10_000  # events per second of event time (Nexmark's default first event rate)
    disorder_fraction: float = 0.05  # bids up to ``disorder_s`` behind
    disorder_s: float = 4.0
    late_fraction: float = 0.001  # bids far behind: late for any watermark of seconds
    late_min_s: float = 120.0  # late for every window of every query, also CUMULATE's minute (bench README)
    late_max_s: float = 600.0
    start: str = "2024-01-01T00:00:00"


def _pick(rng: np.random.Generator, values: list[str], n: int) -> pa.Array:
    return pa.array(values, pa.string()).take(pa.array(rng.integers(0, len(values), n)))


def _concat(*parts: pa.Array | str) -> pa.Array:
    import pyarrow.compute as pc

    return pc.binary_join_element_wise(*parts, "")


def _recent(rng: np.random.Generator, last: np.ndarray, active: int, lead: int = 0) -> np.ndarray:
    """A random id among the ``active`` most recent ones up to ``last`` (+``lead`` ahead), base 0."""
    count = np.minimum(last + 1, active)
    return last + 1 - count + (rng.random(len(last)) * (count + lead)).astype(np.int64)


def _chunk(cfg: Config, lo: int, hi: int) -> dict[str, pa.Table]:
    import pyarrow.compute as pc

    rng = np.random.default_rng([cfg.seed, lo // CHUNK_EVENTS])
    start_us = int(np.datetime64(cfg.start, "us").astype(np.int64))
    step_us = 1_000_000 / cfg.rate
    ev = np.arange(lo, hi, dtype=np.int64)
    block, rem = ev // PROPORTION, ev % PROPORTION
    ts = start_us + (ev * step_us).astype(np.int64)
    out: dict[str, pa.Table] = {}

    # persons: the first event of each block
    m = rem == 0
    pid, pts, n = block[m], ts[m], int(m.sum())
    first, last = _pick(rng, FIRST_NAMES, n), _pick(rng, LAST_NAMES, n)
    name = _concat(first, " ", last)
    out["persons"] = pa.table({
        "id": pid + FIRST_PERSON_ID,
        "name": name,
        "email_address": _concat(pc.utf8_lower(first), "@", pc.utf8_lower(last), ".com"),
        "credit_card": pa.array([f"{x:016d}" for x in rng.integers(0, 10**16, n)], pa.string()),
        "city": _pick(rng, CITIES, n),
        "state": _pick(rng, STATES, n),
        "date_time": pa.array(pts, TS),
        "seq": ev[m],
    }, schema=SCHEMAS["persons"])

    # auctions: events 1..3 of each block
    m = (rem >= 1) & (rem < 4)
    aid, ats, n = block[m] * 3 + rem[m] - 1, ts[m], int(m.sum())
    last_person = block[m]
    hot = rng.integers(0, HOT_SELLER_RATIO, n) == 0
    seller = np.where(hot, (last_person // HOT_SELLER_RATIO) * HOT_SELLER_RATIO,
                      _recent(rng, last_person, ACTIVE_PEOPLE))
    initial = np.round(10 ** (rng.random(n) * 6) * 100).astype(np.int64)
    out["auctions"] = pa.table({
        "id": aid + FIRST_AUCTION_ID,
        "item_name": _concat("item-", pa.array(rng.integers(0, 100_000, n)).cast(pa.string())),
        "initial_bid": initial,
        "reserve": initial + np.round(10 ** (rng.random(n) * 6) * 100).astype(np.int64),
        "date_time": pa.array(ats, TS),
        "expires": pa.array(ats + rng.integers(1, 600, n) * 1_000_000, TS),
        "seller": seller + FIRST_PERSON_ID,
        "category": rng.integers(0, CATEGORIES, n) + 10,
        "seq": ev[m],
    }, schema=SCHEMAS["auctions"])

    # bids: the other 46 events of each block
    m = rem >= 4
    bts, n = ts[m].copy(), int(m.sum())
    last_person, last_auction = block[m], block[m] * 3 + 2
    hot = rng.integers(0, HOT_AUCTION_RATIO, n) > 0
    auction = np.where(hot, (last_auction // HOT_AUCTION_RATIO) * HOT_AUCTION_RATIO,
                       _recent(rng, last_auction, IN_FLIGHT_AUCTIONS))
    hot = rng.integers(0, HOT_BIDDER_RATIO, n) > 0
    bidder = np.where(hot, (last_person // HOT_BIDDER_RATIO) * HOT_BIDDER_RATIO + 1,
                      _recent(rng, last_person, ACTIVE_PEOPLE))
    u = rng.random(n)
    late = u < cfg.late_fraction
    disorder = (u >= cfg.late_fraction) & (u < cfg.late_fraction + cfg.disorder_fraction)
    behind = rng.random(n)
    bts[disorder] -= (behind[disorder] * cfg.disorder_s * 1e6).astype(np.int64)
    span = cfg.late_max_s - cfg.late_min_s
    bts[late] -= ((cfg.late_min_s + behind[late] * span) * 1e6).astype(np.int64)
    channel_ix = rng.integers(0, len(CHANNELS), n)
    channel = pa.array(CHANNELS, pa.string()).take(pa.array(channel_ix))
    out["bids"] = pa.table({
        "auction": auction + FIRST_AUCTION_ID,
        "bidder": bidder + FIRST_PERSON_ID,
        "price": np.round(10 ** (rng.random(n) * 6) * 100).astype(np.int64),
        "channel": channel,
        "url": _concat("https://www.nexmark.com/", pc.utf8_lower(channel), "/item.htm?query=",
                       pa.array(channel_ix).cast(pa.string())),
        "date_time": pa.array(bts, TS),
        "seq": ev[m],
    }, schema=SCHEMAS["bids"])
    return out


def generate(root: Path, cfg: Config, progress=None) -> Path:
    """Write ``root/{persons,auctions,bids}/part-NNNNN.parquet``; reuse them when ``config.json`` matches."""
    marker = root / "config.json"
    if marker.exists() and json.loads(marker.read_text()) == asdict(cfg):
        return root
    if root.exists():
        shutil.rmtree(root)
    for table in SCHEMAS:
        (root / table).mkdir(parents=True)
    for part, lo in enumerate(range(0, cfg.events, CHUNK_EVENTS)):
        hi = min(lo + CHUNK_EVENTS, cfg.events)
        for table, data in _chunk(cfg, lo, hi).items():
            pq.write_table(data, root / table / f"part-{part:05d}.parquet")
        if progress:
            progress(hi)
    marker.write_text(json.dumps(asdict(cfg), indent=2))
    return root


def parse_size(text: str) -> int:
    """'100k', '1M', '2.5M', '2000' -> events."""
    text = text.strip().lower().replace("_", "")
    mult = {"k": 1_000, "m": 1_000_000}.get(text[-1:], 1)
    return int(float(text[:-1] if mult > 1 else text) * mult)


def main() -> None:
    parser = argparse.ArgumentParser(description="Write Nexmark-style parquet (persons, auctions, bids).")
    parser.add_argument("out", type=Path)
    parser.add_argument("--events", default="1M")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--rate", type=int, default=Config.rate)
    parser.add_argument("--disorder-fraction", type=float, default=Config.disorder_fraction)
    parser.add_argument("--late-fraction", type=float, default=Config.late_fraction)
    args = parser.parse_args()
    cfg = Config(parse_size(args.events), args.seed, args.rate, args.disorder_fraction,
                 late_fraction=args.late_fraction)
    generate(args.out, cfg, progress=lambda done: print(f"{done:,} / {cfg.events:,} events", flush=True))


if __name__ == "__main__":
    main()
