"""How Silver's executors read Bronze: the mechanisms measured side by side on one backlog.

Not a test. The 0.45 M-event ``sale`` backlog of ``bench_backlog.py`` (cached under
``.cache/bench/``), read in one ``local[2]`` session, each way twice (the second run counts):

* **driver Python** (the baseline, the old path): every file decoded in the driver with fastavro
  into one Arrow table (``helpers.bronze.read.avro_table``);
* **binaryFile + mapInArrow**: the same decoder on the executors, over Spark's ``binaryFile``;
* **spark-avro**: Spark's official Avro source (what ingestion uses);
* **inspect**: the block-header walk of every file on the executors (``inspect_files``), which
  ingestion runs before reading; on copies of the files under new locations each time, since
  layouts already worked out are kept by file identity and a second walk would measure that cache;
* **cache vs read again**: the prepared events persisted (``MEMORY_AND_DISK``) and counted, against
  reading and preparing them again.

Run::

    .venv/bin/python bench/bench_bronze_read.py
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
from bench_backlog import backlog  # noqa: E402

from helpers.bronze.frames import inspect_files, read_events, spark_schema  # noqa: E402
from helpers.bronze.read import avro_table  # noqa: E402
from helpers.bronze.store import BronzeStore  # noqa: E402
from helpers.bronze.synthetic import SALE_TOPIC  # noqa: E402
from helpers.params import load_params  # noqa: E402
from helpers.silver.checked import check_events  # noqa: E402
from helpers.silver.prepare import prepare_events  # noqa: E402
from helpers.silver.tables import position_fields, table_config  # noqa: E402
from helpers.spark import build_spark_session  # noqa: E402

EVENTS = 450_000


def timed(run: Callable[[], object]) -> float:
    """Seconds of the second of two runs (the first warms the JVM and the Python workers)."""
    run()
    started = time.monotonic()
    run()
    return time.monotonic() - started


def main() -> int:
    bronze = backlog(EVENTS)
    params = load_params("local", overrides={"spark.catalog": "none", "lake.bronze": str(bronze)})
    spark = build_spark_session(params, app_name="bench-bronze-read")
    files = BronzeStore(bronze).list(SALE_TOPIC)
    paths = [f.uri for f in files]
    layouts = inspect_files(spark, files)
    schema = spark_schema(spark, layouts[0].parts[0].schema)

    def driver() -> int:
        return sum(avro_table(Path(p).read_bytes()).num_rows for p in paths)

    def decode(batches: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
        for batch in batches:
            for data in batch.column("content").to_pylist():
                yield from avro_table(data).to_batches()

    def executors_python() -> None:
        frame = spark.read.format("binaryFile").load(paths).select("content").mapInArrow(decode, schema)
        frame.write.format("noop").mode("overwrite").save()

    def spark_avro() -> None:
        read_events(spark, layouts).write.format("noop").mode("overwrite").save()

    table = next(t for t in params.silver.tables if t.name == "sale")
    config = table_config(params, table)
    positions = position_fields(params, table)

    def prepared() -> object:
        return prepare_events(
            check_events(read_events(spark, layouts), config, positions), config, "mariadb", positions
        )

    def cached() -> None:
        frame = prepared().persist()  # type: ignore[attr-defined]
        frame.groupBy("_bronze_file").count().collect()
        frame.unpersist()

    def again() -> None:
        prepared().groupBy("_bronze_file").count().collect()  # type: ignore[attr-defined]

    copies = Path(tempfile.mkdtemp(prefix="bench_bronze_read_", dir="/tmp"))

    def walk_new_files() -> None:
        """The walk over copies of the files at locations not seen before (no cached layout);
        the copy is made before the clock starts."""
        target = copies / str(len(list(copies.iterdir())))
        shutil.copytree(bronze / SALE_TOPIC, target / SALE_TOPIC)
        fresh = BronzeStore(target).list(SALE_TOPIC)
        started = time.monotonic()
        walked = inspect_files(spark, fresh)
        walks.append(time.monotonic() - started)
        assert sum(part.records for layout in walked for part in layout.parts) == EVENTS

    walks: list[float] = []
    walk_new_files()  # warms the job, as timed() does
    walk_new_files()
    shutil.rmtree(copies, ignore_errors=True)
    rows = [
        ("driver Python (old path, baseline)", timed(driver)),
        ("binaryFile + mapInArrow, Python decoder on executors", timed(executors_python)),
        ("spark-avro on executors (ingestion)", timed(spark_avro)),
        ("inspect: block headers on executors (files not seen before)", walks[-1]),
        ("prepared events: persist + count", timed(cached)),
        ("prepared events: read again + count", timed(again)),
    ]
    base = rows[0][1]
    print(f"\n## Bronze read on Spark: {EVENTS:,} events, {len(files)} files, local[2]\n")
    print("| how | seconds | events/s | against the baseline |")
    print("|---|---|---|---|")
    for label, seconds in rows:
        print(f"| {label} | {seconds:.2f} | {EVENTS / seconds:,.0f} | {base / seconds:.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
