"""Day partitions of the big append-mostly tables (issue 30, decision 122).

A table registered here is PARTITION BY RANGE on a bigint key whose value carries its day:
ids are `(days since 1970-01-01 UTC) << 32 | sequence` (`notifier_day_id`), so a day D's rows
are the ids [D << 32, (D + 1) << 32) and live in the partition `<table>_YYYYMMDD`. A statement
that names its row by id touches one partition; expiry detaches and drops whole days.

    spec      what a partitioned table is (key, per-partition unique indexes, in-flight guard)
    catalog   the partitions that exist, read from pg_catalog
    create    a day's partition, created ahead and on demand (ATTACH: no lock a send waits on)
    expire    detach (CONCURRENTLY) and drop the days past a retention
    convert   an unpartitioned table moved into the layout in batches while the system runs
    routing   an INSERT that finds no partition creates it and runs again; the idempotency floor
"""
