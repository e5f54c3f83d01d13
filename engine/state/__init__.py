"""Durable state: keyed state tables, the RocksDB store, the write-ahead log and checkpoints.

What this package owns: every byte Swell keeps on disk about its dataflow. Operators and
relations keep their state in `StateTable`s (fully resident dicts with dirty tracking,
or `DiskStateTable`s whose rows live in RocksDB with a bounded cache in memory, both
behind one interface: multi-get, batched puts/deletes, ordered range scans in the key
order of `order`, read-only snapshots; the contract tests pin it for every backend);
at each checkpoint the runtime writes every table's changes, the catalog blob, source
offsets and the WAL truncation in one atomic RocksDB WriteBatch. Between checkpoints,
acknowledged writes (DML and webhook rows) are made durable by the group-committed WAL.

Modules:
- `table`: StateTable (contract; others code against it); its log and keyed layouts;
  TableSnapshot (copy-on-write read-only image).
- `disk_table`: DiskStateTable, the same contract with RocksDB as the source of truth
  (vnode-partitioned ordered keys, the epoch's writes in an overlay, a bounded cache
  of hot rows: `HotCache`); DiskTableSnapshot.
- `memcmp`: memcomparable key bytes whose byte order is `order`'s key order.
- `order`: the key order of `StateTable.scan` (what a memcomparable layout must match).
- `codec`: key/value byte encodings (marshal format 2 + tagged extensions), table prefixes.
- `store`: StateStore (one rocksdict `Rdict`, raw mode), WriteBatchLike, StorageError.
- `wal`: Wal (sequence-numbered records, background group commit, async append).
- `checkpoint`: Checkpointer, CheckpointMeta; the numbered checkpoint and recovery order.
- `format`: the data directory's format version (FORMAT_VERSION), migrations, refusals.

Key layout of the single database at `<data_dir>/state` (default column family):

| key                                        | value                            |
|--------------------------------------------|----------------------------------|
| table id (4 bytes BE) + 0x02 + seq (8 B BE)| log record: marshal of row blobs |
| table id (4 bytes BE) + encode_key(key)    | encode_value(value) (keyed)      |
| table id + 0x00 + vnode (1 B) + memcmp key | encode_value(value) (disk table) |
| 0xFFFF "wal/" + seq (8 bytes BE)           | WAL payload (caller's bytes)     |
| 0xFFFF "walfloor"                          | highest truncated seq (8 B BE)   |
| 0xFFFF "meta/checkpoint"                   | version, epoch, wal_seq          |
| 0xFFFF "meta/x/" + name (utf-8)            | extra blob (catalog, offsets...) |
| 0xFFFF "format"                            | format version (4 B BE; none = 1)|

Table ids are limited to 0..0xFFFEFFFF (`codec.MAX_TABLE_ID`; `codec.table_prefix` raises
beyond), so no table's range, nor the exclusive end `table_prefix(id + 1)` that
`StateTable.drop` deletes up to, reaches the reserved 0xFFFF prefix.

Recovery order (details in `engine.state.checkpoint`): open the store -> check (and
migrate) its format version (`engine.state.format`) -> create the Wal
(resumes numbering) -> `Checkpointer.load()` meta -> rebuild the catalog from meta.extra ->
`StateTable.load` every table -> seek sources to the offsets -> replay
`wal.records_after(meta.wal_seq)` -> normal epochs.

Upstream: rocksdict, `engine.errors`, `engine.types` (the Python value forms).
Downstream: the stream runtime (commits, recovery), operators (StateTable only), the
webhook connector and DML path (Wal), the catalog (stores its blob as a checkpoint extra).
"""
